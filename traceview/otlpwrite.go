package traceview

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The writer encodes the OTLP/JSON form of opentelemetry-proto's
// ExportTraceServiceRequest (go.opentelemetry.io/proto/otlp) by hand: the
// protobuf JSON mapping through protojson would write ids in base64 where
// the OTLP/JSON specification wants hex, and costs several times more per
// span than the import's budget allows. Tests read every document back
// through protojson ([ParseOTLPJSON]) and a real OTLP/HTTP receiver.

// WriteOTLPJSON writes spans as one OTLP/JSON ExportTraceServiceRequest on
// one line (hex ids, as the OTLP/JSON specification, Jaeger and the OTLP
// file exporter write them), grouped by service and process id;
// [ParseOTLPJSON] reads it back.
func WriteOTLPJSON(w io.Writer, ss []Span) error {
	type res struct {
		service string
		pid     int64
	}
	var order []res
	groups := map[res][]int{}
	for i := range ss {
		k := res{ss[i].Service, ss[i].PID}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	b := []byte(`{"resourceSpans":[`)
	for gi, k := range order {
		if gi > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"resource":{"attributes":[`...)
		n := 0
		if k.service != "" {
			b = appendKV(b, "service.name", attribute.StringValue(k.service))
			n++
		}
		if k.pid != 0 {
			if n > 0 {
				b = append(b, ',')
			}
			b = appendKV(b, "process.pid", attribute.Int64Value(k.pid))
		}
		b = append(b, `]},"scopeSpans":[{"spans":[`...)
		for j, i := range groups[k] {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendViewSpan(b, &ss[i])
		}
		b = append(b, `]}]}`...)
	}
	b = append(b, "]}\n"...)
	_, err := w.Write(b)
	return err
}

func appendViewSpan(b []byte, s *Span) []byte {
	b = append(b, '{')
	// An id that is not hex of its size cannot be written as one: it is
	// left out rather than written as something no reader accepts.
	b = appendHexField(b, `"traceId":`, s.TraceID, 32)
	b = appendHexField(b, `"spanId":`, s.SpanID, 16)
	b = appendHexField(b, `"parentSpanId":`, s.ParentID, 16)
	b = append(b, `"name":`...)
	b = appendJSONString(b, s.Name)
	b = appendTimes(b, s.Start.UnixNano(), s.End.UnixNano())
	b = append(b, `,"attributes":[`...)
	keys := make([]string, 0, len(s.Attrs))
	for k := range s.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a file that does not change from run to run
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKV(b, k, s.Attrs[k])
	}
	b = append(b, ']')
	b = appendStatus(b, s.StatusCode, s.StatusMessage)
	return append(b, '}')
}

func appendHexField(b []byte, field, id string, size int) []byte {
	if len(id) != size {
		return b
	}
	if _, err := hex.DecodeString(id); err != nil {
		return b
	}
	b = append(b, field...)
	b = appendJSONString(b, id)
	return append(b, ',')
}

func appendTimes(b []byte, start, end int64) []byte {
	b = append(b, `,"startTimeUnixNano":"`...)
	b = strconv.AppendUint(b, nanos(start), 10)
	b = append(b, `","endTimeUnixNano":"`...)
	b = strconv.AppendUint(b, nanos(end), 10)
	return append(b, '"')
}

// nanos is a time for OTLP's unsigned field: before 1970 is not a time
// OTLP carries, and 0 says "unknown".
func nanos(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func appendStatus(b []byte, c codes.Code, msg string) []byte {
	switch c {
	case codes.Error:
		b = append(b, `,"status":{"code":2`...)
		if msg != "" {
			b = append(b, `,"message":`...)
			b = appendJSONString(b, msg)
		}
		return append(b, '}')
	case codes.Ok:
		return append(b, `,"status":{"code":1}`...)
	}
	return b
}

func appendKV(b []byte, k string, v attribute.Value) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, k)
	b = append(b, `,"value":`...)
	b = appendValue(b, v)
	return append(b, '}')
}

func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return append(strconv.AppendBool(append(b, `{"boolValue":`...), v.AsBool()), '}')
	case attribute.INT64:
		b = strconv.AppendInt(append(b, `{"intValue":"`...), v.AsInt64(), 10)
		return append(b, `"}`...)
	case attribute.FLOAT64:
		return append(appendDouble(append(b, `{"doubleValue":`...), v.AsFloat64()), '}')
	case attribute.STRING:
		return append(appendJSONString(append(b, `{"stringValue":`...), v.AsString()), '}')
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE:
		b = append(b, `{"arrayValue":{"values":[`...)
		switch v.Type() {
		case attribute.BOOLSLICE:
			for i, x := range v.AsBoolSlice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.BoolValue(x))
			}
		case attribute.INT64SLICE:
			for i, x := range v.AsInt64Slice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.Int64Value(x))
			}
		case attribute.FLOAT64SLICE:
			for i, x := range v.AsFloat64Slice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.Float64Value(x))
			}
		default:
			for i, x := range v.AsStringSlice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.StringValue(x))
			}
		}
		return append(b, `]}}`...)
	}
	return append(b, `{}`...)
}

func appendSep(b []byte, i int) []byte {
	if i > 0 {
		return append(b, ',')
	}
	return b
}

// appendDouble writes a double as the protobuf JSON mapping does: a
// number, or the strings "NaN", "Infinity" and "-Infinity".
func appendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendJSONString writes s as a JSON string; each invalid UTF-8 sequence
// becomes U+FFFD, so that the output is always valid JSON and valid OTLP.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// OTLPJSONExporter is a span exporter that writes OTLP/JSON: one
// ExportTraceServiceRequest per exported batch, one per line, as the
// OpenTelemetry Collector's file exporter does; [ParseOTLPJSON] and
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
	if kvs := s.Attributes(); len(kvs) > 0 {
		b = append(b, `,"attributes":[`...)
		for i, kv := range kvs {
			b = appendSep(b, i)
			b = appendKV(b, string(kv.Key), kv.Value)
		}
		b = append(b, ']')
	}
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
			if len(ev.Attributes) > 0 {
				b = append(b, `,"attributes":[`...)
				for j, kv := range ev.Attributes {
					b = appendSep(b, j)
					b = appendKV(b, string(kv.Key), kv.Value)
				}
				b = append(b, ']')
			}
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
			if len(l.Attributes) > 0 {
				b = append(b, `,"attributes":[`...)
				for j, kv := range l.Attributes {
					b = appendSep(b, j)
					b = appendKV(b, string(kv.Key), kv.Value)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	st := s.Status()
	b = appendStatus(b, st.Code, st.Description)
	return append(b, '}')
}

// appendHexID writes a trace or span id as the OTLP/JSON encoding wants
// it: a hex string.
func appendHexID(b, id []byte) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, id)
	return append(b, '"')
}
