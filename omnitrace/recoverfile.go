// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"sync"

	"github.com/otelomni/otelomni/omnitrace/internal/otlpvalue"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// fileExporter writes each batch of recovered spans as one OTLP/JSON
// TracesData on one line (pdata's encoding, the OpenTelemetry Collector's
// file exporter's form), each span under its own resource and scope, and
// flushes it to the file before it returns: a batch it accepted leaves
// the journal, so it must not wait in a buffer.
type fileExporter struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error
}

func newFileExporter(f *os.File) *fileExporter {
	return &fileExporter{f: f, w: bufio.NewWriter(f)}
}

func (e *fileExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	if len(ss) == 0 {
		return nil
	}
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(sdkTraces(ss))
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		e.err = err
		return err
	}
	if err := e.w.Flush(); err != nil {
		e.err = err
	}
	return e.err
}

func (e *fileExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return e.err
	}
	err := errors.Join(e.err, e.w.Flush(), e.f.Close())
	e.f = nil
	if e.err == nil {
		e.err = err
	}
	return err
}

// sdkTraces is ss as Collector data: grouped by resource and scope, with
// every field OTLP carries of a span.
func sdkTraces(ss []sdktrace.ReadOnlySpan) ptrace.Traces {
	td := ptrace.NewTraces()
	type scopeKey struct {
		res   *resource.Resource
		scope instrumentation.Scope
	}
	resources := map[*resource.Resource]ptrace.ResourceSpans{}
	scopes := map[scopeKey]ptrace.SpanSlice{}
	for _, s := range ss {
		res := s.Resource()
		rs, ok := resources[res]
		if !ok {
			rs = td.ResourceSpans().AppendEmpty()
			if res != nil {
				rs.SetSchemaUrl(res.SchemaURL())
				otlpvalue.PutAll(rs.Resource().Attributes(), res.Attributes())
			}
			resources[res] = rs
		}
		sc := s.InstrumentationScope()
		k := scopeKey{res, instrumentation.Scope{Name: sc.Name, Version: sc.Version, SchemaURL: sc.SchemaURL}}
		spans, ok := scopes[k]
		if !ok {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.SetSchemaUrl(sc.SchemaURL)
			ss.Scope().SetName(sc.Name)
			ss.Scope().SetVersion(sc.Version)
			otlpvalue.PutAll(ss.Scope().Attributes(), sc.Attributes.ToSlice())
			spans = ss.Spans()
			scopes[k] = spans
		}
		putSpan(spans.AppendEmpty(), s)
	}
	return td
}

func putSpan(d ptrace.Span, s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	d.SetTraceID(pcommon.TraceID(sc.TraceID()))
	d.SetSpanID(pcommon.SpanID(sc.SpanID()))
	d.TraceState().FromRaw(sc.TraceState().String())
	if p := s.Parent(); p.IsValid() {
		d.SetParentSpanID(pcommon.SpanID(p.SpanID()))
	}
	d.SetFlags(uint32(sc.TraceFlags()))
	d.SetName(s.Name())
	d.SetKind(spanKind(s.SpanKind()))
	d.SetStartTimestamp(pcommon.NewTimestampFromTime(s.StartTime()))
	d.SetEndTimestamp(pcommon.NewTimestampFromTime(s.EndTime()))
	otlpvalue.PutAll(d.Attributes(), s.Attributes())
	d.SetDroppedAttributesCount(uint32(max(0, s.DroppedAttributes())))
	for _, ev := range s.Events() {
		e := d.Events().AppendEmpty()
		e.SetName(ev.Name)
		e.SetTimestamp(pcommon.NewTimestampFromTime(ev.Time))
		otlpvalue.PutAll(e.Attributes(), ev.Attributes)
		e.SetDroppedAttributesCount(uint32(max(0, ev.DroppedAttributeCount)))
	}
	d.SetDroppedEventsCount(uint32(max(0, s.DroppedEvents())))
	for _, l := range s.Links() {
		e := d.Links().AppendEmpty()
		e.SetTraceID(pcommon.TraceID(l.SpanContext.TraceID()))
		e.SetSpanID(pcommon.SpanID(l.SpanContext.SpanID()))
		e.TraceState().FromRaw(l.SpanContext.TraceState().String())
		e.SetFlags(uint32(l.SpanContext.TraceFlags()))
		otlpvalue.PutAll(e.Attributes(), l.Attributes)
		e.SetDroppedAttributesCount(uint32(max(0, l.DroppedAttributeCount)))
	}
	d.SetDroppedLinksCount(uint32(max(0, s.DroppedLinks())))
	switch st := s.Status(); st.Code {
	case codes.Error:
		d.Status().SetCode(ptrace.StatusCodeError)
		d.Status().SetMessage(st.Description)
	case codes.Ok:
		d.Status().SetCode(ptrace.StatusCodeOk)
	}
}

func spanKind(k trace.SpanKind) ptrace.SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return ptrace.SpanKindInternal
	case trace.SpanKindServer:
		return ptrace.SpanKindServer
	case trace.SpanKindClient:
		return ptrace.SpanKindClient
	case trace.SpanKindProducer:
		return ptrace.SpanKindProducer
	case trace.SpanKindConsumer:
		return ptrace.SpanKindConsumer
	}
	return ptrace.SpanKindUnspecified
}
