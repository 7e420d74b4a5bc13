// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
)

// ErrUnsupported is returned by [Open] and [Recover] where the journal
// cannot work: it needs Linux (mmap, flock, fallocate).
var ErrUnsupported = errors.New("journal: supported on Linux only")

// Journal is one process's crash journal: a file of its own in the
// directory given to [Open], memory-mapped, that holds a record of every
// sampled span that started, and of its end, until its export is
// confirmed. Its methods are safe for concurrent use.
type Journal struct {
	cfg        config
	geo        geometry
	path       string
	f          *os.File
	mem        []byte
	maxPayload int

	// mu guards the write heads and the segments' states.
	mu    sync.Mutex
	head  head // where spans' records go
	carry head // where compaction copies records still needed
	gen   uint64
	free  []int
	segs  []segment

	shards [nShards]shard

	// confirmMu guards the scratch slices of confirm.
	confirmMu      sync.Mutex
	confirmKeys    []uint64
	confirmByShard []uint64

	defsMu   sync.Mutex
	defsEnd  int
	nextDef  uint32
	scopes   atomic.Pointer[[]scopeDef]
	res      atomic.Pointer[[]resDef]
	defsFull bool

	// Every access to mem on a span's path happens under mu, a shard's
	// lock or defsMu, each checking closed once taken: Close takes them
	// all before it unmaps, so a span never waits on a counter of its own.
	closed atomic.Bool
	broken atomic.Bool // a fault stopped the journal

	st     stats
	warned [nWarn]atomic.Bool

	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	closeErr error
}

// Segment states.
const (
	segFree = iota
	segCurrent
	segFull
	segCompacting
)

type segment struct {
	live  atomic.Int64 // records not yet done, written or being written
	gen   uint64       // under mu
	state int          // under mu
	used  int          // bytes used when it stopped being current; under mu
}

// head is a place records are appended: a segment and its next free byte.
type head struct {
	cur int // -1: none
	off int
}

// spanKey identifies a span: trace id and span id.
type spanKey struct {
	t trace.TraceID
	s trace.SpanID
}

// liveKey is the key of a span in the journal's map: its span id. Two
// open spans with one span id (in different traces) are one to the
// journal, which keeps the newer: span ids are random 64-bit numbers, so
// this needs an id generator that repeats them.
func liveKey(sid trace.SpanID) uint64 {
	return binary.LittleEndian.Uint64(sid[:])
}

// entry is where a span's live records lie (file offsets; 0 for none).
// A start record stays live after the end while the end record leaves
// the attributes to it. An entry with neither is a span whose export was
// confirmed before its end was journalled (the journal's processor was
// registered after the batcher): its end is not journalled.
//
// attrs, until the end, is where the slice of attributes the span had at
// its start begins. While the span keeps that slice (the SDK copies it at
// any change, once read) and the start record holds all of it (as many
// attributes as its prefix counts), the end record needs no attributes of
// its own. What else the end takes from the start record (its scope and
// resource among it) is read from the record's prefix: the table's slots
// stay small, and more of them are in the caches.
type entry struct {
	start, end int32
	attrs      *attribute.KeyValue
}

const nShards = 32

type shard struct {
	mu  sync.Mutex
	t   table    // open spans, and ended ones the log does not hold
	log endedLog // ended spans awaiting confirmation, in the order they ended
	_   [8]byte  // keep shards on their own cache lines
}

func (j *Journal) shard(k uint64) *shard { return &j.shards[shardOf(k)] }

func shardOf(k uint64) int { return int(k >> 56 & (nShards - 1)) }

type scopeDef struct {
	s  instrumentation.Scope
	id uint32
}

type resDef struct {
	r  *resource.Resource
	id uint32
}

// maxDefs bounds the scopes and resources the journal tells apart; spans
// of any beyond are journalled without theirs (counted).
const maxDefs = 256

// Stats counts what the journal could not keep. Every count is also
// logged once through otel.Handle the first time it grows.
type Stats struct {
	// Dropped: records not written because no segment was free (the
	// journal is full of records still needed and the background
	// goroutine had not yet made room), or after a fault stopped the
	// journal. A span whose end was dropped is no longer journalled.
	Dropped uint64
	// Evicted: spans still needed (still open, or ended and not yet
	// confirmed) removed from the journal to make room, from the segment
	// cheapest to free: they are not recovered after a death.
	Evicted uint64
	// Carried: records of open spans, and of ended spans not yet
	// confirmed, copied forward so that their segment could be reused.
	Carried uint64
	// CutStrings: strings cut to the value limit.
	CutStrings uint64
	// CutItems: attributes, links and events left out of a record to keep
	// it within its bound; the span's dropped counts include them.
	CutItems uint64
	// NoScope: spans journalled without their instrumentation scope or
	// resource, because the journal already holds its maximum of 256
	// scopes and resources or their area is full.
	NoScope uint64
	// OpenAtClose: spans started and not ended when Close ran: the SDK
	// never exports them, and they are not recovered either.
	OpenAtClose uint64
	// AfterClose: spans that started or ended after Close.
	AfterClose uint64
	// Faults: 1 if a fault (an I/O error on the mapped file, such as a
	// file truncated under the journal) stopped the journal.
	Faults uint64
}

type stats struct {
	dropped, evicted, carried, cutStrings, cutItems, noScope, openAtClose, afterClose, faults atomic.Uint64
}

// Stats returns what the journal counted so far.
func (j *Journal) Stats() Stats {
	return Stats{
		Dropped: j.st.dropped.Load(), Evicted: j.st.evicted.Load(), Carried: j.st.carried.Load(),
		CutStrings: j.st.cutStrings.Load(), CutItems: j.st.cutItems.Load(), NoScope: j.st.noScope.Load(),
		OpenAtClose: j.st.openAtClose.Load(), AfterClose: j.st.afterClose.Load(), Faults: j.st.faults.Load(),
	}
}

// Path returns the journal's file.
func (j *Journal) Path() string { return j.path }

const (
	warnDropped = iota
	warnEvicted
	warnCut
	warnNoScope
	warnFault
	warnOrphan
	nWarn
)

// warn logs err through otel.Handle the first time its kind happens.
func (j *Journal) warn(kind int, err error) {
	if !j.warned[kind].Swap(true) {
		otel.Handle(err)
	}
}

// init sets up the in-memory state over a freshly mapped file.
func (j *Journal) init() {
	j.maxPayload = j.geo.maxPayload()
	j.head.cur, j.carry.cur = -1, -1
	j.gen = firstGen - 1
	j.segs = make([]segment, j.geo.segCount)
	j.free = make([]int, 0, j.geo.segCount)
	for i := range j.segs {
		j.free = append(j.free, i)
	}
	j.defsEnd = j.geo.defsOff()
	j.nextDef = 1
	j.kick = make(chan struct{}, 1)
	j.stop = make(chan struct{})
	j.done = make(chan struct{})
}

func (j *Journal) writeHeader(now time.Time) {
	h := j.mem[:headerSize]
	le := binary.LittleEndian
	copy(h[hdrMagic:], fileMagic)
	le.PutUint32(h[hdrVersion:], formatVersion)
	le.PutUint32(h[hdrSegSize:], uint32(j.geo.segSize))
	le.PutUint32(h[hdrSegCount:], uint32(j.geo.segCount))
	le.PutUint32(h[hdrDefsSize:], uint32(j.geo.defsSize))
	le.PutUint64(h[hdrInterval:], uint64(j.cfg.heartbeat))
	le.PutUint64(h[hdrPID:], uint64(os.Getpid()))
	le.PutUint64(h[hdrCreated:], uint64(now.UnixNano()))
	le.PutUint32(h[hdrCRC:], crc32c(h[:hdrCRC]))
	j.beat(now)
}

func (j *Journal) word32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&j.mem[off])) }
func (j *Journal) word64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&j.mem[off])) }

func (j *Journal) beat(now time.Time) {
	atomic.StoreUint64(j.word64(hdrHeartbeat), uint64(now.UnixNano()))
}

// enter says whether the journal takes an operation: not once closed or
// stopped. An operation that entered defers exit.
func (j *Journal) enter() bool {
	return !j.closed.Load() && !j.broken.Load()
}

// refused counts a span the journal did not take because it was closed.
func (j *Journal) refused() {
	if j.closed.Load() {
		j.st.afterClose.Add(1)
	}
}

// exit ends an operation. It is deferred with the goroutine's previous
// panic-on-fault setting: a fault on the mapping (a SIGBUS when the file
// was truncated under the journal, or the disk could not back a page)
// stops the journal, is logged, and never reaches the engine.
func (j *Journal) exit(faults bool) {
	if r := recover(); r != nil {
		j.fault(r)
	}
	debug.SetPanicOnFault(faults)
}

func (j *Journal) fault(r any) {
	j.broken.Store(true)
	if j.st.faults.CompareAndSwap(0, 1) {
		j.warn(warnFault, fmt.Errorf("journal: %s: stopped after a fault, spans are no longer journalled: %v", j.path, r))
	}
}

// reserveAt takes room for a record of n payload bytes at head h, moving
// to a free segment when its segment is full, while more than keep
// segments are free. It never waits for room: with none it returns false.
// The writers keep the last free segment for compaction, which then
// always has room to carry records.
func (j *Journal) reserveAt(h *head, keep, n int) (loc int, gen uint32, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.reserveLocked(h, keep, n)
}

func (j *Journal) reserveLocked(h *head, keep, n int) (loc int, gen uint32, ok bool) {
	size := recordSize(n)
	if h.cur < 0 || h.off+size > j.geo.segSize {
		if !j.nextSegmentLocked(h, keep) {
			return 0, 0, false
		}
	}
	s := &j.segs[h.cur]
	loc = j.geo.segOff(h.cur) + h.off
	h.off += size
	s.live.Add(1)
	return loc, uint32(s.gen), true
}

// spare is how many free segments compaction keeps: one to carry records
// into (the writers never take it) and two for the writers to move to,
// so that they move on while compaction runs.
const spare = 3

func (j *Journal) nextSegmentLocked(h *head, keep int) bool {
	if h.cur >= 0 {
		s := &j.segs[h.cur]
		s.state = segFull
		s.used = h.off
		if s.live.Load() == 0 {
			j.freeLocked(h.cur)
		}
		h.cur = -1
	}
	if len(j.free) <= spare {
		j.poke()
	}
	if len(j.free) <= keep {
		return false
	}
	// The segment freed last: its pages are the likeliest to be in the
	// processor's caches still.
	i := j.free[len(j.free)-1]
	j.free = j.free[:len(j.free)-1]
	j.gen++
	s := &j.segs[i]
	s.gen, s.state, s.used = j.gen, segCurrent, 0
	base := j.geo.segOff(i)
	binary.LittleEndian.PutUint32(j.mem[base:], segMagic)
	atomic.StoreUint64(j.word64(base+segGenOff), j.gen)
	h.cur, h.off = i, segHeaderSize
	return true
}

func (j *Journal) freeLocked(i int) {
	j.segs[i].state = segFree
	j.free = append(j.free, i)
}

// poke wakes the background goroutine to make room.
func (j *Journal) poke() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// markDone turns a live record done; callers hold the shard lock of the
// record's span, under which alone a record's state is written or read
// (see isLive).
func (j *Journal) markDone(loc int) {
	*j.word32(loc + recState) = stateDone
	j.released(j.geo.segOf(loc), 1)
}

// released counts n records of segment i done, and frees the segment when
// it was full and they were its last live ones.
func (j *Journal) released(i int, n int64) {
	if j.segs[i].live.Add(-n) == 0 {
		j.mu.Lock()
		defer j.mu.Unlock()
		if s := &j.segs[i]; s.state == segFull && s.live.Load() == 0 {
			j.freeLocked(i)
		}
	}
}

// doneBatch marks records done as markDone does, and counts them against
// their segments once per run of records in one segment rather than once a
// record: a batch's records lie in a few segments. The caller holds the
// shard lock of every record's span from the first mark to flush, so that
// no one sees a record done that its segment still counts live.
type doneBatch struct {
	seg, n int
}

func (b *doneBatch) mark(j *Journal, loc int) {
	*j.word32(loc + recState) = stateDone
	if i := j.geo.segOf(loc); i != b.seg || b.n == 0 {
		b.flush(j)
		b.seg = i
	}
	b.n++
}

func (b *doneBatch) flush(j *Journal) {
	if b.n > 0 {
		j.released(b.seg, int64(b.n))
		b.n = 0
	}
}

// isLive says whether the record at loc is live. A record's state word is
// written and read under the shard lock of its span only (once published;
// its publication is under that lock too): plain memory accesses, with no
// fence to wait for the writes before them to reach memory.
func (j *Journal) isLive(loc int) bool {
	return *j.word32(loc + recState) == stateLive
}

// publish writes the record header at loc (payload n bytes, already
// written) and then its CRC, which makes it a record. No one reads a
// record of the segment a writer appends to (compaction reads full
// segments only, after taking mu, under which records are appended), so
// the stores need no fence: only their order matters, for a death between
// them, and a store is never moved before an earlier one.
func (j *Journal) publish(loc, n int, gen uint32) {
	b := j.mem[loc : loc+recHeaderSize+n]
	putRecordHeader(b, n, gen)
	binary.LittleEndian.PutUint32(b[recCRC:], recordCRC(b, n))
}

// writeSpan journals d; it returns where, or false when it was dropped.
// The caller links the record to its span.
func (j *Journal) writeSpan(d *spanData) (loc int, ok bool) {
	loc, _, _, cut, res := j.appendSpan(d)
	switch res {
	case appendClosed:
		return 0, false
	case appendDropped:
		j.drop()
		return 0, false
	case appendTooBig:
		return j.writeCut(d)
	}
	if cut > 0 {
		j.cutStrings(d, cut)
	}
	return loc, true
}

const (
	appended = iota
	appendDropped
	appendTooBig
	appendClosed
)

// appendSpan encodes d straight into the free space at the writers' head,
// under mu: one pass, no sizing, no copy. A record that does not fit the
// rest of the segment moves to the next one; one that does not fit the
// record bound is left to writeCut.
func (j *Journal) appendSpan(d *spanData) (loc, n int, gen uint32, cut, res int) {
	p := plan{nAttrs: len(d.attrs), nLinks: len(d.links), nEvents: len(d.events)}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed.Load() {
		return 0, 0, 0, 0, appendClosed
	}
	h := &j.head
	for range 2 {
		if h.cur < 0 && !j.nextSegmentLocked(h, 1) {
			return 0, 0, 0, 0, appendDropped
		}
		limit := min(j.geo.segSize-h.off-recHeaderSize, j.maxPayload)
		loc = j.geo.segOff(h.cur) + h.off
		w := enc{value: j.cfg.value}
		if limit > 0 {
			w.b = j.mem[loc+recHeaderSize : loc+recHeaderSize+limit]
		}
		w.span(d, &p)
		if !w.over {
			s := &j.segs[h.cur]
			size := recordSize(w.n)
			h.off += size
			s.live.Add(1)
			j.publish(loc, w.n, uint32(s.gen))
			return loc, w.n, uint32(s.gen), w.cut, appended
		}
		if limit == j.maxPayload {
			return 0, 0, 0, 0, appendTooBig
		}
		if !j.nextSegmentLocked(h, 1) {
			return 0, 0, 0, 0, appendDropped
		}
	}
	return 0, 0, 0, 0, appendTooBig
}

// writeCut journals a span whose record would pass the record bound:
// sized first, it keeps the attributes, links and events that fit.
func (j *Journal) writeCut(d *spanData) (int, bool) {
	p := planSpan(d, j.cfg.value, j.maxPayload)
	if p.cut > 0 {
		j.cutStrings(d, p.cut)
	}
	if left := len(d.attrs) - p.nAttrs + len(d.links) - p.nLinks + len(d.events) - p.nEvents; left > 0 {
		j.st.cutItems.Add(uint64(left))
		j.warn(warnCut, fmt.Errorf("journal: span %q: %d attributes, links or events left out of its record to keep it within %d bytes (counted in CutItems)", cutForLog(d.name), left, j.maxPayload))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed.Load() {
		return 0, false
	}
	loc, gen, ok := j.reserveLocked(&j.head, 1, p.size)
	if !ok {
		j.drop()
		return 0, false
	}
	w := enc{b: j.mem[loc+recHeaderSize : loc+recHeaderSize+p.size], value: j.cfg.value}
	w.span(d, &p)
	if w.over || w.n != p.size {
		panic(fmt.Sprintf("journal: record of %d bytes planned as %d", w.n, p.size))
	}
	j.publish(loc, p.size, gen)
	return loc, true
}

func (j *Journal) drop() {
	j.st.dropped.Add(1)
	j.warn(warnDropped, fmt.Errorf("journal: %s is full of records still needed: spans are not journalled until room is made (counted in Dropped)", j.path))
}

func (j *Journal) cutStrings(d *spanData, n int) {
	j.st.cutStrings.Add(uint64(n))
	j.warn(warnCut, fmt.Errorf("journal: span %q: a string was cut to %d bytes (counted in CutStrings)", cutForLog(d.name), j.cfg.value))
}

func cutForLog(s string) string {
	if len(s) > 64 {
		return s[:cutLen(s, 64)] + "..."
	}
	return s
}

// scopeID returns the definition id of s, writing its definition the
// first time it is seen; 0 when it cannot be written.
func (j *Journal) scopeID(s instrumentation.Scope) uint32 {
	if l := j.scopes.Load(); l != nil {
		for i := range *l {
			d := &(*l)[i]
			if sameScopeAs(&d.s, &s) {
				return d.id
			}
		}
	}
	return j.define(&definition{typ: recScope, name: s.Name, version: s.Version, schema: s.SchemaURL, attrs: s.Attributes.ToSlice()}, s, nil)
}

func sameScopeAs(a, b *instrumentation.Scope) bool {
	if a.Name != b.Name || a.Version != b.Version || a.SchemaURL != b.SchemaURL || a.Attributes.Len() != b.Attributes.Len() {
		return false
	}
	return a.Attributes.Len() == 0 || a.Attributes.Equivalent() == b.Attributes.Equivalent()
}

// resourceID returns the definition id of r, as scopeID does.
func (j *Journal) resourceID(r *resource.Resource) uint32 {
	if r == nil {
		return 0
	}
	if l := j.res.Load(); l != nil {
		for i := range *l {
			if (*l)[i].r == r {
				return (*l)[i].id
			}
		}
	}
	return j.define(&definition{typ: recResource, schema: r.SchemaURL(), attrs: r.Attributes()}, instrumentation.Scope{}, r)
}

func (j *Journal) define(d *definition, s instrumentation.Scope, r *resource.Resource) uint32 {
	j.defsMu.Lock()
	defer j.defsMu.Unlock()
	if j.closed.Load() {
		return 0
	}
	// Seen meanwhile?
	if r != nil {
		if l := j.res.Load(); l != nil {
			for _, e := range *l {
				if e.r == r {
					return e.id
				}
			}
		}
	} else if l := j.scopes.Load(); l != nil {
		for _, e := range *l {
			if sameScopeAs(&e.s, &s) {
				return e.id
			}
		}
	}
	nScopes, nRes := 0, 0
	if l := j.scopes.Load(); l != nil {
		nScopes = len(*l)
	}
	if l := j.res.Load(); l != nil {
		nRes = len(*l)
	}
	id := uint32(0)
	if nScopes+nRes < maxDefs && !j.defsFull {
		end := j.geo.defsOff() + j.geo.defsSize
		limit := min(j.maxPayload, end-j.defsEnd-recHeaderSize)
		d.id = j.nextDef
		p := planDefinition(d, j.cfg.value, max(limit, 0))
		if limit > 0 && p.size <= limit && j.defsEnd+recordSize(p.size) <= end {
			loc := j.defsEnd
			w := enc{b: j.mem[loc+recHeaderSize : loc+recHeaderSize+p.size], value: j.cfg.value}
			w.definition(d, &p)
			j.publish(loc, p.size, defsGen)
			j.defsEnd += recordSize(p.size)
			id = d.id
			j.nextDef++
			if p.cut > 0 {
				j.st.cutStrings.Add(uint64(p.cut))
			}
			if left := len(d.attrs) - p.nAttrs; left > 0 {
				j.st.cutItems.Add(uint64(left))
			}
		} else {
			j.defsFull = true
		}
	}
	if id == 0 {
		j.st.noScope.Add(1)
		j.warn(warnNoScope, fmt.Errorf("journal: %s: no room for another instrumentation scope or resource: spans of %q are journalled without theirs (counted in NoScope)", j.path, cutForLog(s.Name)))
	}
	if nScopes+nRes >= maxDefs {
		return 0 // not remembered either: the lists stay bounded
	}
	if r != nil {
		l := []resDef{}
		if old := j.res.Load(); old != nil {
			l = append(l, *old...)
		}
		l = append(l, resDef{r: r, id: id})
		j.res.Store(&l)
	} else {
		l := []scopeDef{}
		if old := j.scopes.Load(); old != nil {
			l = append(l, *old...)
		}
		l = append(l, scopeDef{s: s, id: id})
		j.scopes.Store(&l)
	}
	return id
}

// background stores the heartbeat, flushes the file when asked to, and
// makes room in the ring.
func (j *Journal) background() {
	defer close(j.done)
	t := time.NewTicker(j.cfg.heartbeat)
	defer t.Stop()
	lastSync := time.Now()
	for {
		select {
		case <-j.stop:
			return
		case now := <-t.C:
			if !j.enter() {
				continue
			}
			j.guarded(func() {
				j.beat(now)
				j.trimTables()
				if j.cfg.sync > 0 && now.Sub(lastSync) >= j.cfg.sync {
					lastSync = now
					if err := j.msync(); err != nil {
						j.warn(warnFault, fmt.Errorf("journal: %s: flushing to disk: %w", j.path, err))
					}
				}
				j.maintain()
			})
		case <-j.kick:
			if !j.enter() {
				continue
			}
			j.guarded(j.maintain)
		}
	}
}

// trimTables shrinks each shard's table to what it needed since the last
// heartbeat.
func (j *Journal) trimTables() {
	for i := range j.shards {
		sh := &j.shards[i]
		sh.mu.Lock()
		if !j.closed.Load() {
			sh.t.trim()
		}
		sh.mu.Unlock()
	}
}

// guarded runs f inside an operation entered by the caller.
func (j *Journal) guarded(f func()) {
	defer j.exit(debug.SetPanicOnFault(true))
	f()
}

// maintain keeps spare free segments by compacting full ones, at most
// one pass over the ring at a time. It picks the segment with the fewest
// live records (the oldest of equals): the cheapest to free, so that a
// segment full of open spans is left while others will do.
func (j *Journal) maintain() {
	for range j.geo.segCount {
		j.mu.Lock()
		victim := -1
		if len(j.free) < spare {
			for i := range j.segs {
				s := &j.segs[i]
				if s.state != segFull {
					continue
				}
				if victim < 0 {
					victim = i
					continue
				}
				b, vb := s.live.Load(), j.segs[victim].live.Load()
				if b < vb || b == vb && s.gen < j.segs[victim].gen {
					victim = i
				}
			}
		}
		if victim >= 0 {
			j.segs[victim].state = segCompacting
		}
		j.mu.Unlock()
		if victim < 0 {
			return
		}
		j.compact(victim)
	}
}

// compact frees segment i. When its live records take at most half a
// segment it copies them all forward; otherwise the ring is full of
// records still needed, and it copies the open spans' starts (up to half
// a segment) and evicts the rest, so that each compaction frees at least
// half a segment.
func (j *Journal) compact(i int) {
	base := j.geo.segOff(i)
	j.mu.Lock()
	used, gen := j.segs[i].used, uint32(j.segs[i].gen)
	j.mu.Unlock()
	le := binary.LittleEndian
	each := func(f func(pos, n int)) {
		for pos := base + segHeaderSize; pos+recHeaderSize <= base+used; {
			n := int(le.Uint32(j.mem[pos+recLen:]))
			if le.Uint32(j.mem[pos+recGen:]) != gen || n < prefixSize || pos+recordSize(n) > base+used {
				break
			}
			if j.liveAt(pos) {
				f(pos, n)
			}
			pos += recordSize(n)
		}
	}
	budget := j.geo.segSize / 2
	liveBytes := 0
	each(func(_, n int) { liveBytes += recordSize(n) })
	carryAll := liveBytes <= budget
	carried := 0
	each(func(pos, n int) {
		carry := carryAll || j.mem[pos+recHeaderSize+pType] == recStart
		if carry && carried+recordSize(n) > budget {
			carry = false
		}
		if j.compactRecord(pos, n, carry) {
			carried += recordSize(n)
		}
	})
	j.mu.Lock()
	defer j.mu.Unlock()
	if s := &j.segs[i]; s.live.Load() == 0 {
		j.freeLocked(i)
	} else {
		s.state = segFull
		j.warn(warnOrphan, fmt.Errorf("journal: %s: a segment holds %d records that no span refers to", j.path, s.live.Load()))
	}
}

// liveAt says whether the span record at pos, in a segment no one appends
// to, is live, under its span's shard lock.
func (j *Journal) liveAt(pos int) bool {
	sh := j.shard(binary.LittleEndian.Uint64(j.mem[pos+recHeaderSize+pSpanID:]))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return j.isLive(pos)
}

// compactRecord carries the live record at pos forward, or evicts it; it
// returns whether it carried it.
func (j *Journal) compactRecord(pos, n int, carry bool) bool {
	p := j.mem[pos+recHeaderSize : pos+recHeaderSize+n]
	typ := p[pType]
	k := binary.LittleEndian.Uint64(p[pSpanID:])
	sh := j.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !j.isLive(pos) {
		return false // its span ended or was confirmed meanwhile
	}
	// The span's entry, in the table or in the log, and where in it the
	// record's offset is.
	refers := func(start, end *int32) *int32 {
		switch {
		case typ == recStart && int(*start) == pos:
			return start
		case typ == recEnd && int(*end) == pos:
			return end
		}
		return nil
	}
	var at, start, end *int32
	ep := sh.t.get(k)
	logged := -1
	if ep != nil {
		start, end = &ep.start, &ep.end
		at = refers(start, end)
	}
	if at == nil {
		for i := range sh.log.n {
			if le := sh.log.at(i); le.key == k {
				if at = refers(&le.start, &le.end); at != nil {
					start, end, logged = &le.start, &le.end, i
					break
				}
			}
		}
	}
	if at == nil {
		j.markDone(pos)
		j.warn(warnOrphan, fmt.Errorf("journal: %s: a record no span refers to was dropped", j.path))
		return false
	}
	if carry {
		if nl, gen, ok := j.reserveAt(&j.carry, 0, n); ok {
			copy(j.mem[nl+recHeaderSize:nl+recHeaderSize+n], p)
			j.publish(nl, n, gen)
			*at = int32(nl)
			j.markDone(pos)
			j.st.carried.Add(1)
			return true
		}
	}
	// The span leaves the journal whole: an end record may leave its
	// attributes to the start record, and a start record without its end
	// would pass for an open span.
	j.release(entry{start: *start, end: *end})
	if logged >= 0 {
		sh.log.at(logged).key = 0
	} else {
		sh.t.del(k)
	}
	j.st.evicted.Add(1)
	j.warn(warnEvicted, fmt.Errorf("journal: %s is full: the oldest spans still needed are evicted, they would not be recovered after a death (counted in Evicted)", j.path))
	return false
}

// Close stops the journal after a clean shutdown; call it after the
// tracer provider's Shutdown, whose final export confirms the last spans
// (a span starting while Close runs may be left in the file as open).
// Spans that never ended are no longer journalled (counted in
// OpenAtClose). When every span the journal holds was confirmed, the file
// is removed; otherwise it stays for [Recover] at the next start. A
// journal a fault stopped is removed, and Close says so. Close
// waits for operations in progress (a record's copy), never for I/O
// beyond one msync with [WithSyncInterval]. Later calls return the first
// call's result; spans that start or end after it are not journalled
// (counted in AfterClose).
func (j *Journal) Close() error {
	j.once.Do(func() { j.closeErr = j.close() })
	return j.closeErr
}

func (j *Journal) close() error {
	j.closed.Store(true)
	close(j.stop)
	<-j.done
	// Once these are taken, no span is using the mapping, and none will.
	for i := range j.shards {
		j.shards[i].mu.Lock()
		defer j.shards[i].mu.Unlock()
	}
	j.defsMu.Lock()
	defer j.defsMu.Unlock()
	var err error
	live := int64(0)
	func() {
		defer func() {
			if r := recover(); r != nil {
				j.fault(r)
				err = fmt.Errorf("journal: %s: closing: %v", j.path, r)
			}
		}()
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		if j.broken.Load() {
			return
		}
		for i := range j.shards {
			sh := &j.shards[i]
			var open []uint64
			sh.t.each(func(k uint64, e *entry) {
				if e.end == 0 {
					if e.start != 0 {
						j.markDone(int(e.start))
						j.st.openAtClose.Add(1)
					}
					open = append(open, k)
				}
			})
			for _, k := range open {
				sh.t.del(k)
			}
		}
		for i := range j.segs {
			live += j.segs[i].live.Load()
		}
		if live > 0 {
			atomic.StoreUint64(j.word64(hdrClosed), uint64(time.Now().UnixNano()))
			if j.cfg.sync > 0 {
				if e := j.msync(); e != nil {
					err = fmt.Errorf("journal: %s: flushing to disk: %w", j.path, e)
				}
			}
		}
	}()
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.broken.Load():
		// What it holds is no longer kept up to date: the spans it
		// journalled before the fault were exported since, or not, and
		// nothing says which. A recovery would send them again.
		_ = os.Remove(j.path)
		if err == nil {
			err = fmt.Errorf("journal: %s had stopped after a fault; removed", j.path)
		}
	case live == 0:
		if e := os.Remove(j.path); e != nil && err == nil {
			err = fmt.Errorf("journal: removing %s: %w", j.path, e)
		}
	}
	if e := unmap(j.mem); e != nil && err == nil {
		err = fmt.Errorf("journal: %s: %w", j.path, e)
	}
	j.mem = nil
	if e := j.f.Close(); e != nil && err == nil { // releases the lock
		err = fmt.Errorf("journal: %s: %w", j.path, e)
	}
	return err
}

// SyncInterval returns the interval at which the journal flushes its file
// to the disk, 0 for never ([WithSyncInterval]).
func (j *Journal) SyncInterval() time.Duration { return j.cfg.sync }
