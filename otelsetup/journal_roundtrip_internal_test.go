// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelsetup/internal/journal"
)

// stubExporter keeps the spans it is given.
type stubExporter struct{ spans tracetest.SpanStubs }

func (e *stubExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	e.spans = append(e.spans, tracetest.SpanStubsFromReadOnlySpans(ss)...)
	return nil
}

func (*stubExporter) Shutdown(context.Context) error { return nil }

// roundTripStrings are strings around the journal's one-byte length and
// around the value limit, valid or not, the limit falling inside a rune,
// inside a run of bytes that are not UTF-8, or before a tail that such a
// run hides once repaired.
func roundTripStrings(limit int) []string {
	var out []string
	for _, n := range []int{127, 128, 129, limit - 1, limit, limit + 1} {
		out = append(out,
			strings.Repeat("a", n),
			strings.Repeat("b", n-1)+"é",
			strings.Repeat("c", n-2)+"€",
			strings.Repeat("d", n-1)+"\xff",
			strings.Repeat("\xff", n),
			strings.Repeat("\xff", n)+"tail",
			strings.Repeat("e\xff\xfe", n/3),
			strings.Repeat("\xe2\x82", n/2)+"tail",
		)
	}
	return out
}

// A span recovered from the journal reaches the exporter as the live path
// would have handed it over: every string, valid UTF-8 or not, at every
// length around the journal's one-byte length and around the value limit,
// in every place a span holds one.
func TestRecoveredSpansReachTheExporterAsLiveOnesWould(t *testing.T) {
	limits := sdktrace.NewSpanLimits()
	limits.AttributeValueLengthLimit = defaultAttributeValueLengthLimit
	maxValue := limits.AttributeValueLengthLimit
	dir := t.TempDir()
	j, err := journal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithRawSpanLimits(limits), sdktrace.WithSpanProcessor(j.SpanProcessor()), sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("t")
	ts, _ := trace.ParseTraceState("vendor=" + strings.Repeat("v", 120))
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	// Names and keys, bounded by maxKeyBytes on the live path, and values.
	keys, values := roundTripStrings(maxKeyBytes), roundTripStrings(maxValue)
	for i, v := range values {
		k := keys[i%len(keys)]
		attrs := []attribute.KeyValue{attribute.String("v", v), attribute.StringSlice("ss", []string{v, "x"}), attribute.String(k, "key")}
		_, sp := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), k, trace.WithAttributes(attrs...), trace.WithLinks(trace.Link{SpanContext: parent, Attributes: attrs}))
		sp.AddEvent(k, trace.WithAttributes(attrs...))
		sp.SetStatus(codes.Error, v)
		sp.End()
	}
	ended := rec.Ended()
	// Not confirmed: Close leaves them for Recover.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	live := &stubExporter{}
	safe := &safeExporter{exp: live, c: &exportCounts{}, maxValue: maxValue}
	if err := safe.ExportSpans(context.Background(), ended); err != nil {
		t.Fatal(err)
	}
	recovered := &stubExporter{}
	if rep, err := newRecoveryExporter(recovered, maxValue).recoverDir(context.Background(), dir); err != nil || rep.Exported != len(ended) {
		t.Fatalf("recovery: %+v %v, want %d spans", rep, err, len(ended))
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range recovered.spans {
		byID[s.SpanContext.SpanID()] = s
	}
	for _, w := range live.spans {
		g, ok := byID[w.SpanContext.SpanID()]
		if !ok {
			t.Errorf("span %q not recovered", w.Name)
			continue
		}
		check := func(what string, ok bool) {
			t.Helper()
			if !ok {
				t.Errorf("span %q (%d bytes): %s differs from the live path's", w.Name[:min(len(w.Name), 16)], len(w.Name), what)
			}
		}
		check("name", g.Name == w.Name)
		check("span context", g.SpanContext.Equal(w.SpanContext) && g.Parent.Equal(w.Parent))
		check("status", g.Status == w.Status)
		check("attributes", sameKVs(g.Attributes[:len(g.Attributes)-1], w.Attributes))
		check("events", len(g.Events) == len(w.Events) && g.Events[0].Name == w.Events[0].Name && sameKVs(g.Events[0].Attributes, w.Events[0].Attributes))
		check("links", len(g.Links) == len(w.Links) && sameKVs(g.Links[0].Attributes, w.Links[0].Attributes))
	}
}

func sameKVs(a, b []attribute.KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value.String() != b[i].Value.String() {
			return false
		}
	}
	return true
}
