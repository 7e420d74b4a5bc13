// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestEndRecordTakesWhatTheStartRecordHolds checks that an end record
// whose parent, kind and start time are read back from the span's start
// record is, byte for byte, the record the span's accessors give; and
// that a start record that does not hold the parent's trace state is
// not read.
func TestEndRecordTakesWhatTheStartRecordHolds(t *testing.T) {
	tid := trace.TraceID{0xde, 0xad, 0xbe, 0xef, 1}
	same, _ := trace.ParseTraceState("vendor=value")
	other, _ := trace.ParseTraceState("parent=only")
	sc := func(sid byte, ts trace.TraceState) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{sid}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	}
	parents := []struct {
		name   string
		parent trace.SpanContext
		ts     trace.TraceState // the span's
		read   bool             // the start record says all
	}{
		{"root", trace.SpanContext{}, trace.TraceState{}, true},
		{"local parent", sc(7, trace.TraceState{}), trace.TraceState{}, true},
		{"remote parent", sc(7, trace.TraceState{}).WithRemote(true), trace.TraceState{}, true},
		{"unsampled parent", sc(7, trace.TraceState{}).WithTraceFlags(0), trace.TraceState{}, true},
		{"parent of the same trace state", sc(7, same).WithRemote(true), same, true},
		{"span with a trace state, parent without", sc(7, trace.TraceState{}), same, false},
		{"parent of another trace state", sc(7, other), same, false},
		{"parent with a trace id only", trace.SpanContext{}.WithTraceID(tid).WithTraceFlags(trace.FlagsSampled), trace.TraceState{}, true},
		{"parent with a span id only", trace.SpanContext{}.WithSpanID(trace.SpanID{7}).WithRemote(true), trace.TraceState{}, true},
	}
	for _, c := range parents {
		for _, kind := range []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindConsumer} {
			for _, start := range []time.Time{time.Unix(1_700_000_000, 123_456_789), time.Unix(-5, 999_999_999), time.Unix(0, 0)} {
				ro := tracetest.SpanStub{
					Name: "omni.request", SpanContext: sc(9, c.ts), Parent: c.parent, SpanKind: kind,
					StartTime: start, EndTime: start.Add(time.Second),
					Attributes: []attribute.KeyValue{attribute.String("omni.phase", "exec")},
				}.Snapshot()
				st := spanData{typ: recStart, span: ctxOf(ro.SpanContext()), parent: ctxOf(ro.Parent()), kind: ro.SpanKind(), name: ro.Name(),
					start: ro.StartTime(), attrs: ro.Attributes(), scope: 3, res: 4}
				startRec := encodeT(t, &st)

				full := spanData{typ: recEnd, span: ctxOf(ro.SpanContext()), parent: ctxOf(ro.Parent()), kind: ro.SpanKind(), name: ro.Name(),
					start: ro.StartTime(), end: ro.EndTime(), attrs: ro.Attributes(), scope: 3, res: 4}
				read := spanData{typ: recEnd, span: ctxOf(ro.SpanContext()), name: ro.Name(), end: ro.EndTime(), attrs: ro.Attributes(), scope: 3, res: 4}
				if got := startFields(startRec[:prefixSize], &read); got != c.read {
					t.Errorf("%s, kind %v, start %v: startFields = %v, want %v", c.name, kind, start, got, c.read)
					continue
				}
				if !c.read {
					continue
				}
				if a, b := encodeT(t, &full), encodeT(t, &read); !bytes.Equal(a, b) {
					t.Errorf("%s, kind %v, start %v: the end record read from the start record differs:\n%x\n%x", c.name, kind, start, b, a)
				}
			}
		}
	}
	// A record of another span, or an end record, is not read.
	ro := tracetest.SpanStub{Name: "x", SpanContext: sc(9, trace.TraceState{}), StartTime: time.Unix(1, 0)}.Snapshot()
	st := spanData{typ: recStart, span: ctxOf(ro.SpanContext()), name: "x", start: ro.StartTime()}
	rec := encodeT(t, &st)
	if startFields(rec[:prefixSize], &spanData{span: ctxOf(sc(8, trace.TraceState{}))}) {
		t.Error("the start record of another span id was read")
	}
	st.typ = recEnd
	rec = encodeT(t, &st)
	if startFields(rec[:prefixSize], &spanData{span: ctxOf(ro.SpanContext())}) {
		t.Error("an end record was read as a start record")
	}
}

func encodeT(t *testing.T, d *spanData) []byte {
	t.Helper()
	p := planSpan(d, DefaultValueLimit, 1<<16)
	w := enc{b: make([]byte, p.size), value: DefaultValueLimit}
	w.span(d, &p)
	if w.over || w.n != p.size {
		t.Fatalf("record of %d bytes planned as %d", w.n, p.size)
	}
	return w.b
}

// TestAnEndDoesNotTakeTheStartOfAnotherTracesSpan checks that a span
// whose span id another trace's open span repeats is journalled with its
// own parent and start time at its end, not the other's.
func TestAnEndDoesNotTakeTheStartOfAnotherTracesSpan(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	p := j.SpanProcessor()
	sid := trace.SpanID{0x42}
	span := func(tid byte, parent byte, start int64) fakeSpan {
		return fakeSpanOf(tracetest.SpanStub{
			Name: "repeated id",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{tid}, SpanID: sid, TraceFlags: trace.FlagsSampled,
			}),
			Parent: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{tid}, SpanID: trace.SpanID{parent}, TraceFlags: trace.FlagsSampled,
			}),
			SpanKind:  trace.SpanKindServer,
			StartTime: time.Unix(start, 0),
			EndTime:   time.Unix(start+1, 0),
		})
	}
	a, b := span(1, 0xa, 100), span(2, 0xb, 200)
	p.OnStart(context.Background(), a)
	p.OnStart(context.Background(), b)
	p.OnEnd(a)
	j.die()
	_, exp := recoverT(t, dir)
	found := false
	for _, s := range exp.stubs() {
		if s.SpanContext.TraceID() != a.SpanContext().TraceID() {
			continue
		}
		found = true
		if s.Parent.SpanID() != (trace.SpanID{0xa}) || !s.StartTime.Equal(time.Unix(100, 0)) || !s.EndTime.Equal(time.Unix(101, 0)) {
			t.Errorf("recovered parent %v, start %v, end %v; want parent %v, start %v, end %v",
				s.Parent.SpanID(), s.StartTime, s.EndTime, trace.SpanID{0xa}, time.Unix(100, 0), time.Unix(101, 0))
		}
	}
	if !found {
		t.Error("the ended span was not recovered")
	}
}
