// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// maxKeyBytes bounds attribute keys and span and event names on export.
const maxKeyBytes = 256

// safeExporter wraps the exporter that Setup builds. It counts what was
// exported and what failed (see [ExportStats]); it refuses a span whose
// times OTLP cannot carry, ends a span that ends before it starts where it
// starts, leaves out an event whose time OTLP cannot carry (counted in the
// span's dropped events: the span itself is kept), and repairs every span that carries a string the OTLP exporters
// would refuse or the byte limit does not allow: the OTLP exporters refuse a whole batch for one string that is
// not valid UTF-8, so one bad string from any instrumentation in the
// process would otherwise cost every other span of its batch. The same
// holds for the resource: the SDK merges OTEL_RESOURCE_ATTRIBUTES into it
// as it reads it, whatever Setup makes of it. It runs on the batch
// processor's goroutine, never on a request's.
type safeExporter struct {
	exp      sdktrace.SpanExporter
	c        *exportCounts
	maxValue int
	// res is the last resource checked, and its repair: the spans of a
	// provider share one.
	res atomic.Pointer[checkedResource]
}

// checkedResource is a resource and what is exported for it: itself when
// every string of it is valid UTF-8, else its repair.
type checkedResource struct{ orig, export *resource.Resource }

// resource returns what is exported for r.
func (e *safeExporter) resource(r *resource.Resource) *resource.Resource {
	if c := e.res.Load(); c != nil && c.orig == r {
		return c.export
	}
	c := &checkedResource{orig: r, export: r}
	if r != nil {
		kvs := r.Attributes()
		if slices.ContainsFunc(kvs, func(kv attribute.KeyValue) bool { return !sanitize.KeyValueOK(kv, 0, 0) }) ||
			!utf8.ValidString(r.SchemaURL()) {
			// Lengths are the resource's own: only what no exporter can
			// carry is repaired.
			c.export = resource.NewWithAttributes(sanitize.String(r.SchemaURL(), maxKeyBytes), sanitize.KeyValues(kvs, 0, 0)...)
		}
	}
	e.res.Store(c)
	return c.export
}

func (e *safeExporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	// Once through, the spans are no longer the path's to hold.
	defer e.c.held.Add(-int64(len(ss)))
	var out []sdktrace.ReadOnlySpan // nil while every span so far is fine
	for i, s := range ss {
		timesOK := plan.InRange(s.StartTime()) && plan.InRange(s.EndTime())
		res := e.resource(s.Resource())
		if timesOK && !s.EndTime().Before(s.StartTime()) && res == s.Resource() && spanOK(s, e.maxValue) {
			if out != nil {
				out = append(out, s)
			}
			continue
		}
		if out == nil {
			out = make([]sdktrace.ReadOnlySpan, 0, len(ss))
			out = append(out, ss[:i]...)
		}
		if !timesOK {
			// OTLP cannot carry it: it would reach the backend as another
			// time, often ending before it starts.
			e.c.refused.Add(1)
			continue
		}
		r := repair(s, e.maxValue).(*repairedSpan)
		r.res = res
		out = append(out, r)
		if h, ok := s.(heldSpan); !ok || !h.counted {
			e.c.repaired.Add(1)
		}
	}
	if out == nil {
		out = ss
	}
	if len(out) == 0 {
		return nil
	}
	ctx, a := withAnswer(ctx)
	err := e.exp.ExportSpans(ctx, out)
	if a.accepted.Load() {
		// The collector took the batch (and the exporter may still return
		// an error: a partial success). The batch is done (a crash journal
		// must not send it again); the spans it rejected are lost, and the
		// exporter's report of them is logged the first time.
		n := uint64(len(out))
		rejected := min(uint64(max(a.rejected.Load(), 0)), n)
		e.c.rejected.Add(rejected)
		e.c.exported.Add(n - rejected)
		if err != nil && e.c.partialLogged.CompareAndSwap(false, true) {
			otel.Handle(fmt.Errorf("otelsetup: the collector rejected spans it was sent (logged once; ExportStats counts them): %w", err))
		}
		return nil
	}
	if err != nil {
		e.c.failed.Add(uint64(len(out)))
		return err
	}
	e.c.exported.Add(uint64(len(out)))
	return nil
}

func (e *safeExporter) Shutdown(ctx context.Context) error { return e.exp.Shutdown(ctx) }

// ForceFlush flushes the wrapped exporter when it can.
func (e *safeExporter) ForceFlush(ctx context.Context) error {
	if f, ok := e.exp.(interface{ ForceFlush(context.Context) error }); ok {
		return f.ForceFlush(ctx)
	}
	return nil
}

func kvsOK(kvs []attribute.KeyValue, maxValue int) bool {
	for _, kv := range kvs {
		if !sanitize.KeyValueOK(kv, maxKeyBytes, maxValue) {
			return false
		}
	}
	return true
}

// spanOK reports whether every string of s is valid and within bounds.
func spanOK(s sdktrace.ReadOnlySpan, maxValue int) bool {
	if !sanitize.Valid(s.Name(), maxKeyBytes) || !sanitize.Valid(s.Status().Description, maxValue) ||
		!kvsOK(s.Attributes(), maxValue) {
		return false
	}
	for _, ev := range s.Events() {
		if !plan.InRange(ev.Time) || !sanitize.Valid(ev.Name, maxKeyBytes) || !kvsOK(ev.Attributes, maxValue) {
			return false
		}
	}
	for _, l := range s.Links() {
		if !kvsOK(l.Attributes, maxValue) {
			return false
		}
	}
	sc := s.InstrumentationScope()
	return sanitize.Valid(sc.Name, maxKeyBytes) && sanitize.Valid(sc.Version, maxKeyBytes) &&
		sanitize.Valid(sc.SchemaURL, maxKeyBytes) && setOK(sc.Attributes, maxValue)
}

// setOK is kvsOK for an attribute set (a scope's), without copying it.
func setOK(set attribute.Set, maxValue int) bool {
	for it := set.Iter(); it.Next(); {
		if !sanitize.KeyValueOK(it.Attribute(), maxKeyBytes, maxValue) {
			return false
		}
	}
	return true
}

// repairedSpan is a span with its strings repaired; everything else comes
// from the original.
type repairedSpan struct {
	sdktrace.ReadOnlySpan
	end    time.Time
	name   string
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	// droppedEvents adds the events left out for their times.
	droppedEvents int
	links         []sdktrace.Link
	status        sdktrace.Status
	scope         instrumentation.Scope
	res           *resource.Resource
}

func repair(s sdktrace.ReadOnlySpan, maxValue int) sdktrace.ReadOnlySpan {
	r := &repairedSpan{
		ReadOnlySpan: s,
		end:          s.EndTime(),
		name:         sanitize.String(s.Name(), maxKeyBytes),
		attrs:        sanitize.KeyValues(s.Attributes(), maxKeyBytes, maxValue),
		status:       s.Status(),
		scope:        s.InstrumentationScope(),
		res:          s.Resource(),
	}
	if r.end.Before(s.StartTime()) {
		r.end = s.StartTime() // a negative span ends where it starts
	}
	r.status.Description = sanitize.String(r.status.Description, maxValue)
	r.scope.Name = sanitize.String(r.scope.Name, maxKeyBytes)
	r.scope.Version = sanitize.String(r.scope.Version, maxKeyBytes)
	r.scope.SchemaURL = sanitize.String(r.scope.SchemaURL, maxKeyBytes)
	if !setOK(r.scope.Attributes, maxValue) {
		r.scope.Attributes = attribute.NewSet(sanitize.KeyValues(r.scope.Attributes.ToSlice(), maxKeyBytes, maxValue)...)
	}
	r.droppedEvents = s.DroppedEvents()
	for _, ev := range s.Events() {
		if !plan.InRange(ev.Time) {
			// OTLP would carry it as another time (before 1970: 1970).
			r.droppedEvents++
			continue
		}
		ev.Name = sanitize.String(ev.Name, maxKeyBytes)
		ev.Attributes = sanitize.KeyValues(ev.Attributes, maxKeyBytes, maxValue)
		r.events = append(r.events, ev)
	}
	for _, l := range s.Links() {
		l.Attributes = sanitize.KeyValues(l.Attributes, maxKeyBytes, maxValue)
		r.links = append(r.links, l)
	}
	return r
}

func (r *repairedSpan) Name() string                                { return r.name }
func (r *repairedSpan) EndTime() time.Time                          { return r.end }
func (r *repairedSpan) Attributes() []attribute.KeyValue            { return r.attrs }
func (r *repairedSpan) Events() []sdktrace.Event                    { return r.events }
func (r *repairedSpan) DroppedEvents() int                          { return r.droppedEvents }
func (r *repairedSpan) Links() []sdktrace.Link                      { return r.links }
func (r *repairedSpan) Status() sdktrace.Status                     { return r.status }
func (r *repairedSpan) InstrumentationScope() instrumentation.Scope { return r.scope }
func (r *repairedSpan) Resource() *resource.Resource                { return r.res }

//lint:ignore SA1019 the exporters of this SDK version still read it
func (r *repairedSpan) InstrumentationLibrary() instrumentation.Library { return r.scope }
