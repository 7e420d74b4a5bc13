// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/otelsetup"
)

// countingExporter counts the spans it is given, and fails every seventh
// export.
type countingExporter struct{ spans, calls atomic.Int64 }

func (c *countingExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	if c.calls.Add(1)%7 == 0 {
		return errors.New("refused")
	}
	c.spans.Add(int64(len(ss)))
	return nil
}
func (*countingExporter) Shutdown(context.Context) error { return nil }

func addsUp(s otelsetup.ExportStats) bool {
	return s.Ended == s.Exported+s.Failed+s.Rejected+s.Refused+s.Pending
}

// TestSetupsAndShutdownsRace: Setups on several goroutines at once, each
// Telemetry shut down by two goroutines at once while spans still end on
// a third, with the globals installed by some: every Shutdown returns the
// same result, and every Telemetry's accounting adds up.
func TestSetupsAndShutdownsRace(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
	handledErrors(t)
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(tp); otel.SetMeterProvider(mp); otel.SetTextMapPropagator(prop) })
	rounds := 500
	if testing.Short() {
		rounds = 50
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range rounds {
				exp := &countingExporter{}
				opts := []otelsetup.Option{otelsetup.WithFallbackExporter(exp)}
				if (g+i)%5 != 0 {
					opts = append(opts, otelsetup.WithoutGlobal())
				}
				tel, err := otelsetup.Setup(context.Background(), opts...)
				if err != nil {
					t.Error(err)
					return
				}
				tr := tel.TracerProvider().Tracer("t")
				var ends, shut sync.WaitGroup
				ends.Go(func() {
					for range 20 {
						_, s := tr.Start(context.Background(), "s")
						s.End()
					}
				})
				var errs [2]error
				for k := range errs {
					shut.Go(func() { errs[k] = tel.Shutdown(context.Background()) })
				}
				shut.Wait()
				ends.Wait()
				if text := func(err error) string {
					if err == nil {
						return ""
					}
					return err.Error()
				}; text(errs[0]) != text(errs[1]) {
					t.Errorf("two Shutdowns returned %v and %v", errs[0], errs[1])
				}
				if st := tel.ExportStats(); !addsUp(st) || st.Exported != uint64(exp.spans.Load()) {
					t.Errorf("stats %+v, the exporter got %d: every span accounted for", st, exp.spans.Load())
				}
			}
		})
	}
	wg.Wait()
}

// TestOneTelemetryRaces: 100 000 spans end on four goroutines while
// others flush, read the accounting and, at the end, shut down: the
// accounting adds up at every read, and exactly after Shutdown.
func TestOneTelemetryRaces(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "64")
	handledErrors(t)
	exp := &countingExporter{}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	rounds := 100_000
	if testing.Short() {
		rounds = 10_000
	}
	tr := tel.TracerProvider().Tracer("t")
	var ends, readers sync.WaitGroup
	var stop atomic.Bool
	for range 4 {
		ends.Go(func() {
			for range rounds / 4 {
				_, s := tr.Start(context.Background(), "s")
				s.End()
			}
		})
	}
	readers.Go(func() {
		for !stop.Load() {
			_ = tel.ForceFlush(context.Background())
		}
	})
	readers.Go(func() {
		for !stop.Load() {
			if st := tel.ExportStats(); st.Exported+st.Failed+st.Rejected+st.Refused > st.Ended {
				t.Errorf("more spans done than ended: %+v", st)
				return
			}
		}
	})
	ends.Wait()
	var shut sync.WaitGroup
	for range 2 {
		shut.Go(func() { _ = tel.Shutdown(context.Background()) })
	}
	shut.Wait()
	stop.Store(true)
	readers.Wait()
	st := tel.ExportStats()
	if st.Ended != uint64(rounds) || !addsUp(st) || st.Exported != uint64(exp.spans.Load()) {
		t.Errorf("stats %+v, the exporter got %d of %d spans: every span accounted for", st, exp.spans.Load(), rounds)
	}
}
