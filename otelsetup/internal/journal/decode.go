// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// errCorrupt is a record whose checksum holds but whose payload does not
// decode: written by another build of this format, or damaged so that the
// checksum still matched (one in four billion).
var errCorrupt = errors.New("journal: record does not decode")

// dec reads a payload; every read checks its bounds, so any bytes decode
// to a value or to errCorrupt, never to a panic or an allocation larger
// than the payload.
type dec struct {
	b   []byte
	n   int
	err error
}

func (r *dec) fail() {
	if r.err == nil {
		r.err = errCorrupt
	}
	r.n = len(r.b)
}

func (r *dec) need(k int) bool {
	if r.err != nil || k < 0 || len(r.b)-r.n < k {
		r.fail()
		return false
	}
	return true
}

func (r *dec) u8() byte {
	if !r.need(1) {
		return 0
	}
	r.n++
	return r.b[r.n-1]
}

func (r *dec) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	r.n += 4
	return binary.LittleEndian.Uint32(r.b[r.n-4:])
}

func (r *dec) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	r.n += 8
	return binary.LittleEndian.Uint64(r.b[r.n-8:])
}

func (r *dec) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	x, k := binary.Uvarint(r.b[r.n:])
	if k <= 0 {
		r.fail()
		return 0
	}
	r.n += k
	return x
}

// count reads a number of items each of which takes at least one byte, so
// a count beyond the bytes left is corrupt, not an allocation.
func (r *dec) count(x uint64) int {
	if r.err != nil || x > uint64(len(r.b)-r.n) {
		r.fail()
		return 0
	}
	return int(x)
}

func (r *dec) str() string {
	n := r.count(r.uvarint())
	if !r.need(n) {
		return ""
	}
	r.n += n
	return string(r.b[r.n-n : r.n])
}

func (r *dec) time() time.Time {
	sec := int64(r.u64())
	nsec := r.u32()
	if nsec >= 1e9 {
		r.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec))
}

func unzigzag(x uint64) int64 { return int64(x>>1) ^ -int64(x&1) }

func (r *dec) attrs(n, depth int) []attribute.KeyValue {
	if n == 0 || r.err != nil {
		return nil
	}
	kvs := make([]attribute.KeyValue, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		k := r.str()
		kvs = append(kvs, attribute.KeyValue{Key: attribute.Key(k), Value: r.value1(depth)})
	}
	return kvs
}

func (r *dec) value1(depth int) attribute.Value {
	switch r.u8() {
	case vEmpty:
		return attribute.Value{}
	case vBool:
		return attribute.BoolValue(r.u8() != 0)
	case vInt64:
		return attribute.Int64Value(unzigzag(r.uvarint()))
	case vFloat64:
		return attribute.Float64Value(math.Float64frombits(r.u64()))
	case vString:
		return attribute.StringValue(r.str())
	case vBoolSlice:
		s := make([]bool, r.count(r.uvarint()))
		for i := range s {
			s[i] = r.u8() != 0
		}
		return attribute.BoolSliceValue(s)
	case vInt64Slice:
		s := make([]int64, r.count(r.uvarint()))
		for i := range s {
			s[i] = unzigzag(r.uvarint())
		}
		return attribute.Int64SliceValue(s)
	case vFloat64Slice:
		s := make([]float64, r.count(r.uvarint()))
		for i := range s {
			s[i] = math.Float64frombits(r.u64())
		}
		return attribute.Float64SliceValue(s)
	case vStringSlice:
		s := make([]string, r.count(r.uvarint()))
		for i := range s {
			s[i] = r.str()
		}
		return attribute.StringSliceValue(s)
	case vBytes:
		return attribute.ByteSliceValue([]byte(r.str()))
	case vSlice:
		if depth >= maxDepth {
			r.fail()
			return attribute.Value{}
		}
		s := make([]attribute.Value, r.count(r.uvarint()))
		for i := range s {
			s[i] = r.value1(depth + 1)
		}
		return attribute.SliceValue(s...)
	case vMap:
		if depth >= maxDepth {
			r.fail()
			return attribute.Value{}
		}
		n := r.count(r.uvarint())
		return attribute.MapValue(r.attrs(n, depth+1)...)
	}
	r.fail()
	return attribute.Value{}
}

// spanRecord is a decoded span record.
type spanRecord struct {
	typ        byte
	sc, parent trace.SpanContext
	kind       trace.SpanKind
	name       string
	start, end time.Time
	status     sdktrace.Status
	attrs      []attribute.KeyValue
	links      []sdktrace.Link
	events     []sdktrace.Event
	dropped    [3]int // attributes, events, links
	children   int
	scope, res uint32
	// attrsAtStart: an end record whose attributes are its start record's.
	attrsAtStart bool
}

func spanContextOf(tid trace.TraceID, sid trace.SpanID, flags byte, ts string, remote bool) (trace.SpanContext, bool) {
	state, err := trace.ParseTraceState(ts)
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags), TraceState: state, Remote: remote,
	}), err == nil
}

// recordKey reads the span key of a span record's payload, which must be
// at least prefixSize long.
func recordKey(p []byte) spanKey {
	var k spanKey
	copy(k.t[:], p[pTraceID:])
	copy(k.s[:], p[pSpanID:])
	return k
}

// recordTimes reads a span record's start and, for an end record, end.
func recordTimes(p []byte) (start, end time.Time) {
	le := binary.LittleEndian
	start = time.Unix(int64(le.Uint64(p[pStart:])), int64(le.Uint32(p[pStart+8:])%1e9))
	if p[pType] == recEnd {
		end = time.Unix(int64(le.Uint64(p[pEnd:])), int64(le.Uint32(p[pEnd+8:])%1e9))
	}
	return start, end
}

// decodeSpan decodes a span record's payload.
func decodeSpan(p []byte) (spanRecord, error) {
	var s spanRecord
	if len(p) < prefixSize || (p[pType] != recStart && p[pType] != recEnd) {
		return s, errCorrupt
	}
	le := binary.LittleEndian
	s.typ = p[pType]
	flags := p[pFlags]
	s.attrsAtStart = s.typ == recEnd && flags&flagAttrsAtStart != 0
	s.kind = trace.SpanKind(p[pKind])
	k := recordKey(p)
	var parentID trace.SpanID
	copy(parentID[:], p[pParentID:])
	r := &dec{b: p, n: pStart}
	s.start = r.time()
	s.scope = le.Uint32(p[pScope:])
	s.res = le.Uint32(p[pResource:])
	code := le.Uint32(p[pStatus:])
	if code > uint32(codes.Ok) {
		return s, errCorrupt
	}
	s.status.Code = codes.Code(code)
	if s.typ == recEnd {
		r.n = pEnd
		s.end = r.time()
	}
	s.dropped = [3]int{int(le.Uint32(p[pDroppedAttrs:])), int(le.Uint32(p[pDroppedEvts:])), int(le.Uint32(p[pDroppedLinks:]))}
	s.children = int(le.Uint32(p[pChildren:]))
	nAttrs, nLinks, nEvents := le.Uint32(p[pNAttrs:]), le.Uint32(p[pNLinks:]), le.Uint32(p[pNEvents:])
	r.n = prefixSize
	ts := r.str()
	s.name = r.str()
	s.status.Description = r.str()
	pts := ts
	if flags&flagParentState != 0 {
		pts = r.str()
	}
	var ok bool
	s.sc, ok = spanContextOf(k.t, k.s, p[pTraceFlags], ts, flags&flagRemote != 0)
	if !ok || !s.sc.IsValid() {
		return s, errCorrupt
	}
	if flags&flagParentValid != 0 {
		s.parent, _ = spanContextOf(k.t, parentID, p[pParentFlags], pts, flags&flagParentRemote != 0)
	}
	s.attrs = r.attrs(r.count(uint64(nAttrs)), 0)
	if n := r.count(uint64(nLinks)); n > 0 {
		s.links = make([]sdktrace.Link, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			var l sdktrace.Link
			var tid trace.TraceID
			var sid trace.SpanID
			if r.need(24) {
				copy(tid[:], r.b[r.n:])
				copy(sid[:], r.b[r.n+16:])
				r.n += 24
			}
			lflags := r.u8()
			remote := r.u8() != 0
			lts := r.str()
			l.SpanContext, _ = spanContextOf(tid, sid, lflags, lts, remote)
			l.DroppedAttributeCount = int(r.u32())
			l.Attributes = r.attrs(r.count(uint64(r.u32())), 0)
			s.links = append(s.links, l)
		}
	}
	if n := r.count(uint64(nEvents)); n > 0 {
		s.events = make([]sdktrace.Event, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			var e sdktrace.Event
			e.Name = r.str()
			e.Time = r.time()
			e.DroppedAttributeCount = int(r.u32())
			e.Attributes = r.attrs(r.count(uint64(r.u32())), 0)
			s.events = append(s.events, e)
		}
	}
	if r.err == nil && r.n != len(p) {
		r.fail() // bytes left over: not what this version writes
	}
	return s, r.err
}

// A definition: a resource or an instrumentation scope, written once in
// the definitions area and referred to by its id from span records.
type definition struct {
	typ     byte
	id      uint32
	schema  string
	name    string // scope only
	version string // scope only
	attrs   []attribute.KeyValue
}

func decodeDefinition(p []byte) (definition, error) {
	r := &dec{b: p}
	var d definition
	d.typ = r.u8()
	if d.typ != recResource && d.typ != recScope {
		return d, errCorrupt
	}
	d.id = r.u32()
	d.schema = r.str()
	if d.typ == recScope {
		d.name = r.str()
		d.version = r.str()
	}
	d.attrs = r.attrs(r.count(uint64(r.u32())), 0)
	if r.err == nil && r.n != len(p) {
		r.fail()
	}
	return d, r.err
}

func (d definition) scope() instrumentation.Scope {
	return instrumentation.Scope{Name: d.name, Version: d.version, SchemaURL: d.schema, Attributes: attribute.NewSet(d.attrs...)}
}
