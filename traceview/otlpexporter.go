package traceview

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// OTLPJSONExporter is a span exporter that writes OTLP/JSON: one
// ExportTraceServiceRequest per exported batch, one per line (JSON lines);
// an OTLP/HTTP receiver takes each line as it is, and [ParseOTLPJSON] and
// `omnitrace table -file` read it. It writes as it goes, so its memory is
// one batch whatever the number of spans. Safe for concurrent use.
type OTLPJSONExporter struct {
	mu     sync.Mutex
	w      *bufio.Writer
	closer io.Closer
	buf    []byte
	err    error
	closed bool
}

var _ sdktrace.SpanExporter = (*OTLPJSONExporter)(nil)

// NewOTLPJSONExporter returns an exporter writing to w. Shutdown flushes,
// and closes w when it is an io.Closer.
func NewOTLPJSONExporter(w io.Writer) *OTLPJSONExporter {
	e := &OTLPJSONExporter{w: bufio.NewWriterSize(w, 256<<10)}
	if c, ok := w.(io.Closer); ok {
		e.closer = c
	}
	return e
}

// ErrExporterClosed is returned by an export after Shutdown.
var ErrExporterClosed = errors.New("traceview: exporter shut down")

// ExportSpans writes one document holding ss. A write error is returned
// for this batch and every later one.
func (e *OTLPJSONExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	if len(ss) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrExporterClosed
	}
	if e.err != nil {
		return e.err
	}
	e.buf = AppendOTLPJSON(e.buf[:0], ss)
	if _, err := e.w.Write(e.buf); err != nil {
		e.err = err
		return err
	}
	if cap(e.buf) > 4<<20 {
		e.buf = nil // one huge batch must not pin its buffer for good
	}
	return nil
}

// ForceFlush writes what is buffered.
func (e *OTLPJSONExporter) ForceFlush(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil && !e.closed {
		e.err = e.w.Flush()
	}
	return e.err
}

// Shutdown flushes and closes the writer.
func (e *OTLPJSONExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.closer != nil {
		if err := e.closer.Close(); err != nil && e.err == nil {
			e.err = err
		}
	}
	return e.err
}

// AppendOTLPJSON appends one OTLP/JSON ExportTraceServiceRequest holding ss
// and a newline. Spans that share a resource and a scope, one after the
// other, share a resourceSpans and a scopeSpans entry.
func AppendOTLPJSON(b []byte, ss []sdktrace.ReadOnlySpan) []byte {
	b = append(b, `{"resourceSpans":[`...)
	var res *resource.Resource
	var scope instrumentation.Scope
	for i, s := range ss {
		switch {
		case i == 0 || s.Resource() != res:
			if i > 0 {
				b = append(b, `]}]},`...)
			}
			res, scope = s.Resource(), s.InstrumentationScope()
			b = appendResource(b, res)
			b = append(b, `,"scopeSpans":[`...)
			b = appendScope(b, scope)
		case s.InstrumentationScope() != scope:
			scope = s.InstrumentationScope()
			b = append(b, `]},`...)
			b = appendScope(b, scope)
		default:
			b = append(b, ',')
		}
		b = appendSDKSpan(b, s)
	}
	if len(ss) > 0 {
		b = append(b, `]}]}`...)
	}
	return append(b, "]}\n"...)
}

func appendResource(b []byte, r *resource.Resource) []byte {
	b = append(b, `{"resource":{"attributes":[`...)
	if r != nil {
		for i, kv := range r.Attributes() {
			b = appendSep(b, i)
			b = appendKV(b, string(kv.Key), kv.Value)
		}
	}
	b = append(b, `]}`...)
	if r != nil && r.SchemaURL() != "" {
		b = append(b, `,"schemaUrl":`...)
		b = appendJSONString(b, r.SchemaURL())
	}
	return b
}

func appendScope(b []byte, s instrumentation.Scope) []byte {
	b = append(b, `{"scope":{"name":`...)
	b = appendJSONString(b, s.Name)
	if s.Version != "" {
		b = append(b, `,"version":`...)
		b = appendJSONString(b, s.Version)
	}
	b = append(b, '}')
	if s.SchemaURL != "" {
		b = append(b, `,"schemaUrl":`...)
		b = appendJSONString(b, s.SchemaURL)
	}
	return append(b, `,"spans":[`...)
}

func appendSDKSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendHexID(append(b, `{"traceId":`...), tid[:])
	b = appendHexID(append(b, `,"spanId":`...), sid[:])
	if p := s.Parent().SpanID(); p.IsValid() {
		b = appendHexID(append(b, `,"parentSpanId":`...), p[:])
	}
	b = append(b, `,"name":`...)
	b = appendJSONString(b, s.Name())
	if k := s.SpanKind(); k != trace.SpanKindUnspecified {
		b = strconv.AppendInt(append(b, `,"kind":`...), int64(k), 10)
	}
	b = appendTimes(b, s.StartTime().UnixNano(), s.EndTime().UnixNano())
	b = appendAttributes(b, s.Attributes())
	if n := s.DroppedAttributes(); n > 0 {
		b = strconv.AppendInt(append(b, `,"droppedAttributesCount":`...), int64(n), 10)
	}
	if evs := s.Events(); len(evs) > 0 {
		b = append(b, `,"events":[`...)
		for i, ev := range evs {
			b = appendSep(b, i)
			b = append(b, `{"timeUnixNano":"`...)
			b = strconv.AppendUint(b, nanos(ev.Time.UnixNano()), 10)
			b = append(b, `","name":`...)
			b = appendJSONString(b, ev.Name)
			b = appendAttributes(b, ev.Attributes)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if links := s.Links(); len(links) > 0 {
		b = append(b, `,"links":[`...)
		for i, l := range links {
			b = appendSep(b, i)
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendHexID(append(b, `{"traceId":`...), ltid[:])
			b = appendHexID(append(b, `,"spanId":`...), lsid[:])
			b = appendAttributes(b, l.Attributes)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	st := s.Status()
	b = appendStatus(b, st.Code, st.Description)
	return append(b, '}')
}

// appendAttributes writes an "attributes" member, when there are any.
func appendAttributes(b []byte, kvs []attribute.KeyValue) []byte {
	if len(kvs) == 0 {
		return b
	}
	b = append(b, `,"attributes":[`...)
	for i, kv := range kvs {
		b = appendSep(b, i)
		b = appendKV(b, string(kv.Key), kv.Value)
	}
	return append(b, ']')
}

// appendHexID writes a trace or span id as the OTLP/JSON encoding wants
// it: a hex string.
func appendHexID(b, id []byte) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, id)
	return append(b, '"')
}
