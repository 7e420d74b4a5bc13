// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package fleet runs the collector tier shipped in deploy/ on loopback: the
// backend Jaeger storing in Badger, the tail-sampling collector in front of
// it, and replicas of the multi-stage example sending through it. It reads
// back what each part counted (the collector's decisions, the backend's
// traces, the engines' histograms and the span metrics) for `make fleet`
// and the end-to-end tests.
package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/otelomni/otelomni/omnitrace/jaegerquery"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// Tier is a running backend and collector.
type Tier struct {
	Backend   *Backend
	Collector *Collector
	// Dir holds the Badger store and the logs.
	Dir string
}

// CollectorEnv names a collector binary to run deploy/collector.yaml with
// instead of tools/bin/otelcol, such as otelcol-contrib v0.151.0 or later:
// the tier's tests and tools then check that distribution.
const CollectorEnv = "OTELOMNI_COLLECTOR"

// CollectorBinary is the collector that runs deploy/collector.yaml:
// $OTELOMNI_COLLECTOR when set, else tools/bin/otelcol (`make otelcol-bin`).
func CollectorBinary() (string, error) {
	if p := os.Getenv(CollectorEnv); p != "" {
		return p, nil
	}
	root, err := jaeger.RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "tools", "bin", "otelcol")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("fleet: %s not built (run `make otelcol-bin`): %w", p, err)
	}
	return p, nil
}

// StartTier starts the backend (Badger in dir/badger) from the Jaeger
// binary bin, and a collector with settings in front of it, from
// [CollectorBinary].
func StartTier(ctx context.Context, bin, dir string, settings map[string]string) (*Tier, error) {
	colBin, err := CollectorBinary()
	if err != nil {
		return nil, err
	}
	b, err := StartBackend(ctx, bin, filepath.Join(dir, "badger"), dir)
	if err != nil {
		return nil, err
	}
	c, err := StartCollector(ctx, colBin, b.OTLPGRPC, dir, settings)
	if err != nil {
		b.Stop()
		return nil, err
	}
	return &Tier{Backend: b, Collector: c, Dir: dir}, nil
}

// Stop stops the collector (which flushes what it holds), then the backend.
func (t *Tier) Stop() {
	t.Collector.Stop()
	t.Backend.Stop()
}

// pollEvery is how often the waits below look again.
const pollEvery = 250 * time.Millisecond

// until calls done until it reports true, ctx ends or within passes; the
// caller checks what it got last, so a deadline is only a failure bound.
func until(ctx context.Context, within time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := done()
		if err != nil || ok || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// WaitDecided waits until the collector has seen at least traces traces
// and decided every one, and returns its tally.
func (c *Collector) WaitDecided(ctx context.Context, traces int, within time.Duration) (Tally, error) {
	return c.WaitTally(ctx, within, func(t Tally) bool { return t.NewTraces >= traces && t.Decided() })
}

// WaitTally waits until the collector's tally satisfies done, and returns
// the last one read.
func (c *Collector) WaitTally(ctx context.Context, within time.Duration, done func(Tally) bool) (Tally, error) {
	var t Tally
	err := until(ctx, within, func() (bool, error) {
		var err error
		t, err = c.Tally(ctx)
		return done(t), err
	})
	return t, err
}

// WaitStored waits until the backend holds kept complete traces and
// nothing else, and returns the last report.
func WaitStored(ctx context.Context, c *jaegerquery.Client, from, to time.Time, reqs []Request, kept int, within time.Duration) (Report, error) {
	var rep Report
	err := until(ctx, within, func() (bool, error) {
		var err error
		rep, err = Check(ctx, c, from, to, reqs)
		return rep.Kept() >= kept && rep.Complete(), err
	})
	return rep, err
}

// Counts are the requests as the two kinds of metrics on the collector's
// Prometheus endpoint count them.
type Counts struct {
	// Engine is the engines' request-duration histogram count: every
	// request, recorded in the engine whatever the sampling.
	Engine int
	// Spans is the span metrics' count of request spans: the kept traces.
	Spans int
}

// Prometheus names of what Counts reads. The engine histogram's name comes
// from otelomni's exported instrument name.
const spanMetricsCalls = "traces_span_metrics_calls_total"

// PromSeconds is the Prometheus name that the collector's Prometheus
// exporter gives an OpenTelemetry instrument whose unit is seconds.
func PromSeconds(instrument string) string {
	return strings.ReplaceAll(instrument, ".", "_") + "_seconds"
}

// ReadCounts scrapes the collector's Prometheus endpoint. instrument is the
// engines' request-duration histogram (otelomni's exported name).
func (c *Collector) ReadCounts(ctx context.Context, instrument string) (Counts, error) {
	m, err := Scrape(ctx, "http://"+c.Prometheus+"/metrics")
	if err != nil {
		return Counts{}, err
	}
	return Counts{
		Engine: int(m.Sum(PromSeconds(instrument)+"_count", nil)),
		Spans:  int(m.Sum(spanMetricsCalls, map[string]string{"span_name": spans.RequestSpanName})),
	}, nil
}

// WaitCounts waits until the engines' count reaches engine and the span
// metrics' count reaches kept (each is pushed or flushed on its own
// schedule), and returns the last counts.
func (c *Collector) WaitCounts(ctx context.Context, instrument string, engine, kept int, within time.Duration) (Counts, error) {
	var n Counts
	err := until(ctx, within, func() (bool, error) {
		var err error
		n, err = c.ReadCounts(ctx, instrument)
		return n.Engine >= engine && n.Spans >= kept, err
	})
	return n, err
}

// TempDir makes a folder for a tier's store and logs.
func TempDir() (string, error) { return os.MkdirTemp("", "otelomni-fleet-") }
