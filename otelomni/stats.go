package otelomni

import (
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel"
)

// Stats counts what otelomni refused instead of exporting it wrong. Every
// count is also logged once, through the OpenTelemetry error handler
// (otel.Handle), the first time it happens.
type Stats struct {
	// RejectedIntervals counts measurements that made no span, or were
	// clamped, because they were bad: an end before its start, a zero
	// time.Time, a request ended before it started.
	RejectedIntervals uint64
	// Misuse counts calls that did nothing because the API was misused: a
	// phase started or recorded on a request that had already ended, a
	// request ended twice, an invalid phase. (A nil context is not misuse:
	// it is taken as context.Background().)
	Misuse uint64
	// ClockSkew counts parts computed across two hosts' clocks (a
	// transfer's in-flight time) that came out negative and were left out.
	ClockSkew uint64
}

type counters struct {
	rejected, misuse, skew               atomic.Uint64
	loggedReject, loggedMisu, loggedSkew atomic.Bool
}

func (c *counters) snapshot() Stats {
	return Stats{RejectedIntervals: c.rejected.Load(), Misuse: c.misuse.Load(), ClockSkew: c.skew.Load()}
}

func (c *counters) reject(err error) {
	c.rejected.Add(1)
	if c.loggedReject.CompareAndSwap(false, true) {
		otel.Handle(fmt.Errorf("otelomni: rejected a bad measurement (logged once; see Instrumenter.Stats): %w", err))
	}
}

func (c *counters) misused(what string) {
	c.misuse.Add(1)
	if c.loggedMisu.CompareAndSwap(false, true) {
		otel.Handle(fmt.Errorf("otelomni: %s (logged once; see Instrumenter.Stats)", what))
	}
}

func (c *counters) skewed(err error) {
	c.skew.Add(1)
	if c.loggedSkew.CompareAndSwap(false, true) {
		otel.Handle(fmt.Errorf("otelomni: left out a part skewed across two clocks (logged once; see Instrumenter.Stats): %w", err))
	}
}
