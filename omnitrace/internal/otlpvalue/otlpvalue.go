// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package otlpvalue writes OpenTelemetry attribute values as OpenTelemetry
// Collector data (pdata), as the SDK's OTLP exporter writes them: the one
// conversion the import's spans, the recovered spans and the OTLP/JSON
// writer share.
package otlpvalue

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
)

// Set sets v to a's value, converted as the SDK's OTLP exporter
// converts it, strings cut to limit characters as the SDK cuts them.
func Set(v pcommon.Value, a attribute.Value, limit int) {
	switch a.Type() {
	case attribute.STRING:
		v.SetStr(truncate(limit, a.AsString()))
	case attribute.BOOL:
		v.SetBool(a.AsBool())
	case attribute.INT64:
		v.SetInt(a.AsInt64())
	case attribute.FLOAT64:
		v.SetDouble(a.AsFloat64())
	case attribute.STRINGSLICE:
		s := v.SetEmptySlice()
		for _, x := range a.AsStringSlice() {
			s.AppendEmpty().SetStr(truncate(limit, x))
		}
	case attribute.INT64SLICE:
		s := v.SetEmptySlice()
		for _, x := range a.AsInt64Slice() {
			s.AppendEmpty().SetInt(x)
		}
	case attribute.FLOAT64SLICE:
		s := v.SetEmptySlice()
		for _, x := range a.AsFloat64Slice() {
			s.AppendEmpty().SetDouble(x)
		}
	case attribute.BOOLSLICE:
		s := v.SetEmptySlice()
		for _, x := range a.AsBoolSlice() {
			s.AppendEmpty().SetBool(x)
		}
	case attribute.BYTESLICE:
		b := a.AsByteSlice()
		if limit >= 0 && len(b) > limit {
			b = b[:limit] // bytes, as the SDK cuts them
		}
		v.SetEmptyBytes().FromRaw(b)
	case attribute.SLICE:
		s := v.SetEmptySlice()
		xs := a.AsSlice()
		s.EnsureCapacity(len(xs))
		for _, x := range xs {
			Set(s.AppendEmpty(), x, limit)
		}
	case attribute.MAP:
		m := v.SetEmptyMap()
		kvs := a.AsMap()
		m.EnsureCapacity(len(kvs))
		for _, kv := range kvs {
			Set(m.PutEmpty(string(kv.Key)), kv.Value, limit)
		}
	case attribute.EMPTY:
		_ = v.FromRaw(nil) // a value with nothing set
	default:
		// What the SDK's exporter writes for a type it does not know.
		v.SetStr("INVALID")
	}
}

// truncate cuts s, valid UTF-8, to at most limit characters, as the SDK
// does; a negative limit cuts nothing.
func truncate(limit int, s string) string {
	if limit < 0 || len(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
	}
	return s
}

// PutAll puts kvs in m, each value converted by [Set], no string cut.
func PutAll(m pcommon.Map, kvs []attribute.KeyValue) {
	m.EnsureCapacity(m.Len() + len(kvs))
	for _, kv := range kvs {
		Set(m.PutEmpty(string(kv.Key)), kv.Value, -1)
	}
}
