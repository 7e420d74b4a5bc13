package main

import (
	"errors"
	"math"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The protobuf encoding of OTLP traces (opentelemetry-proto,
// opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto),
// written straight from the SDK's spans. Only what the SDK's exporter
// writes is written, in the same order: proto3 leaves out a field at its
// zero value, except a member of a oneof (an attribute's value), which is
// written whatever its value.

// Field numbers.
const (
	rsResource, rsScopeSpans, rsSchemaURL                         = 1, 2, 3
	resAttributes                                                 = 1
	ssScope, ssSpans, ssSchemaURL                                 = 1, 2, 3
	scopeName, scopeVersion, scopeAttributes                      = 1, 2, 3
	spanTraceID, spanSpanID, spanTraceState, spanParentSpanID     = 1, 2, 3, 4
	spanName, spanKind, spanStart, spanEnd                        = 5, 6, 7, 8
	spanAttributes, spanDroppedAttributes, spanEvents             = 9, 10, 11
	spanDroppedEvents, spanLinks, spanDroppedLinks, spanStatus    = 12, 13, 14, 15
	spanFlagsField                                                = 16
	eventTime, eventName, eventAttributes, eventDroppedAttributes = 1, 2, 3, 4
	linkTraceID, linkSpanID, linkAttributes                       = 1, 2, 4
	linkDroppedAttributes, linkFlags                              = 5, 6
	statusMessage, statusCode                                     = 2, 3
	kvKey, kvValue                                                = 1, 2
	avString, avBool, avInt, avDouble, avArray, avKvlist, avBytes = 1, 2, 3, 4, 5, 6, 7
	listValues                                                    = 1
)

// OTLP's span flags: the W3C trace flags in the low byte, and whether the
// parent is known to be remote.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// errInvalidUTF8 is the error of a batch holding a string that is not
// valid UTF-8, which OTLP's protobuf encoding cannot carry: the batch is
// refused whole, as the SDK's exporter refuses it. (The import repairs
// every string of its spans before they reach an exporter.)
var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// wire is the protobuf encoding being written, and whether a string that
// is not valid UTF-8 was met.
type wire struct {
	b       []byte
	invalid bool
}

// appendResourceSpans appends the fields of one ResourceSpans message: the
// resource res, and ss grouped by instrumentation scope in the order each
// scope is first seen (a batch of an import holds one or two scopes). It
// returns errInvalidUTF8 and b unchanged when a string is not valid UTF-8.
func appendResourceSpans(b []byte, res *resource.Resource, ss []sdktrace.ReadOnlySpan) ([]byte, error) {
	w := wire{b: b}
	w.resourceSpans(res, ss)
	if w.invalid {
		return b, errInvalidUTF8
	}
	return w.b, nil
}

func (w *wire) resourceSpans(res *resource.Resource, ss []sdktrace.ReadOnlySpan) {
	if res != nil {
		m := w.open(rsResource)
		w.keyValues(resAttributes, res.Attributes())
		w.close(m)
	}
	var done []instrumentation.Scope
	for i, s := range ss {
		if s == nil {
			continue
		}
		sc := s.InstrumentationScope()
		if scopeIn(done, sc) {
			continue
		}
		done = append(done, sc)
		m := w.open(rsScopeSpans)
		w.scope(sc)
		for _, t := range ss[i:] {
			if t != nil && t.InstrumentationScope() == sc {
				n := w.open(ssSpans)
				w.span(t)
				w.close(n)
			}
		}
		w.string(ssSchemaURL, sc.SchemaURL)
		w.close(m)
	}
	if res != nil {
		w.string(rsSchemaURL, res.SchemaURL())
	}
}

func scopeIn(scopes []instrumentation.Scope, sc instrumentation.Scope) bool {
	for _, s := range scopes {
		if s == sc {
			return true
		}
	}
	return false
}

// scope writes the scope field of a ScopeSpans message, left out for the
// empty scope.
func (w *wire) scope(sc instrumentation.Scope) {
	if sc == (instrumentation.Scope{}) {
		return
	}
	m := w.open(ssScope)
	w.string(scopeName, sc.Name)
	w.string(scopeVersion, sc.Version)
	w.keyValues(scopeAttributes, sc.Attributes.ToSlice())
	w.close(m)
}

// span writes the fields of one Span message.
func (w *wire) span(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	w.bytes(spanTraceID, tid[:])
	w.bytes(spanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		w.string(spanTraceState, ts.String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		w.bytes(spanParentSpanID, psid[:])
	}
	w.string(spanName, s.Name())
	w.uint(spanKind, otlpKind(s.SpanKind()))
	w.fixed64(spanStart, unixNanos(s.StartTime().UnixNano()))
	w.fixed64(spanEnd, unixNanos(s.EndTime().UnixNano()))
	w.keyValues(spanAttributes, s.Attributes())
	w.uint(spanDroppedAttributes, clampCount(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		m := w.open(spanEvents)
		w.fixed64(eventTime, unixNanos(ev.Time.UnixNano()))
		w.string(eventName, ev.Name)
		w.keyValues(eventAttributes, ev.Attributes)
		w.uint(eventDroppedAttributes, clampCount(ev.DroppedAttributeCount))
		w.close(m)
	}
	w.uint(spanDroppedEvents, clampCount(s.DroppedEvents()))
	for _, l := range s.Links() {
		m := w.open(spanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		w.bytes(linkTraceID, ltid[:])
		w.bytes(linkSpanID, lsid[:])
		// As the SDK's exporter, a link's trace state is not written.
		w.keyValues(linkAttributes, l.Attributes)
		w.uint(linkDroppedAttributes, clampCount(l.DroppedAttributeCount))
		w.fixed32(linkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		w.close(m)
	}
	w.uint(spanDroppedLinks, clampCount(s.DroppedLinks()))
	// The SDK's exporter always writes a status, empty when unset.
	m := w.open(spanStatus)
	st := s.Status()
	w.string(statusMessage, st.Description)
	switch st.Code {
	case codes.Ok:
		w.uint(statusCode, 1)
	case codes.Error:
		w.uint(statusCode, 2)
	}
	w.close(m)
	w.fixed32(spanFlagsField, spanFlags(sc.TraceFlags(), parent))
}

// otlpKind is OTLP's number for a span kind (the API's numbers are the
// same; anything else is unspecified, 0).
func otlpKind(k trace.SpanKind) uint32 {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0
	}
	return uint32(k)
}

// keyValues writes each attribute as a KeyValue message in field num.
func (w *wire) keyValues(num protowire.Number, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		m := w.open(num)
		w.string(kvKey, string(kv.Key))
		n := w.open(kvValue)
		w.anyValue(kv.Value)
		w.close(n)
		w.close(m)
	}
}

// anyValue writes the fields of an AnyValue message holding v, as the
// SDK's exporter converts it: an empty value is an empty message, a type
// it does not know is the string "INVALID".
func (w *wire) anyValue(v attribute.Value) {
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.STRING:
		w.oneofString(avString, v.AsString())
	case attribute.BOOL:
		w.b = protowire.AppendTag(w.b, avBool, protowire.VarintType)
		w.b = protowire.AppendVarint(w.b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		w.b = protowire.AppendTag(w.b, avInt, protowire.VarintType)
		w.b = protowire.AppendVarint(w.b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		w.b = protowire.AppendTag(w.b, avDouble, protowire.Fixed64Type)
		w.b = protowire.AppendFixed64(w.b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		w.b = protowire.AppendTag(w.b, avBytes, protowire.BytesType)
		w.b = protowire.AppendBytes(w.b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		array(w, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		array(w, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		array(w, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		array(w, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		array(w, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		m := w.open(avKvlist)
		w.keyValues(listValues, v.AsMap())
		w.close(m)
	default:
		w.oneofString(avString, "INVALID")
	}
}

// array writes the array_value field of an AnyValue message.
func array[T any](w *wire, xs []T, value func(T) attribute.Value) {
	m := w.open(avArray)
	for _, x := range xs {
		n := w.open(listValues)
		w.anyValue(value(x))
		w.close(n)
	}
	w.close(m)
}

// open starts a length-delimited field; close, given what open returned,
// puts the content's length before the content.
func (w *wire) open(num protowire.Number) int {
	w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
	return len(w.b)
}

func (w *wire) close(m int) {
	n := len(w.b) - m
	k := protowire.SizeVarint(uint64(n))
	w.b = append(w.b, make([]byte, k)...)
	copy(w.b[m+k:], w.b[m:m+n])
	protowire.AppendVarint(w.b[:m], uint64(n))
}

// string writes a string field, left out when empty.
func (w *wire) string(num protowire.Number, s string) {
	if s != "" {
		w.oneofString(num, s)
	}
}

// oneofString writes a string member of a oneof, written even when empty.
func (w *wire) oneofString(num protowire.Number, s string) {
	if !utf8.ValidString(s) {
		w.invalid = true
	}
	w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
	w.b = protowire.AppendString(w.b, s)
}

// bytes writes a bytes field, left out when empty.
func (w *wire) bytes(num protowire.Number, v []byte) {
	if len(v) > 0 {
		w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
		w.b = protowire.AppendBytes(w.b, v)
	}
}

// uint writes a uint32 or enum field, left out when 0.
func (w *wire) uint(num protowire.Number, v uint32) {
	if v != 0 {
		w.b = protowire.AppendTag(w.b, num, protowire.VarintType)
		w.b = protowire.AppendVarint(w.b, uint64(v))
	}
}

// fixed64 writes a fixed64 field, left out when 0.
func (w *wire) fixed64(num protowire.Number, v uint64) {
	if v != 0 {
		w.b = protowire.AppendTag(w.b, num, protowire.Fixed64Type)
		w.b = protowire.AppendFixed64(w.b, v)
	}
}

// fixed32 writes a fixed32 field, left out when 0.
func (w *wire) fixed32(num protowire.Number, v uint32) {
	if v != 0 {
		w.b = protowire.AppendTag(w.b, num, protowire.Fixed32Type)
		w.b = protowire.AppendFixed32(w.b, v)
	}
}

// spanFlags are the W3C trace flags and whether the parent is remote, as
// OTLP carries them.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func unixNanos(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func clampCount(n int) uint32 {
	switch {
	case n < 0:
		return 0
	case int64(n) > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}
