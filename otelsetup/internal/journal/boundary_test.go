// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// boundaryStrings are strings of every length around the one-byte length
// (127, 128, 129) and around the value limit, some ending in a rune of two
// or three bytes that the limit would split.
func boundaryStrings(limit int) []string {
	var out []string
	for _, n := range []int{0, 1, 126, 127, 128, 129, 130, 255, 256, limit - 2, limit - 1, limit, limit + 1, limit + 2} {
		if n < 0 {
			continue
		}
		out = append(out, strings.Repeat("a", n))
		if n >= 2 {
			out = append(out, strings.Repeat("b", n-2)+"é", strings.Repeat("c", n-1)+"é")
		}
		if n >= 3 {
			out = append(out, strings.Repeat("d", n-3)+"€", strings.Repeat("e", n-2)+"€")
		}
	}
	return out
}

// cutStub is w with every string cut to limit bytes as the journal cuts
// it, at a rune boundary: what a recovered span holds of it.
func cutStub(w tracetest.SpanStub, limit int) tracetest.SpanStub {
	c := func(s string) string { return s[:cutLen(s, limit)] }
	kvs := func(in []attribute.KeyValue) []attribute.KeyValue {
		out := make([]attribute.KeyValue, len(in))
		for i, kv := range in {
			out[i].Key = attribute.Key(c(string(kv.Key)))
			switch kv.Value.Type() {
			case attribute.STRING:
				out[i].Value = attribute.StringValue(c(kv.Value.AsString()))
			case attribute.STRINGSLICE:
				ss := kv.Value.AsStringSlice()
				for j := range ss {
					ss[j] = c(ss[j])
				}
				out[i].Value = attribute.StringSliceValue(ss)
			default:
				out[i].Value = kv.Value
			}
		}
		return out
	}
	w.Name = c(w.Name)
	w.Status.Description = c(w.Status.Description)
	w.Attributes = kvs(w.Attributes)
	events := make([]sdktrace.Event, len(w.Events))
	for i, e := range w.Events {
		e.Name = c(e.Name)
		e.Attributes = kvs(e.Attributes)
		events[i] = e
	}
	w.Events = events
	links := make([]sdktrace.Link, len(w.Links))
	for i, l := range w.Links {
		l.Attributes = kvs(l.Attributes)
		links[i] = l
	}
	w.Links = links
	return w
}

// Every string of every length around the one-byte length and around the
// value limit (the limit itself short enough to take the one-byte path,
// or not), in every place a record holds one, with trace states on the
// span, its parent and its links, ended and open: recovered as the SDK
// gave it, cut as the journal cuts it.
func TestStringsAtEveryBoundaryRoundTrip(t *testing.T) {
	for _, limit := range []int{minValue, 126, 127, 128, 129, 255, DefaultValueLimit} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			dir := t.TempDir()
			j := openT(t, dir, WithValueLimit(limit))
			rec := tracetest.NewSpanRecorder()
			limits := sdktrace.NewSpanLimits()
			limits.AttributeValueLengthLimit = -1
			tp := sdktrace.NewTracerProvider(sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "s"))), sdktrace.WithRawSpanLimits(limits), sdktrace.WithSpanProcessor(j.SpanProcessor()), sdktrace.WithSpanProcessor(rec))
			tr := tp.Tracer("t")
			ts, err := trace.ParseTraceState("vendor=" + strings.Repeat("v", 120) + ",other=1")
			if err != nil {
				t.Fatal(err)
			}
			pts, _ := trace.ParseTraceState("parent=" + strings.Repeat("p", 200))
			parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled, TraceState: pts, Remote: true})
			link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{8}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled, TraceState: ts})
			var open []trace.Span
			for i, s := range boundaryStrings(limit) {
				ctx := context.Background()
				if i%2 == 0 {
					ctx = trace.ContextWithRemoteSpanContext(ctx, parent.WithTraceState(ts))
				} else {
					ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
				}
				attrs := []attribute.KeyValue{attribute.String(s, s), attribute.String("k", s), attribute.StringSlice("ss", []string{s, "x", s})}
				_, sp := tr.Start(ctx, s, trace.WithAttributes(attrs...), trace.WithLinks(trace.Link{SpanContext: link, Attributes: attrs}))
				if i%3 == 0 {
					open = append(open, sp)
					continue
				}
				sp.AddEvent(s, trace.WithAttributes(attrs...))
				if i%3 == 1 {
					sp.SetAttributes(attribute.String("later", s))
				}
				sp.SetStatus(codes.Error, s)
				sp.End()
			}
			ended := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
			j.die()
			rep, exp := recoverT(t, dir)
			got := byID(t, exp.stubs())
			if rep.Corrupt != 0 || rep.Torn != 0 || len(got) != len(ended)+len(open) {
				t.Fatalf("report %+v: %d spans recovered, want %d", rep, len(got), len(ended)+len(open))
			}
			for _, w := range ended {
				sameSpan(t, got[[8]byte(w.SpanContext.SpanID())], cutStub(w, limit), true)
			}
			for _, sp := range open {
				w := tracetest.SpanStubFromReadOnlySpan(sp.(sdktrace.ReadOnlySpan))
				sameSpan(t, got[[8]byte(w.SpanContext.SpanID())], cutStub(w, limit), false)
			}
		})
	}
}
