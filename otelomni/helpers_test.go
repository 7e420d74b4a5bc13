// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/otelomni/otelomni/internal/plan"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// recorded is a provider whose spans land in a recorder, and the
// instrumenter that uses it.
type recorded struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
	in  *otelomni.Instrumenter
}

// w3c is the propagator otelsetup installs by default.
var w3c = otelomni.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

func newRecorded(t testing.TB, opts ...otelomni.Option) *recorded {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	in := otelomni.New(append([]otelomni.Option{otelomni.WithTracerProvider(tp)}, opts...)...)
	r := &recorded{rec: rec, tp: tp, in: in}
	t.Cleanup(func() { assertNoNegativeSpan(t, r.rec.Ended()) })
	return r
}

// assertNoNegativeSpan is checked after every test that records: what
// otelomni hands the SDK must be exportable and consistent, whatever the
// input. Every span starts and ends within what OTLP carries, start <= end;
// every string is valid UTF-8 and within the value limit; every child lies
// inside its parent (but omni.transfer, whose times come from two hosts'
// clocks; a stage under a request of another process is in another
// recorder); every int attribute from a caller's int
// lies in its range; every link between an omni.batch span
// and a member has its reverse, and an exec carries omni.batch.id and
// omni.batch.size exactly when it is linked to a batch, that batch's. It
// reports whether everything held.
func assertNoNegativeSpan(t testing.TB, ss []sdktrace.ReadOnlySpan) bool {
	t.Helper()
	ok := true
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}
	byID := make(map[trace.SpanID]sdktrace.ReadOnlySpan, len(ss))
	for _, s := range ss {
		byID[s.SpanContext().SpanID()] = s
	}
	for _, s := range ss {
		checkBatchLinks(errorf, byID, s)
		if s.EndTime().Before(s.StartTime()) {
			errorf("span %s has a negative duration: %v", s.Name(), s.EndTime().Sub(s.StartTime()))
		}
		if !plan.InRange(s.StartTime()) || !plan.InRange(s.EndTime()) {
			errorf("span %s has a time OTLP cannot carry: %v .. %v", s.Name(), s.StartTime(), s.EndTime())
		}
		ok = checkString(t, s.Name()+" status", s.Status().Description) && ok
		for _, kv := range s.Attributes() {
			ok = checkString(t, s.Name()+" key", string(kv.Key)) && ok
			if kv.Value.Type() == attribute.STRING {
				ok = checkString(t, s.Name()+"."+string(kv.Key), kv.Value.AsString()) && ok
			}
			if max, ranged := intRange[kv.Key]; ranged && (kv.Value.Type() != attribute.INT64 || kv.Value.AsInt64() < 0 || kv.Value.AsInt64() > max) {
				errorf("%s.%s = %v, out of its range 0 to %d", s.Name(), kv.Key, kv.Value.AsInterface(), max)
			}
		}
		p, found := byID[s.Parent().SpanID()]
		if !found || !s.Parent().IsValid() || s.Name() == plan.TransferSpanName {
			continue
		}
		if s.StartTime().Before(p.StartTime()) || s.EndTime().After(p.EndTime()) {
			errorf("%s [%v, %v] lies outside its parent %s [%v, %v]", s.Name(), s.StartTime(), s.EndTime(),
				p.Name(), p.StartTime(), p.EndTime())
		}
	}
	return ok
}

// intRange is the largest value of each int attribute otelomni writes from
// a caller's int; the smallest is 0.
var intRange = map[attribute.Key]int64{
	attrs.OutputIndexKey: math.MaxInt32, attrs.StepKey: math.MaxInt32, attrs.StageIDKey: math.MaxInt32,
	attrs.TransferFromStageKey: math.MaxInt32, attrs.TransferToStageKey: math.MaxInt32,
	attrs.BatchSizeKey: math.MaxInt64, semconv.GenAIUsageInputTokensKey: math.MaxInt64, semconv.GenAIUsageOutputTokensKey: math.MaxInt64,
	attrs.NumPreemptionsKey: math.MaxInt64, attrs.NumInferenceStepsKey: math.MaxInt64, attrs.HeightKey: math.MaxInt64,
	attrs.WidthKey: math.MaxInt64, attrs.NumFramesKey: math.MaxInt64, attrs.StepsRunKey: math.MaxInt64,
	attrs.TransferBytesKey: math.MaxInt64, attrs.EngineWeightBytesKey: math.MaxInt64,
	attrs.EngineDeviceCountKey: math.MaxInt64, attrs.EngineAcceleratorMemoryKey: math.MaxInt64,
}

// checkBatchLinks checks s's links to and from omni.batch spans among
// byID: each has its reverse, and an exec carries the batch's id and size
// exactly when it is linked to one batch.
func checkBatchLinks(errorf func(string, ...any), byID map[trace.SpanID]sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan) {
	var batches []sdktrace.ReadOnlySpan
	for _, l := range s.Links() {
		o, found := byID[l.SpanContext.SpanID()]
		if !found || (o.Name() != plan.BatchSpanName && s.Name() != plan.BatchSpanName) {
			continue
		}
		if !linksTo(o, s) {
			errorf("%s links to %s %s, which links nothing back", s.Name(), o.Name(), o.SpanContext().SpanID())
		}
		if o.Name() == plan.BatchSpanName {
			batches = append(batches, o)
		}
	}
	if s.Name() != spans.Exec.SpanName() {
		return
	}
	id, hasID := attr(s, attrs.BatchIDKey)
	size, hasSize := attr(s, attrs.BatchSizeKey)
	switch {
	case len(batches) > 1:
		errorf("an exec is linked to %d batches", len(batches))
	case len(batches) == 0 && (hasID || hasSize):
		errorf("an exec carries omni.batch.id %q and size %v without a link to its batch", id.AsString(), size.AsInterface())
	case len(batches) == 1:
		bid, _ := attr(batches[0], attrs.BatchIDKey)
		bsize, _ := attr(batches[0], attrs.BatchSizeKey)
		if !hasID || !hasSize || id.AsString() != bid.AsString() || size.AsInt64() != bsize.AsInt64() {
			errorf("an exec linked to batch %q of %v carries omni.batch.id %q and size %v", bid.AsString(), bsize.AsInterface(), id.AsString(), size.AsInterface())
		}
	}
}

// linksTo reports whether s has a link to o.
func linksTo(s, o sdktrace.ReadOnlySpan) bool {
	for _, l := range s.Links() {
		if l.SpanContext.SpanID() == o.SpanContext().SpanID() {
			return true
		}
	}
	return false
}

func checkString(t testing.TB, what, v string) bool {
	t.Helper()
	ok := true
	if !utf8.ValidString(v) {
		t.Errorf("%s is not valid UTF-8: %q", what, v)
		ok = false
	}
	if len(v) > 1024 {
		t.Errorf("%s is %d bytes, over the %d-byte limit", what, len(v), 1024)
		ok = false
	}
	return ok
}

// byName groups ended spans by name.
func byName(ss []sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	m := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range ss {
		m[s.Name()] = append(m[s.Name()], s)
	}
	return m
}

// one returns the only span named name, failing the test otherwise.
func one(t testing.TB, ss []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := byName(ss)[name]
	if len(got) != 1 {
		t.Fatalf("want exactly one %s span, got %d (spans: %v)", name, len(got), names(ss))
	}
	return got[0]
}

func names(ss []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name()
	}
	return out
}

// attr returns the value of key on s, and whether it is there.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// parentName returns the name of s's parent among ss, or "" for a root.
func parentName(ss []sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan) string {
	if !s.Parent().IsValid() {
		return ""
	}
	for _, p := range ss {
		if p.SpanContext().SpanID() == s.Parent().SpanID() {
			return p.Name()
		}
	}
	return "<missing parent>"
}

// base is a fixed wall-clock time for records.
var base = time.Date(2025, 1, 30, 12, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return base.Add(time.Duration(ms * float64(time.Millisecond))) }

// countingProvider counts the spans started through it, to prove that
// otelomni starts none.
type countingProvider struct {
	embedded.TracerProvider
	tp     trace.TracerProvider
	starts atomic.Int64
}

func (c *countingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &countingTracer{Tracer: c.tp.Tracer(name, opts...), n: &c.starts}
}

type countingTracer struct {
	trace.Tracer
	n *atomic.Int64
}

func (c *countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	c.n.Add(1)
	return c.Tracer.Start(ctx, name, opts...)
}

func traceSpanID(ctx context.Context) trace.SpanID {
	return trace.SpanContextFromContext(ctx).SpanID()
}

func attributeKey(k string) attribute.Key { return attribute.Key(k) }

func noopTP() trace.TracerProvider { return noop.NewTracerProvider() }
