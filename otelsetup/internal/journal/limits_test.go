// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Megabytes of strings and ten thousand attributes or events: every
// record stays within its bound, every string within the value limit (cut
// at a UTF-8 boundary), and what was left out is counted, on the span too.
func TestHugeSpansMakeBoundedRecords(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit = -1
	limits.AttributeValueLengthLimit = -1
	limits.EventCountLimit = -1
	tp := sdktrace.NewTracerProvider(sdktrace.WithRawSpanLimits(limits), sdktrace.WithSpanProcessor(j.SpanProcessor()))
	tr := tp.Tracer("t")
	huge := strings.Repeat("é", 5<<20) // 10 MB, two bytes a rune: a cut at 4096 falls between runes... or not
	odd := "x" + huge                  // ...and here it falls inside one

	_, big := tr.Start(context.Background(), odd, trace.WithAttributes(attribute.String(huge, odd), attribute.StringSlice("s", []string{huge, odd})))
	big.AddEvent(huge, trace.WithAttributes(attribute.String("v", huge)))
	big.SetStatus(codes.Error, odd)

	many := make([]attribute.KeyValue, 10_000)
	for i := range many {
		many[i] = attribute.String(fmt.Sprintf("key.%05d", i), strings.Repeat("v", 200))
	}
	_, wide := tr.Start(context.Background(), "wide", trace.WithAttributes(many...))
	for i := range 10_000 {
		wide.AddEvent("event", trace.WithAttributes(attribute.Int("i", i)))
	}
	wide.End()
	_, openWide := tr.Start(context.Background(), "open wide", trace.WithAttributes(many...))
	_ = openWide
	big.End()

	st := j.Stats()
	if st.CutStrings == 0 || st.CutItems == 0 {
		t.Errorf("stats %+v: cuts not counted", st)
	}
	j.die()
	_, exp := recoverT(t, dir)
	got := byID(t, exp.stubs())
	if len(got) != 3 {
		t.Fatalf("%d spans recovered, want 3", len(got))
	}
	limit := DefaultValueLimit
	cutOK := func(what, s string) {
		t.Helper()
		if len(s) > limit || len(s) < limit-3 || !utf8.ValidString(s) {
			t.Errorf("%s: %d bytes (valid UTF-8: %v), want a cut to at most %d at a rune boundary", what, len(s), utf8.ValidString(s), limit)
		}
	}
	b := got[[8]byte(big.SpanContext().SpanID())]
	cutOK("name", b.Name)
	cutOK("key", string(b.Attributes[0].Key))
	cutOK("value", b.Attributes[0].Value.AsString())
	cutOK("slice value", b.Attributes[1].Value.AsStringSlice()[0])
	cutOK("slice value", b.Attributes[1].Value.AsStringSlice()[1])
	cutOK("event name", b.Events[0].Name)
	cutOK("event value", b.Events[0].Attributes[0].Value.AsString())
	cutOK("status", b.Status.Description)

	w := got[[8]byte(wide.SpanContext().SpanID())]
	if kept := len(w.Attributes) - 1; kept == 0 || kept+w.DroppedAttributes != 10_000 {
		t.Errorf("wide span: %d attributes kept, %d dropped, want 10 000 in all", kept, w.DroppedAttributes)
	}
	if len(w.Events) == 0 || len(w.Events)+w.DroppedEvents != 10_000 {
		t.Errorf("wide span: %d events kept, %d dropped, want 10 000 in all", len(w.Events), w.DroppedEvents)
	}
	o := got[[8]byte(openWide.SpanContext().SpanID())]
	if kept := len(o.Attributes) - 2; kept == 0 || kept+o.DroppedAttributes != 10_000 {
		t.Errorf("open wide span: %d attributes kept, %d dropped, want 10 000 in all", kept, o.DroppedAttributes)
	}
	for i, kv := range w.Attributes[:len(w.Attributes)-1] {
		if string(kv.Key) != fmt.Sprintf("key.%05d", i) {
			t.Fatalf("attribute %d is %s: the first attributes are kept, in order", i, kv.Key)
		}
	}
}

// The journal allocates nothing on the live path: a span costs the
// allocations it costs without the journal, plus at most one when
// attributes are set after its start (reading them at the start makes the
// SDK copy its attribute slice at the next change).
func TestTheLivePathAllocatesNothing(t *testing.T) {
	run := func(withJournal, later bool) float64 {
		opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(discardExporter{}))}
		if withJournal {
			j := openT(t, t.TempDir())
			defer j.Close()
			opts = append([]sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(j.SpanProcessor())}, opts...)
		}
		tr := sdktrace.NewTracerProvider(opts...).Tracer("t")
		ctx := context.Background()
		return testing.AllocsPerRun(1000, func() {
			_, s := tr.Start(ctx, "omni.diffusion.exec", trace.WithAttributes(attribute.String("omni.phase", "exec"), attribute.Int("n", 3)))
			if later {
				s.SetAttributes(attribute.Int("omni.batch.size", 4))
			}
			s.End()
		})
	}
	for _, later := range []bool{false, true} {
		without, with := run(false, later), run(true, later)
		t.Logf("attributes set later %v: %.1f allocations a span with the journal, %.1f without", later, with, without)
		extra := 0.0
		if later {
			extra = 1
		}
		if with > without+extra {
			t.Errorf("attributes set later %v: %.1f allocations a span with the journal, %.1f without", later, with, without)
		}
	}
}

// Confirming an exported batch allocates nothing once the journal has
// seen a batch that large: its scratch space is kept. AllocsPerRun counts
// the allocations of every goroutine of the process (a timer of another
// test's provider, the heartbeat's trim of the tables), so the figure is
// the least over ten batches: an allocation of confirm's own is in each.
func TestConfirmingABatchAllocatesNothing(t *testing.T) {
	j := openT(t, t.TempDir())
	defer j.Close()
	var ended []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()),
		sdktrace.WithSpanProcessor(endedSpans(func(s sdktrace.ReadOnlySpan) { ended = append(ended, s) })))
	tr := tp.Tracer("t")
	batch := func() []sdktrace.ReadOnlySpan {
		ended = ended[:0]
		for range 512 {
			_, s := tr.Start(context.Background(), "omni.diffusion.exec")
			s.End()
		}
		return ended
	}
	j.confirm(batch())
	allocs := math.Inf(1)
	for range 10 {
		ss := batch()
		allocs = min(allocs, testing.AllocsPerRun(1, func() { j.confirm(ss) }))
	}
	if allocs != 0 {
		t.Errorf("confirming a batch of 512 spans: %.0f allocations", allocs)
	}
	if st := j.Stats(); st.Dropped+st.Evicted != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// endedSpans is a processor that calls f with each ended span.
type endedSpans func(sdktrace.ReadOnlySpan)

func (endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (f endedSpans) OnEnd(s sdktrace.ReadOnlySpan)                 { f(s) }
func (endedSpans) Shutdown(context.Context) error                  { return nil }
func (endedSpans) ForceFlush(context.Context) error                { return nil }
