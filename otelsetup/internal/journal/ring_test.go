// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// A ring full of spans that are never confirmed (no exporter at all)
// drops or evicts what it cannot hold, counts it, and never waits: the
// loop below ends because no call waits for room.
func TestAFullRingCountsWhatItCannotHoldAndNeverWaits(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, WithSize(minSize), WithHeartbeat(time.Hour))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()))
	tr := tp.Tracer("t")
	n := 200_000
	if raceEnabled {
		n = 40_000
	}
	for range n {
		_, s := tr.Start(context.Background(), "omni.diffusion.exec")
		s.End()
	}
	st := j.Stats()
	if st.Dropped+st.Evicted == 0 {
		t.Fatalf("stats %+v: %d spans through %d bytes lost nothing", st, n, minSize)
	}
	j.die()
	rep, exp := recoverT(t, dir)
	got := exp.stubs()
	if rep.Torn != 0 || rep.Corrupt != 0 || rep.Open != 0 || len(got) == 0 || len(got) > minSize/100 {
		t.Fatalf("report %+v with stats %+v", rep, st)
	}
	if lost := uint64(n - len(got)); lost > st.Dropped+st.Evicted {
		t.Errorf("%d spans not recovered, %d records counted as dropped or evicted", lost, st.Dropped+st.Evicted)
	}
	for _, s := range got {
		if s.Name != "omni.diffusion.exec" || s.EndTime.Before(s.StartTime) {
			t.Fatalf("recovered %+v", s)
		}
	}
}

// Spans that never end keep their start records while far more spans
// than the ring holds go through it: they pin every segment in turn, and
// compaction carries them forward, never evicting them.
func TestOpenSpansSurviveManyRingsOfSpans(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, WithSize(minSize), WithHeartbeat(time.Hour))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(j.SpanProcessor()),
		sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(j.WrapExporter(discardExporter{}))),
	)
	tr := tp.Tracer("t")
	n := 1_000_000
	if raceEnabled || testing.Short() {
		n = 100_000
	}
	journalled := map[[8]byte]bool{}
	for i := range n {
		if i%2000 == 0 {
			// Only this goroutine writes: a start that was not dropped
			// is in the journal.
			before := j.Stats().Dropped
			_, long := tr.Start(context.Background(), "never ends")
			if j.Stats().Dropped == before {
				journalled[[8]byte(long.SpanContext().SpanID())] = true
			}
		}
		_, s := tr.Start(context.Background(), "omni.diffusion.forward")
		s.End()
	}
	st := j.Stats()
	t.Logf("%d spans, %d open: %+v", n, len(journalled), st)
	if st.Carried == 0 || st.Evicted != 0 {
		t.Fatalf("stats %+v: want open spans carried, none evicted", st)
	}
	j.die()
	rep, exp := recoverT(t, dir)
	got := byID(t, exp.stubs())
	if rep.Open != len(journalled) || rep.Ended != 0 || len(journalled) < n/2000/2 {
		t.Fatalf("report %+v, stats %+v; want the %d open spans journalled", rep, st, len(journalled))
	}
	for id := range journalled {
		if s, ok := got[id]; !ok || !strings.Contains(s.Status.Description, "died") {
			t.Errorf("open span %x: recovered %v as %+v", id, ok, s)
		}
	}
}
