// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"runtime/debug"
	"slices"
	"time"
	"unsafe"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SpanProcessor returns the processor that journals spans. Register it on
// the tracer provider before the batch processor, so that a span's end is
// journalled before the batcher can export it:
//
//	sdktrace.NewTracerProvider(
//		sdktrace.WithSpanProcessor(j.SpanProcessor()),
//		sdktrace.WithBatcher(j.WrapExporter(exp)))
//
// It journals sampled spans only (the batcher exports no other), from any
// instrumentation on the provider. Its Shutdown and ForceFlush do nothing:
// the provider's Shutdown calls them before the batcher's final export,
// whose confirmations the journal still records; [Journal.Close] ends it.
func (j *Journal) SpanProcessor() sdktrace.SpanProcessor { return processor{j} }

type processor struct{ j *Journal }

func (p processor) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	sc := ctxOf(s.SpanContext())
	if !sc.flags.IsSampled() || !sc.valid {
		return
	}
	j := p.j
	if !j.enter() {
		j.refused()
		return
	}
	defer j.exit(debug.SetPanicOnFault(true))
	d := spanData{
		typ:          recStart,
		span:         sc,
		parent:       ctxOf(s.Parent()),
		kind:         s.SpanKind(),
		name:         s.Name(),
		start:        s.StartTime(),
		attrs:        s.Attributes(),
		links:        s.Links(),
		droppedAttrs: s.DroppedAttributes(),
		droppedLinks: s.DroppedLinks(),
		scope:        j.scopeID(s.InstrumentationScope()),
		res:          j.resourceID(s.Resource()),
	}
	// The record is written and linked under its shard's lock: compaction,
	// which moves a record under the same lock, never finds one that no
	// span refers to yet.
	k := liveKey(sc.sid)
	sh := j.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if j.closed.Load() {
		j.refused()
		return
	}
	loc, ok := j.writeSpan(&d)
	if !ok {
		return
	}
	// Another open span with the same span id (an id generator that
	// repeats) is replaced: its records, no longer referred to, are
	// dropped when compaction reaches them.
	*sh.t.put(k) = entry{start: int32(loc), attrs: unsafe.SliceData(d.attrs)}
}

// release marks an entry's records done; the caller holds its shard lock.
func (j *Journal) release(e entry) {
	if e.start != 0 {
		j.markDone(int(e.start))
	}
	if e.end != 0 {
		j.markDone(int(e.end))
	}
}

func (p processor) OnEnd(s sdktrace.ReadOnlySpan) {
	sc := ctxOf(s.SpanContext())
	if !sc.flags.IsSampled() || !sc.valid {
		return
	}
	j := p.j
	if !j.enter() {
		j.refused()
		return
	}
	defer j.exit(debug.SetPanicOnFault(true))
	k := liveKey(sc.sid)
	sh := j.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if j.closed.Load() {
		j.refused()
		return
	}
	// An open span's entry is in the table. One ended already (a
	// processor called twice: the SDK ends a span once) is in the log, or
	// in the table if it moved there.
	var e entry
	ep := sh.t.get(k)
	logged := -1
	if ep != nil {
		e = *ep
		if e.start == 0 && e.end == 0 {
			// Exported and confirmed already.
			sh.t.del(k)
			return
		}
	} else if logged = sh.log.find(k); logged >= 0 {
		le := sh.log.at(logged)
		e = entry{start: le.start, end: le.end}
	}
	d := spanData{
		typ:           recEnd,
		span:          sc,
		name:          s.Name(),
		end:           s.EndTime(),
		attrs:         s.Attributes(),
		links:         s.Links(),
		events:        s.Events(),
		status:        s.Status(),
		droppedAttrs:  s.DroppedAttributes(),
		droppedEvents: s.DroppedEvents(),
		droppedLinks:  s.DroppedLinks(),
		children:      s.ChildSpanCount(),
	}
	// What a span cannot change once started is read from its start
	// record when that is live: each accessor of the SDK's ended span
	// copies the whole span.
	if e.start != 0 && e.end == 0 {
		p := j.mem[int(e.start)+recHeaderSize : int(e.start)+recHeaderSize+prefixSize]
		if !startFields(p, &d) {
			d.parent, d.kind, d.start = ctxOf(s.Parent()), s.SpanKind(), s.StartTime()
		}
		le := binary.LittleEndian
		d.scope, d.res = le.Uint32(p[pScope:]), le.Uint32(p[pResource:])
		d.attrsAtStart = int(le.Uint32(p[pNAttrs:])) == len(d.attrs) && unsafe.SliceData(d.attrs) == e.attrs
	} else {
		d.parent, d.kind, d.start = ctxOf(s.Parent()), s.SpanKind(), s.StartTime()
		d.scope, d.res = j.scopeID(s.InstrumentationScope()), j.resourceID(s.Resource())
	}
	// The end is written before the start is marked done: a death between
	// the two leaves both, and recovery keeps the end.
	loc, ok := j.writeSpan(&d)
	if e.end != 0 {
		j.markDone(int(e.end)) // ended twice: the last end stands
	}
	if !ok && e.start != 0 {
		j.markDone(int(e.start))
	}
	if ok && e.start != 0 && !d.attrsAtStart {
		j.markDone(int(e.start))
		e.start = 0
	}
	// Nothing since the lookup changed the table or the log: the entry is
	// where it was. The span leaves the table for the log's tail.
	if ep != nil {
		sh.t.del(k)
	} else if logged >= 0 {
		sh.log.at(logged).key = 0
	}
	if ok {
		sh.log.push(logEntry{key: k, start: e.start, end: int32(loc)}, &sh.t)
	}
}

// startFields sets d's parent, kind, start time and trace states from
// p, the prefix of the span's start record, which holds them as the span's
// accessors gave them (a span cannot change them once started): the
// parent as far as a record tells it (valid, remote, flags, span id, and
// the trace id of d's span, the parent's in the SDK). It returns false,
// leaving them to the accessors, when the record is not the start of d's
// span (the entry of a span id that another trace's span repeats holds
// the newer span's) or does not say all: the parent's trace state differs
// from the span's.
func startFields(p []byte, d *spanData) bool {
	if p[pType] != recStart || p[pFlags]&flagParentState != 0 || [16]byte(p[pTraceID:pTraceID+16]) != d.span.tid || [8]byte(p[pSpanID:pSpanID+8]) != d.span.sid {
		return false
	}
	flags := p[pFlags]
	d.parent = spanCtx{
		sid:    trace.SpanID(p[pParentID : pParentID+8]),
		flags:  trace.TraceFlags(p[pParentFlags]),
		valid:  flags&flagParentValid != 0,
		remote: flags&flagParentRemote != 0,
		ts:     d.span.ts,
	}
	if d.parent.valid {
		d.parent.tid = d.span.tid
	}
	d.kind = trace.SpanKind(p[pKind])
	le := binary.LittleEndian
	d.start = time.Unix(int64(le.Uint64(p[pStart:])), int64(le.Uint32(p[pStart+8:])))
	return true
}

func (processor) Shutdown(context.Context) error   { return nil }
func (processor) ForceFlush(context.Context) error { return nil }

// WrapExporter returns an exporter that passes every batch to exp and,
// once exp returns nil, marks the batch's spans confirmed in the journal:
// they are not recovered after a death. Between exp's return and the mark
// (a few hundred nanoseconds a span) lies the at-least-once window: a
// death there sends the batch again at recovery, with the same ids.
func (j *Journal) WrapExporter(exp sdktrace.SpanExporter) sdktrace.SpanExporter {
	return &exporter{exp: exp, j: j}
}

type exporter struct {
	exp sdktrace.SpanExporter
	j   *Journal
	// afterExport, set by tests, runs between a successful export and the
	// confirmation.
	afterExport func([]sdktrace.ReadOnlySpan)
}

func (e *exporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	if err := e.exp.ExportSpans(ctx, ss); err != nil {
		return err
	}
	if e.afterExport != nil {
		e.afterExport(ss)
	}
	e.j.confirm(ss)
	return nil
}

func (e *exporter) Shutdown(ctx context.Context) error { return e.exp.Shutdown(ctx) }

// confirm marks the records of exported spans done, a shard at a time:
// each shard's lock is taken once a batch, not once a span, so that the
// exporter's goroutine seldom meets a span's start or end at a lock.
func (j *Journal) confirm(ss []sdktrace.ReadOnlySpan) {
	if !j.enter() {
		return
	}
	defer j.exit(debug.SetPanicOnFault(true))
	// The batcher exports one batch at a time; the lock only keeps two
	// exporters, or an exporter called from elsewhere, from sharing the
	// scratch slices, which grow to the largest batch.
	j.confirmMu.Lock()
	defer j.confirmMu.Unlock()
	keys := j.confirmKeys[:0]
	var count [nShards + 1]int
	for _, s := range ss {
		sc := s.SpanContext()
		if !sc.IsSampled() {
			continue
		}
		k := liveKey(sc.SpanID())
		keys = append(keys, k)
		count[shardOf(k)+1]++
	}
	// Counting sort by shard.
	for i := 1; i <= nShards; i++ {
		count[i] += count[i-1]
	}
	byShard := slices.Grow(j.confirmByShard[:0], len(keys))[:len(keys)]
	j.confirmKeys, j.confirmByShard = keys, byShard
	next := count
	for _, k := range keys {
		i := shardOf(k)
		byShard[next[i]] = k
		next[i]++
	}
	for i := range nShards {
		if count[i] == count[i+1] {
			continue
		}
		j.confirmShard(&j.shards[i], byShard[count[i]:count[i+1]])
	}
}

func (j *Journal) confirmShard(sh *shard, keys []uint64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if j.closed.Load() {
		return
	}
	var done doneBatch
	for _, k := range keys {
		if i := sh.log.find(k); i >= 0 {
			le := sh.log.take(i, &sh.t)
			if le.start != 0 {
				done.mark(j, int(le.start))
			}
			done.mark(j, int(le.end))
			continue
		}
		e := sh.t.get(k)
		switch {
		case e == nil:
		case e.end != 0:
			if e.start != 0 {
				done.mark(j, int(e.start))
			}
			done.mark(j, int(e.end))
			sh.t.del(k)
		case e.start != 0:
			// Confirmed before its end was journalled: the entry, with
			// no record now, stands for that until the end.
			done.mark(j, int(e.start))
			*e = entry{}
		}
	}
	done.flush(j)
}
