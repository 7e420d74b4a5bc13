// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"fmt"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// Stats counts what otelomni refused, moved or repaired instead of exporting
// it wrong. Each kind is also logged once, through the OpenTelemetry error
// handler (otel.Handle), the first time it happens; the log line is bounded
// like every string otelomni records.
type Stats struct {
	// RejectedIntervals counts measurements that made no span because they
	// were bad: an end before its start, a zero time.Time, a time outside
	// what a span can carry (1970 to 2262-04-11).
	RejectedIntervals uint64
	// Conflicts counts measurements that made no span because they
	// contradict the tree: a phase measured twice for one request (a
	// second exec), a phase outside the interval of the span it hangs
	// under (one that starts before its request, a part of exec outside
	// exec), a live phase started under an exec or forward that had
	// already ended or whose span was still starting on another goroutine.
	Conflicts uint64
	// Misuse counts calls that did nothing, or left something out,
	// because the API was misused: a phase started or recorded on a
	// request that had already ended, a request or batch ended twice, a
	// member recorded in a batch that had ended, an invalid phase (one the
	// call does not take, an output or step index of the wrong type), each attribute whose key
	// otelomni sets itself (a request's or stage's identity, the phase, a
	// batch's id and size, the output and step keys where no output or
	// step is read: left out, the span made without it), a propagator or
	// carrier that panicked (a nil carrier is simply ignored), and each int
	// out of its documented range (an output or step index, a stage id, a
	// negative count or size), which is not recorded.
	// (A nil context is not misuse: it is taken as context.Background().)
	Misuse uint64
	// ClockSkew counts parts computed across two hosts' clocks (a
	// transfer's in-flight time) that came out negative and were left out.
	ClockSkew uint64
	// ClampedEnds counts spans whose end (or start) was moved so that it
	// covers its children, or lies inside its parent: a request ended
	// (End) before a recorded phase's end, an EndAt earlier than a phase it
	// holds, an exec ended before a part recorded inside it (the span ends
	// at the latest such end instead), a stage of this process given a
	// start before its request's (it starts there).
	ClampedEnds uint64
	// RepairedStrings counts strings that were not valid UTF-8 (each
	// invalid sequence replaced by U+FFFD) or longer than the value limit
	// (cut at a UTF-8 boundary).
	RepairedStrings uint64
	// OtherModels counts requests whose model the histograms record as
	// "_OTHER", beyond the limit on distinct models.
	OtherModels uint64
}

// maxLogBytes bounds what one log line says of a refused measurement: it
// may quote a request id, an error or a panic value.
const maxLogBytes = 2048

type counters struct {
	rejected, conflicts, misuse, skew, clamped, repaired, otherModels atomic.Uint64
	logged                                                            [7]atomic.Bool
}

func (c *counters) snapshot() Stats {
	return Stats{
		RejectedIntervals: c.rejected.Load(), Conflicts: c.conflicts.Load(), Misuse: c.misuse.Load(),
		ClockSkew: c.skew.Load(), ClampedEnds: c.clamped.Load(), RepairedStrings: c.repaired.Load(),
		OtherModels: c.otherModels.Load(),
	}
}

// count adds one to n and logs what once per kind.
func (c *counters) count(n *atomic.Uint64, kind int, what func() string) {
	n.Add(1)
	if c.logged[kind].CompareAndSwap(false, true) {
		otel.Handle(fmt.Errorf("otelomni: %s (logged once; see Instrumenter.Stats)", sanitize.String(what(), maxLogBytes)))
	}
}

// plain is an error's message without the package's prefix, which the log
// line carries once.
func plain(msg string) string { return strings.TrimPrefix(msg, "otelomni: ") }

func (c *counters) reject(err error) {
	c.count(&c.rejected, 0, func() string { return "rejected a bad measurement: " + plain(err.Error()) })
}

func (c *counters) conflict(err error) {
	c.count(&c.conflicts, 1, func() string { return "refused a measurement that contradicts the span tree: " + plain(err.Error()) })
}

func (c *counters) misused(what string) {
	c.count(&c.misuse, 2, func() string { return plain(what) })
}

func (c *counters) skewed(err error) {
	c.count(&c.skew, 3, func() string { return "left out a part skewed across two clocks: " + plain(err.Error()) })
}

func (c *counters) clampedEnd(what string) {
	c.count(&c.clamped, 4, func() string { return plain(what) })
}

func (c *counters) repairedString() {
	c.count(&c.repaired, 5, func() string {
		return "repaired a string that was not valid UTF-8 or was longer than the value limit"
	})
}

func (c *counters) otherModel() {
	c.count(&c.otherModels, 6, func() string {
		return "the histograms record a model as _OTHER: more distinct models than the limit (WithMetricModelLimit)"
	})
}
