// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"math"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Record types.
const (
	recStart    = 1
	recEnd      = 2
	recResource = 3
	recScope    = 4
)

// A span record's payload starts with a fixed prefix, so that compaction
// and recovery read a record's type, ids and times without decoding it.
const (
	pType         = 0  // u8
	pFlags        = 1  // u8, flag* bits
	pKind         = 2  // u8
	pTraceFlags   = 3  // u8
	pParentFlags  = 4  // u8
	pTraceID      = 8  // [16]byte
	pSpanID       = 24 // [8]byte
	pParentID     = 32 // [8]byte
	pStart        = 40 // i64 seconds, u32 nanoseconds at pStart+8
	pScope        = 52 // u32
	pResource     = 56 // u32
	pStatus       = 60 // u32
	pEnd          = 64 // i64 seconds, u32 nanoseconds at pEnd+8
	pDroppedAttrs = 76 // u32
	pDroppedEvts  = 80 // u32
	pDroppedLinks = 84 // u32
	pChildren     = 88 // u32
	pNAttrs       = 92 // u32
	pNLinks       = 96 // u32
	pNEvents      = 100
	prefixSize    = 104
	// Then: trace state, name and status description (strings), the
	// attributes, the links, the events.

	flagParentValid  = 1
	flagParentRemote = 2
	flagRemote       = 4
	// flagParentState: the parent's trace state differs from the span's
	// and follows the status description.
	flagParentState = 8
	// flagAttrsAtStart: an end record without attributes, because the
	// span's attributes are those its start record holds; the start
	// record stays live until the end's export is confirmed.
	flagAttrsAtStart = 16
)

// Attribute value types on disk (independent of attribute.Type's numbers).
const (
	vEmpty = iota
	vBool
	vInt64
	vFloat64
	vString
	vBoolSlice
	vInt64Slice
	vFloat64Slice
	vStringSlice
	vBytes
	vSlice
	vMap
)

// maxDepth bounds the nesting of slice and map values; a value nested
// deeper is written as empty, and counted as cut.
const maxDepth = 8

// spanCtx is what a record holds of a span context: read once from the
// SDK's trace.SpanContext, whose every accessor copies it whole.
type spanCtx struct {
	tid           trace.TraceID
	sid           trace.SpanID
	flags         trace.TraceFlags
	valid, remote bool
	ts            string // the trace state, as text; built only when there is one
}

func ctxOf(sc trace.SpanContext) spanCtx {
	c := spanCtx{tid: sc.TraceID(), sid: sc.SpanID(), flags: sc.TraceFlags(), remote: sc.IsRemote()}
	c.valid = c.tid.IsValid() && c.sid.IsValid()
	if ts := sc.TraceState(); ts.Len() > 0 {
		c.ts = ts.String()
	}
	return c
}

// spanData is what a record holds, gathered from a span once.
type spanData struct {
	typ byte
	// span is the span's context; parent the parent's, of which a record
	// holds whether it is valid and remote, its flags and span id (its
	// trace id is the span's), and its trace state when that differs from
	// the span's.
	span, parent  spanCtx
	kind          trace.SpanKind
	name          string
	start, end    time.Time
	attrs         []attribute.KeyValue
	links         []sdktrace.Link
	events        []sdktrace.Event
	status        sdktrace.Status
	droppedAttrs  int
	droppedEvents int
	droppedLinks  int
	children      int
	scope, res    uint32
	attrsAtStart  bool // an end record leaves its attributes to the start record
}

// plan is the outcome of sizing a record: its payload size, how many of
// its attributes, links and events fit the record bound (the first ones,
// in order), and how many strings were cut to the value limit.
type plan struct {
	size                    int
	nAttrs, nLinks, nEvents int
	cut                     int
}

// sizer measures what the encoder writes, with the same cuts.
type sizer struct {
	value int // bytes of the longest string kept
	cut   int
}

// cutLen is how many bytes of s are kept under the limit: all of them, or
// the longest prefix within max that does not split a UTF-8 sequence
// (bytes that are not UTF-8 are kept as they are).
func cutLen(s string, max int) int {
	if len(s) <= max {
		return len(s)
	}
	n := max
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	if !utf8.RuneStart(s[n]) {
		n = max // not UTF-8 here: a byte cut is as good as any
	}
	return n
}

// keptLen is how many bytes a record keeps of s, longer than max: what
// otelsetup's exporter sends of it (each sequence that is not UTF-8
// replaced by U+FFFD, then cut at a rune boundary within max), and whether
// those are s's own first bytes, as they are unless s is not valid UTF-8
// there. A string within the limit is kept as it is, and repaired at
// recovery: repaired after the cut, a string that is not UTF-8 would keep
// less of itself than the live path sends, or more than max bytes.
func keptLen(s string, max int) (n int, own bool) {
	c := cutLen(s, max)
	if utf8.ValidString(s[:c]) {
		if c == max {
			return c, true
		}
		// Bytes up to max continue the rune at c: a rune that does not fit.
		if r, w := utf8.DecodeRuneInString(s[c:]); (r != utf8.RuneError || w > 1) && c+w > max {
			return c, true
		}
	}
	return repairCut(nil, s, max), false
}

// repairCut writes into b (nil: nowhere) s repaired and cut to max bytes
// as otelsetup's exporter does (internal/sanitize.String), without
// allocating, and returns its length. Of a string that is not valid UTF-8
// that exporter repairs the first 4*max+4 bytes only.
func repairCut(b []byte, s string, max int) int {
	if len(s) > 4*max+4 {
		s = s[:4*max+4]
	}
	n := 0
	invalid := false // the last byte was not UTF-8: a run takes one U+FFFD
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if n+1 > max {
				break
			}
			if b != nil {
				b[n] = c
			}
			n++
			i++
			invalid = false
			continue
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		if w == 1 {
			i++
			if invalid {
				continue
			}
			invalid = true
			if n+len(replacement) > max {
				break
			}
			if b != nil {
				copy(b[n:], replacement)
			}
			n += len(replacement)
			continue
		}
		invalid = false
		if n+w > max {
			break
		}
		if b != nil {
			copy(b[n:], s[i:i+w])
		}
		n += w
		i += w
	}
	return n
}

const replacement = "\uFFFD"

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func (z *sizer) str(s string) int {
	n := len(s)
	if n > z.value {
		n, _ = keptLen(s, z.value)
		z.cut++
	}
	return uvarintLen(uint64(n)) + n
}

// rawSize is the size of a string written whole: a trace state, which
// the API bounds (32 members of at most 256-byte keys and values) and
// which a cut would make unreadable.
func rawSize(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func (z *sizer) attrs(kvs []attribute.KeyValue, depth int) int {
	n := 0
	for _, kv := range kvs {
		n += z.attr(kv, depth)
	}
	return n
}

func (z *sizer) attr(kv attribute.KeyValue, depth int) int {
	return z.str(string(kv.Key)) + z.value1(kv.Value, depth)
}

func (z *sizer) value1(v attribute.Value, depth int) int {
	switch v.Type() {
	case attribute.BOOL:
		return 2
	case attribute.INT64:
		return 1 + uvarintLen(zigzag(v.AsInt64()))
	case attribute.FLOAT64:
		return 9
	case attribute.STRING:
		return 1 + z.str(v.AsString())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		return 1 + uvarintLen(uint64(len(s))) + len(s)
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		n := 1 + uvarintLen(uint64(len(s)))
		for _, x := range s {
			n += uvarintLen(zigzag(x))
		}
		return n
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		return 1 + uvarintLen(uint64(len(s))) + 8*len(s)
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		n := 1 + uvarintLen(uint64(len(s)))
		for _, x := range s {
			n += z.str(x)
		}
		return n
	case attribute.BYTESLICE:
		return 1 + z.str(string(v.AsByteSlice()))
	case attribute.SLICE:
		if depth >= maxDepth {
			z.cut++
			return 1
		}
		s := v.AsSlice()
		n := 1 + uvarintLen(uint64(len(s)))
		for _, x := range s {
			n += z.value1(x, depth+1)
		}
		return n
	case attribute.MAP:
		if depth >= maxDepth {
			z.cut++
			return 1
		}
		s := v.AsMap()
		return 1 + uvarintLen(uint64(len(s))) + z.attrs(s, depth+1)
	}
	return 1 // empty, or a type this version does not know: kept as empty
}

func (z *sizer) link(l sdktrace.Link) int {
	return 16 + 8 + 2 + rawSize(l.SpanContext.TraceState().String()) + 4 + 4 + z.attrs(l.Attributes, 0)
}

func (z *sizer) event(e sdktrace.Event) int {
	return z.str(e.Name) + 12 + 4 + 4 + z.attrs(e.Attributes, 0)
}

// planSpan sizes d's record within limit payload bytes: the prefix and
// strings always fit (the value limit is checked against the record bound
// at Open); attributes, links and events are kept in order while they fit.
func planSpan(d *spanData, value, limit int) plan {
	z := sizer{value: value}
	size := prefixSize + rawSize(d.span.ts) + z.str(d.name) + z.str(d.status.Description)
	if d.parent.ts != d.span.ts {
		size += rawSize(d.parent.ts)
	}
	p := plan{}
	for i, kv := range d.attrs {
		if d.attrsAtStart {
			break
		}
		n := z.attr(kv, 0)
		if size+n > limit {
			break
		}
		size += n
		p.nAttrs = i + 1
	}
	for i, l := range d.links {
		n := z.link(l)
		if size+n > limit {
			break
		}
		size += n
		p.nLinks = i + 1
	}
	for i, e := range d.events {
		n := z.event(e)
		if size+n > limit {
			break
		}
		size += n
		p.nEvents = i + 1
	}
	p.size = size
	p.cut = z.cut
	return p
}

// enc writes a payload into b. A write that does not fit sets over and
// writes nothing more: the live path encodes straight into the journal's
// free space and learns the size as it goes, without sizing it first.
type enc struct {
	b     []byte
	n     int
	value int
	over  bool
	cut   int // strings cut to the value limit
}

func (w *enc) room(k int) bool {
	if w.over || len(w.b)-w.n < k {
		w.over = true
		return false
	}
	return true
}

func (w *enc) u8(x byte) {
	if w.room(1) {
		w.b[w.n] = x
		w.n++
	}
}

func (w *enc) u32(x uint32) {
	if w.room(4) {
		binary.LittleEndian.PutUint32(w.b[w.n:], x)
		w.n += 4
	}
}

func (w *enc) u64(x uint64) {
	if w.room(8) {
		binary.LittleEndian.PutUint64(w.b[w.n:], x)
		w.n += 8
	}
}

func (w *enc) uvarint(x uint64) {
	if x < 0x80 && w.n < len(w.b) && !w.over {
		w.b[w.n] = byte(x)
		w.n++
		return
	}
	if len(w.b)-w.n >= binary.MaxVarintLen64 || w.room(uvarintLen(x)) {
		w.n += binary.PutUvarint(w.b[w.n:], x)
	}
}

func (w *enc) bytes(p []byte) {
	if w.room(len(p)) {
		w.n += copy(w.b[w.n:], p)
	}
}

func (w *enc) str(s string) {
	n := len(s)
	if n < 0x80 && n <= w.value && len(w.b)-w.n > n && !w.over {
		// A short string, nearly every one: its length in one byte.
		w.b[w.n] = byte(n)
		w.n += 1 + copy(w.b[w.n+1:], s)
		return
	}
	if n > w.value {
		w.cut++
		var own bool
		if n, own = keptLen(s, w.value); !own {
			w.uvarint(uint64(n))
			if w.room(n) {
				w.n += repairCut(w.b[w.n:w.n+n], s, w.value)
			}
			return
		}
	}
	w.uvarint(uint64(n))
	if w.room(n) {
		w.n += copy(w.b[w.n:], s[:n])
	}
}

func (w *enc) raw(s string) {
	if n := len(s); n < 0x80 && len(w.b)-w.n > n && !w.over {
		w.b[w.n] = byte(n)
		w.n += 1 + copy(w.b[w.n+1:], s)
		return
	}
	w.uvarint(uint64(len(s)))
	if w.room(len(s)) {
		w.n += copy(w.b[w.n:], s)
	}
}

func (w *enc) time(t time.Time) {
	w.u64(uint64(t.Unix()))
	w.u32(uint32(t.Nanosecond()))
}

func (w *enc) attrs(kvs []attribute.KeyValue, depth int) {
	for i := range kvs {
		kv := &kvs[i]
		key := string(kv.Key)
		// Short strings and integers, nearly every attribute, take one
		// check of room for the whole attribute.
		if len(key) < 0x80 && len(key) <= w.value && !w.over && len(w.b)-w.n >= len(key)+2+binary.MaxVarintLen64 {
			switch kv.Value.Type() {
			case attribute.STRING:
				if v := kv.Value.AsString(); len(v) < 0x80 && len(v) <= w.value && len(w.b)-w.n >= len(key)+len(v)+3 {
					b := w.b[w.n:]
					b[0] = byte(len(key))
					n := 1 + copy(b[1:], key)
					b[n] = vString
					b[n+1] = byte(len(v))
					n += 2 + copy(b[n+2:], v)
					w.n += n
					continue
				}
			case attribute.INT64:
				b := w.b[w.n:]
				b[0] = byte(len(key))
				n := 1 + copy(b[1:], key)
				b[n] = vInt64
				n++
				w.n += n + binary.PutUvarint(b[n:], zigzag(kv.Value.AsInt64()))
				continue
			}
		}
		w.str(key)
		w.value1(kv.Value, depth)
	}
}

func (w *enc) value1(v attribute.Value, depth int) {
	switch v.Type() {
	case attribute.BOOL:
		w.u8(vBool)
		if v.AsBool() {
			w.u8(1)
		} else {
			w.u8(0)
		}
	case attribute.INT64:
		w.u8(vInt64)
		w.uvarint(zigzag(v.AsInt64()))
	case attribute.FLOAT64:
		w.u8(vFloat64)
		w.u64(math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		w.u8(vString)
		w.str(v.AsString())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		w.u8(vBoolSlice)
		w.uvarint(uint64(len(s)))
		for _, x := range s {
			if x {
				w.u8(1)
			} else {
				w.u8(0)
			}
		}
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		w.u8(vInt64Slice)
		w.uvarint(uint64(len(s)))
		for _, x := range s {
			w.uvarint(zigzag(x))
		}
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		w.u8(vFloat64Slice)
		w.uvarint(uint64(len(s)))
		for _, x := range s {
			w.u64(math.Float64bits(x))
		}
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		w.u8(vStringSlice)
		w.uvarint(uint64(len(s)))
		for _, x := range s {
			w.str(x)
		}
	case attribute.BYTESLICE:
		w.u8(vBytes)
		w.str(string(v.AsByteSlice()))
	case attribute.SLICE:
		if depth >= maxDepth {
			w.u8(vEmpty)
			return
		}
		s := v.AsSlice()
		w.u8(vSlice)
		w.uvarint(uint64(len(s)))
		for _, x := range s {
			w.value1(x, depth+1)
		}
	case attribute.MAP:
		if depth >= maxDepth {
			w.u8(vEmpty)
			return
		}
		s := v.AsMap()
		w.u8(vMap)
		w.uvarint(uint64(len(s)))
		w.attrs(s, depth+1)
	default:
		w.u8(vEmpty)
	}
}

func sat32(n int) uint32 {
	if n < 0 {
		return 0
	}
	if n > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(n)
}

func (w *enc) spanContext(sc trace.SpanContext) {
	tid, sid := sc.TraceID(), sc.SpanID()
	w.bytes(tid[:])
	w.bytes(sid[:])
}

// span writes d's record with the first p.nAttrs attributes, p.nLinks
// links and p.nEvents events.
func (w *enc) span(d *spanData, p *plan) {
	if !w.room(prefixSize) {
		return
	}
	b := w.b[:prefixSize]
	clear(b)
	b[pType] = d.typ
	var flags byte
	if d.parent.valid {
		flags |= flagParentValid
	}
	if d.parent.remote {
		flags |= flagParentRemote
	}
	if d.span.remote {
		flags |= flagRemote
	}
	if d.parent.ts != d.span.ts {
		flags |= flagParentState
	}
	if d.attrsAtStart {
		flags |= flagAttrsAtStart
	}
	b[pFlags] = flags
	b[pKind] = byte(d.kind)
	b[pTraceFlags] = byte(d.span.flags)
	b[pParentFlags] = byte(d.parent.flags)
	copy(b[pTraceID:], d.span.tid[:])
	copy(b[pSpanID:], d.span.sid[:])
	copy(b[pParentID:], d.parent.sid[:])
	le := binary.LittleEndian
	le.PutUint64(b[pStart:], uint64(d.start.Unix()))
	le.PutUint32(b[pStart+8:], uint32(d.start.Nanosecond()))
	le.PutUint32(b[pScope:], d.scope)
	le.PutUint32(b[pResource:], d.res)
	le.PutUint32(b[pStatus:], uint32(d.status.Code))
	if d.typ == recEnd {
		le.PutUint64(b[pEnd:], uint64(d.end.Unix()))
		le.PutUint32(b[pEnd+8:], uint32(d.end.Nanosecond()))
	}
	if d.attrsAtStart {
		le.PutUint32(b[pDroppedAttrs:], sat32(d.droppedAttrs))
	} else {
		le.PutUint32(b[pDroppedAttrs:], sat32(d.droppedAttrs+len(d.attrs)-p.nAttrs))
	}
	le.PutUint32(b[pDroppedEvts:], sat32(d.droppedEvents+len(d.events)-p.nEvents))
	le.PutUint32(b[pDroppedLinks:], sat32(d.droppedLinks+len(d.links)-p.nLinks))
	le.PutUint32(b[pChildren:], sat32(d.children))
	if !d.attrsAtStart {
		le.PutUint32(b[pNAttrs:], uint32(p.nAttrs))
	}
	le.PutUint32(b[pNLinks:], uint32(p.nLinks))
	le.PutUint32(b[pNEvents:], uint32(p.nEvents))
	w.n = prefixSize
	w.raw(d.span.ts)
	w.str(d.name)
	w.str(d.status.Description)
	if d.parent.ts != d.span.ts {
		w.raw(d.parent.ts)
	}
	if !d.attrsAtStart {
		w.attrs(d.attrs[:p.nAttrs], 0)
	}
	for _, l := range d.links[:p.nLinks] {
		w.spanContext(l.SpanContext)
		w.u8(byte(l.SpanContext.TraceFlags()))
		if l.SpanContext.IsRemote() {
			w.u8(1)
		} else {
			w.u8(0)
		}
		w.raw(l.SpanContext.TraceState().String())
		w.u32(sat32(l.DroppedAttributeCount))
		w.u32(uint32(len(l.Attributes)))
		w.attrs(l.Attributes, 0)
	}
	for _, e := range d.events[:p.nEvents] {
		w.str(e.Name)
		w.time(e.Time)
		w.u32(sat32(e.DroppedAttributeCount))
		w.u32(uint32(len(e.Attributes)))
		w.attrs(e.Attributes, 0)
	}
}

// planDefinition sizes a definition record within limit payload bytes:
// its attributes are kept in order while they fit.
func planDefinition(d *definition, value, limit int) plan {
	z := sizer{value: value}
	size := 1 + 4 + z.str(d.schema) + 4
	if d.typ == recScope {
		size += z.str(d.name) + z.str(d.version)
	}
	p := plan{}
	for i, kv := range d.attrs {
		n := z.attr(kv, 0)
		if size+n > limit {
			break
		}
		size += n
		p.nAttrs = i + 1
	}
	p.size, p.cut = size, z.cut
	return p
}

func (w *enc) definition(d *definition, p *plan) {
	w.n = 0
	w.u8(d.typ)
	w.u32(d.id)
	w.str(d.schema)
	if d.typ == recScope {
		w.str(d.name)
		w.str(d.version)
	}
	w.u32(uint32(p.nAttrs))
	w.attrs(d.attrs[:p.nAttrs], 0)
}
