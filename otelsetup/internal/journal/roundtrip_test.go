// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// everyValue holds an attribute of every type the API has, with strings
// that are not valid UTF-8 among them.
func everyValue(prefix string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.Bool(prefix+"bool", true),
		attribute.Bool(prefix+"false", false),
		attribute.Int64(prefix+"int", -1<<62),
		attribute.Int64(prefix+"maxint", math.MaxInt64),
		attribute.Float64(prefix+"float", -1.5e300),
		attribute.Float64(prefix+"nan", math.NaN()),
		attribute.String(prefix+"string", "héllo"),
		attribute.String(prefix+"invalid", "bad \xff\xfe utf-8"),
		attribute.String(prefix+"empty", ""),
		attribute.BoolSlice(prefix+"bools", []bool{true, false, true}),
		attribute.Int64Slice(prefix+"ints", []int64{0, -1, math.MinInt64, 7}),
		attribute.Float64Slice(prefix+"floats", []float64{0.25, math.Inf(-1)}),
		attribute.StringSlice(prefix+"strings", []string{"a", "\xc3", ""}),
		attribute.ByteSlice(prefix+"bytes", []byte{0, 1, 0xff}),
		attribute.Slice(prefix+"slice", attribute.IntValue(1), attribute.StringValue("two"), attribute.SliceValue(attribute.BoolValue(true))),
		attribute.Map(prefix+"map", attribute.String("k", "v"), attribute.Map("inner", attribute.Float64("f", 2))),
		{Key: attribute.Key(prefix + "emptyvalue")},
		attribute.String("key \xff invalid", "v"),
	}
}

func TestEveryFieldRoundTrips(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "engine \xff"), attribute.Int("replica", 3))
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit = 30
	limits.EventCountLimit = 4
	limits.LinkCountLimit = 3
	limits.AttributePerEventCountLimit = 2
	limits.AttributePerLinkCountLimit = 1
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(limits),
		sdktrace.WithSpanProcessor(j.SpanProcessor()),
		sdktrace.WithSpanProcessor(rec),
	)
	tr := tp.Tracer("engine", trace.WithInstrumentationVersion("1.2.3"),
		trace.WithSchemaURL("https://example.com/schema"), trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))
	other := tp.Tracer("otelhttp")

	ts, _ := trace.ParseTraceState("vendor=value,other=1")
	pts, _ := trace.ParseTraceState("parent=only")
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	linked := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled, TraceState: pts, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	start := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)

	ctx, root := tr.Start(ctx, "omni.request \xff", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(everyValue("start.")...), trace.WithTimestamp(start),
		trace.WithLinks(trace.Link{SpanContext: remote}))
	root.SetAttributes(everyValue("later.")...)
	root.AddEvent("first, pushed out by the fifth")
	root.RecordError(errors.New("boom"), trace.WithTimestamp(start.Add(2*time.Millisecond)))
	root.AddEvent("third")
	root.AddEvent("fourth")
	root.AddEvent("fifth \xff", trace.WithTimestamp(start.Add(time.Millisecond)), trace.WithAttributes(attribute.String("a", "b"), attribute.Int("c", 1), attribute.Bool("dropped", true)))
	root.AddLink(trace.Link{SpanContext: linked})
	root.AddLink(trace.Link{SpanContext: remote})
	// Over the limit: the first is dropped.
	root.AddLink(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("why", "batch"), attribute.Int("dropped", 1)}})

	kinds := []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindUnspecified}
	for i, k := range kinds {
		_, s := other.Start(ctx, "child", trace.WithSpanKind(k), trace.WithTimestamp(start.Add(time.Duration(i)*time.Second)))
		if i == 1 {
			s.SetStatus(codes.Ok, "ignored for Ok")
		}
		s.End(trace.WithTimestamp(start.Add(time.Duration(i)*time.Second + time.Microsecond)))
	}
	// A span whose parent carries a trace state of its own.
	pctx := trace.ContextWithRemoteSpanContext(context.Background(), linked)
	_, own := tr.Start(pctx, "own state")
	own.End()
	// A span with an unsampled... no: unsampled spans are not journalled
	// (the batcher never exports them); see TestUnsampledSpansAreNotJournalled.

	root.SetStatus(codes.Error, "failed \xff")
	root.End(trace.WithTimestamp(start.Add(time.Hour)))

	// A root span, ended, with no parent.
	_, lone := tr.Start(context.Background(), "", trace.WithTimestamp(time.Unix(0, 1)))
	lone.End(trace.WithTimestamp(time.Unix(0, 1)))

	want := tracetest.SpanStubsFromReadOnlySpans(rec.Ended())
	r := want[len(want)-2]
	if r.Name != "omni.request \xff" || r.DroppedAttributes == 0 || r.DroppedEvents == 0 || r.DroppedLinks == 0 ||
		r.Links[len(r.Links)-1].DroppedAttributeCount == 0 || r.Events[len(r.Events)-1].DroppedAttributeCount == 0 || r.Parent.TraceState().Len() == 0 {
		t.Fatalf("the request span does not exercise every count: %+v", r)
	}
	if o := want[len(want)-3]; o.Name != "own state" || o.Parent.TraceState().String() == o.SpanContext.TraceState().String() && o.Parent.TraceState().Len() == 0 {
		t.Fatalf("the span under a parent with its own trace state: %+v", o)
	}
	j.die()

	rep, exp := recoverT(t, dir)
	got := byID(t, exp.stubs())
	if rep.Ended != len(want) || rep.Open != 0 || rep.Files != 1 || rep.Removed != 1 || rep.Torn != 0 || rep.Corrupt != 0 {
		t.Errorf("report %+v, want %d ended from one file", rep, len(want))
	}
	for _, w := range want {
		g, ok := got[[8]byte(w.SpanContext.SpanID())]
		if !ok {
			t.Errorf("span %q not recovered", w.Name)
			continue
		}
		sameSpan(t, g, w, true)
	}
	if left, _ := Recover(context.Background(), dir, &memExporter{}); left.Files != 0 {
		t.Errorf("a second Recover found %+v: the file should be gone", left)
	}
}

// sameSpan checks that a recovered span g carries everything w had, and
// omni.recovered.
func sameSpan(t *testing.T, g, w tracetest.SpanStub, ended bool) {
	t.Helper()
	name := w.Name
	// A recovered span's strings are made valid UTF-8.
	w.Events, w.Links = slices.Clone(w.Events), slices.Clone(w.Links)
	w = repaired(w)
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("span %q: %s differs", name, what)
		}
	}
	check("name", g.Name == w.Name)
	check("span context", g.SpanContext.Equal(w.SpanContext))
	check("parent", g.Parent.Equal(w.Parent) && g.Parent.IsRemote() == w.Parent.IsRemote())
	check("kind", g.SpanKind == w.SpanKind)
	check("start", g.StartTime.Equal(w.StartTime))
	if ended {
		check("end", g.EndTime.Equal(w.EndTime))
		check("status", g.Status == w.Status)
		check("events", sameEvents(g.Events, w.Events))
		check("dropped events", g.DroppedEvents == w.DroppedEvents)
		check("child count", g.ChildSpanCount == w.ChildSpanCount)
	}
	check("links", sameLinks(g.Links, w.Links))
	check("dropped attributes", g.DroppedAttributes == w.DroppedAttributes)
	check("dropped links", g.DroppedLinks == w.DroppedLinks)
	gotAttrs := slices.DeleteFunc(slices.Clone(g.Attributes), func(kv attribute.KeyValue) bool {
		return kv.Key == RecoveredKey || (!ended && kv.Key == errorTypeKey)
	})
	check("attributes", sameAttrs(gotAttrs, w.Attributes))
	check("omni.recovered", slices.Contains(g.Attributes, RecoveredKey.Bool(true)))
	check("resource", g.Resource.Equal(w.Resource) && g.Resource.SchemaURL() == w.Resource.SchemaURL())
	check("scope", sameScope(g.InstrumentationScope, w.InstrumentationScope))
}

// repaired is w with its strings repaired as a recovered span's are.
func repaired(w tracetest.SpanStub) tracetest.SpanStub {
	s := &recoveredSpan{name: w.Name, status: w.Status, attrs: w.Attributes, events: w.Events, links: w.Links, scope: w.InstrumentationScope}
	s.repairStrings()
	w.Name, w.Status, w.Attributes, w.Events, w.Links, w.InstrumentationScope = s.name, s.status, s.attrs, s.events, s.links, s.scope
	return w
}

func sameAttrs(a, b []attribute.KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !sameValue(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func sameValue(a, b attribute.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Type() {
	case attribute.FLOAT64:
		return math.Float64bits(a.AsFloat64()) == math.Float64bits(b.AsFloat64())
	case attribute.SLICE:
		return slices.EqualFunc(a.AsSlice(), b.AsSlice(), sameValue)
	case attribute.MAP:
		return sameAttrs(a.AsMap(), b.AsMap())
	}
	return a.String() == b.String()
}

func sameEvents(a, b []sdktrace.Event) bool {
	return slices.EqualFunc(a, b, func(x, y sdktrace.Event) bool {
		return x.Name == y.Name && x.Time.Equal(y.Time) && x.DroppedAttributeCount == y.DroppedAttributeCount && sameAttrs(x.Attributes, y.Attributes)
	})
}

func sameLinks(a, b []sdktrace.Link) bool {
	return slices.EqualFunc(a, b, func(x, y sdktrace.Link) bool {
		return x.SpanContext.Equal(y.SpanContext) && x.SpanContext.IsRemote() == y.SpanContext.IsRemote() &&
			x.DroppedAttributeCount == y.DroppedAttributeCount && sameAttrs(x.Attributes, y.Attributes)
	})
}

func sameScope(a, b instrumentation.Scope) bool {
	return a.Name == b.Name && a.Version == b.Version && a.SchemaURL == b.SchemaURL && a.Attributes.Equals(&b.Attributes)
}

func TestOpenSpansAreRecoveredAsDiedAtTheLastHeartbeat(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()), sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("engine")
	past := time.Now().Add(-time.Hour)
	future := time.Now().Add(time.Hour)
	ctx, req := tr.Start(context.Background(), "omni.request", trace.WithTimestamp(past),
		trace.WithAttributes(attribute.String("omni.request.id", "r1"), attribute.String("error.type", "replaced")))
	_, late := tr.Start(ctx, "starts after the heartbeat", trace.WithTimestamp(future))
	_ = late
	_, done := tr.Start(ctx, "omni.diffusion.preprocess")
	done.End()
	req.SetAttributes(attribute.String("set.after.start", "not journalled until the end"))
	beat := j.heartbeat()
	j.die()
	// The death lies after the last heartbeat: the latest time a record
	// holds within two intervals of it (the preprocess span's end here),
	// never a time further on (the span starting in an hour).
	death := beat
	if e := rec.Ended()[0].EndTime(); e.After(death) {
		death = e
	}

	rep, exp := recoverT(t, dir)
	if rep.Open != 2 || rep.Ended != 1 {
		t.Fatalf("report %+v, want 2 open and 1 ended", rep)
	}
	got := byID(t, exp.stubs())
	r := got[[8]byte(req.SpanContext().SpanID())]
	if !r.EndTime.Equal(death) {
		t.Errorf("open span ended at %v, want %v (heartbeat %v)", r.EndTime, death, beat)
	}
	if r.Status.Code != codes.Error || !strings.Contains(r.Status.Description, "died") {
		t.Errorf("status %+v, want Error", r.Status)
	}
	want := []attribute.KeyValue{attribute.String("omni.request.id", "r1"), RecoveredKey.Bool(true), errorTypeKey.String(ErrorProcessDied)}
	if !sameAttrs(r.Attributes, want) {
		t.Errorf("attributes %v, want %v", r.Attributes, want)
	}
	l := got[[8]byte(late.SpanContext().SpanID())]
	if !l.EndTime.Equal(l.StartTime) || !l.StartTime.Equal(future) {
		t.Errorf("a span starting after the heartbeat: start %v end %v, want both %v", l.StartTime, l.EndTime, future)
	}
	d := got[[8]byte(done.SpanContext().SpanID())]
	if d.Status.Code != codes.Unset || slices.Contains(d.Attributes, errorTypeKey.String(ErrorProcessDied)) {
		t.Errorf("an ended span keeps its status: %+v %v", d.Status, d.Attributes)
	}
}

// An end record leaves the attributes to the start record only while the
// span still holds the attributes it started with: a value set again
// after the start, even under the same key and count, is journalled at
// the end.
func TestAttributesChangedAfterTheStartAreJournalledAtTheEnd(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()))
	tr := tp.Tracer("t")
	start := []attribute.KeyValue{attribute.Int("a", 1), attribute.String("b", "x")}
	_, same := tr.Start(context.Background(), "same", trace.WithAttributes(start...))
	same.End()
	_, changed := tr.Start(context.Background(), "changed", trace.WithAttributes(start...))
	changed.SetAttributes(attribute.Int("a", 2))
	changed.End()
	_, grown := tr.Start(context.Background(), "grown", trace.WithAttributes(start...))
	grown.SetAttributes(attribute.Int("c", 3))
	grown.End()
	if start, end, ok := j.records(liveKey(same.SpanContext().SpanID())); !ok || start == 0 || end == 0 {
		t.Fatalf("records at %d and %d (found %v): the unchanged span's end does not lean on its start", start, end, ok)
	}
	j.die()
	_, exp := recoverT(t, dir)
	got := byID(t, exp.stubs())
	want := map[trace.Span][]attribute.KeyValue{
		same:    start,
		changed: {attribute.Int("a", 2), attribute.String("b", "x")},
		grown:   {attribute.Int("a", 1), attribute.String("b", "x"), attribute.Int("c", 3)},
	}
	for s, w := range want {
		g := got[[8]byte(s.SpanContext().SpanID())]
		if !sameAttrs(slices.DeleteFunc(slices.Clone(g.Attributes), func(kv attribute.KeyValue) bool { return kv.Key == RecoveredKey }), w) {
			t.Errorf("span %s: attributes %v, want %v", g.Name, g.Attributes, w)
		}
	}
}
