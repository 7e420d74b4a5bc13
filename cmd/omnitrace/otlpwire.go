package main

import (
	"math"

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
// writes is written: proto3 leaves out a field at its zero value, except
// a member of a oneof (an attribute's value), which is written whatever
// its value.

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

// appendResourceSpans appends the fields of one ResourceSpans message: the
// resource res, and ss grouped by instrumentation scope in the order each
// scope is first seen (a batch of an import holds one or two scopes).
func appendResourceSpans(b []byte, res *resource.Resource, ss []sdktrace.ReadOnlySpan) []byte {
	if res != nil {
		b = protowire.AppendTag(b, rsResource, protowire.BytesType)
		m := len(b)
		b = appendKeyValues(b, resAttributes, res.Attributes())
		b = closeLen(b, m)
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
		b = protowire.AppendTag(b, rsScopeSpans, protowire.BytesType)
		m := len(b)
		b = appendScope(b, sc)
		for _, t := range ss[i:] {
			if t != nil && t.InstrumentationScope() == sc {
				b = protowire.AppendTag(b, ssSpans, protowire.BytesType)
				n := len(b)
				b = closeLen(appendSpan(b, t), n)
			}
		}
		b = appendString(b, ssSchemaURL, sc.SchemaURL)
		b = closeLen(b, m)
	}
	if res != nil {
		b = appendString(b, rsSchemaURL, res.SchemaURL())
	}
	return b
}

func scopeIn(scopes []instrumentation.Scope, sc instrumentation.Scope) bool {
	for _, s := range scopes {
		if s == sc {
			return true
		}
	}
	return false
}

// appendScope appends the scope field of a ScopeSpans message, left out
// for the empty scope.
func appendScope(b []byte, sc instrumentation.Scope) []byte {
	if sc == (instrumentation.Scope{}) {
		return b
	}
	b = protowire.AppendTag(b, ssScope, protowire.BytesType)
	m := len(b)
	b = appendString(b, scopeName, sc.Name)
	b = appendString(b, scopeVersion, sc.Version)
	b = appendKeyValues(b, scopeAttributes, sc.Attributes.ToSlice())
	return closeLen(b, m)
}

// appendSpan appends the fields of one Span message.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, tid[:])
	b = appendBytes(b, spanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendString(b, spanTraceState, ts.String())
	}
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, spanParentSpanID, psid[:])
	}
	b = appendString(b, spanName, s.Name())
	if k := otlpKind(s.SpanKind()); k != 0 {
		b = protowire.AppendTag(b, spanKind, protowire.VarintType)
		b = protowire.AppendVarint(b, k)
	}
	b = appendFixed64(b, spanStart, unixNanos(s.StartTime().UnixNano()))
	b = appendFixed64(b, spanEnd, unixNanos(s.EndTime().UnixNano()))
	b = appendKeyValues(b, spanAttributes, s.Attributes())
	b = appendUint(b, spanDroppedAttributes, clampCount(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = protowire.AppendTag(b, spanEvents, protowire.BytesType)
		m := len(b)
		b = appendFixed64(b, eventTime, unixNanos(ev.Time.UnixNano()))
		b = appendString(b, eventName, ev.Name)
		b = appendKeyValues(b, eventAttributes, ev.Attributes)
		b = appendUint(b, eventDroppedAttributes, clampCount(ev.DroppedAttributeCount))
		b = closeLen(b, m)
	}
	b = appendUint(b, spanDroppedEvents, clampCount(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = protowire.AppendTag(b, spanLinks, protowire.BytesType)
		m := len(b)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytes(b, linkTraceID, ltid[:])
		b = appendBytes(b, linkSpanID, lsid[:])
		// As the SDK's exporter, a link's trace state is not written.
		b = appendKeyValues(b, linkAttributes, l.Attributes)
		b = appendUint(b, linkDroppedAttributes, clampCount(l.DroppedAttributeCount))
		b = appendFixed32(b, linkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = closeLen(b, m)
	}
	b = appendUint(b, spanDroppedLinks, clampCount(s.DroppedLinks()))
	// The SDK's exporter always writes a status, empty when unset.
	b = protowire.AppendTag(b, spanStatus, protowire.BytesType)
	m := len(b)
	st := s.Status()
	b = appendString(b, statusMessage, st.Description)
	switch st.Code {
	case codes.Ok:
		b = appendUint(b, statusCode, 1)
	case codes.Error:
		b = appendUint(b, statusCode, 2)
	}
	b = closeLen(b, m)
	return appendFixed32(b, spanFlagsField, spanFlags(sc.TraceFlags(), parent))
}

// otlpKind is OTLP's number for a span kind (the API's numbers are the
// same; anything else is unspecified, 0).
func otlpKind(k trace.SpanKind) uint64 {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0
	}
	return uint64(k)
}

// appendKeyValues appends each attribute as a KeyValue message in field
// num.
func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		m := len(b)
		b = appendString(b, kvKey, string(kv.Key))
		b = protowire.AppendTag(b, kvValue, protowire.BytesType)
		n := len(b)
		b = appendAnyValue(b, kv.Value)
		b = closeLen(b, n)
		b = closeLen(b, m)
	}
	return b
}

// appendAnyValue appends the fields of an AnyValue message holding v, as
// the SDK's exporter converts it: an empty value is an empty message, a
// type it does not know is the string "INVALID".
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.EMPTY:
		return b
	case attribute.STRING:
		return appendOneofBytes(b, avString, v.AsString())
	case attribute.BOOL:
		b = protowire.AppendTag(b, avBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, avInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, avDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		return appendOneofBytes(b, avBytes, string(v.AsByteSlice()))
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		b = protowire.AppendTag(b, avKvlist, protowire.BytesType)
		m := len(b)
		b = appendKeyValues(b, listValues, v.AsMap())
		return closeLen(b, m)
	}
	return appendOneofBytes(b, avString, "INVALID")
}

// appendArray appends the array_value field of an AnyValue message.
func appendArray[T any](b []byte, xs []T, value func(T) attribute.Value) []byte {
	b = protowire.AppendTag(b, avArray, protowire.BytesType)
	m := len(b)
	for _, x := range xs {
		b = protowire.AppendTag(b, listValues, protowire.BytesType)
		n := len(b)
		b = closeLen(appendAnyValue(b, value(x)), n)
	}
	return closeLen(b, m)
}

// closeLen ends a length-delimited field whose content starts at m: it
// puts the content's length before it.
func closeLen(b []byte, m int) []byte {
	n := len(b) - m
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k)...)
	copy(b[m+k:], b[m:m+n])
	protowire.AppendVarint(b[:m], uint64(n))
	return b
}

// appendString appends a string field, left out when empty.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendOneofBytes appends a string or bytes member of a oneof, written
// even when empty.
func appendOneofBytes(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendBytes appends a bytes field, left out when empty.
func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendUint appends a uint32 or enum field, left out when 0.
func appendUint(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// appendFixed64 appends a fixed64 field, left out when 0.
func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// appendFixed32 appends a fixed32 field, left out when 0.
func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
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
