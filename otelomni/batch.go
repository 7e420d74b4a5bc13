// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/spans"
)

// BatchInfo describes one forward pass of an engine that runs several
// requests together.
type BatchInfo struct {
	// ID names the batch (omni.batch.id), such as the scheduler's step.
	ID string
	// Model is the model the batch ran (gen_ai.request.model).
	Model string
	// Start is when the batch started, for a batch rebuilt after the fact;
	// the zero time means now.
	Start time.Time
}

// Batch is the span of one forward pass that ran several requests
// together (omni.batch). It is the root of a trace of its own, so that no
// request's trace owns it, with a span link to each member's exec span;
// each member's exec carries omni.batch.id and omni.batch.size and a link
// back. Every link is made both ways or not at all, whatever calls race:
// a member ending, its exec ending, the batch ending. Its methods are safe
// for concurrent use, and do nothing on a nil *Batch.
type Batch struct {
	in    *Instrumenter
	span  trace.Span
	start time.Time
	clk   clock
	ref   batchRef
	mu    sync.Mutex
	// done says End was called; endAt and endErr are the end it gave.
	done   bool
	endAt  time.Time
	endErr error
	// recording counts the members being recorded (Record) outside mu. The
	// batch's span ends once none is: the last of them ends it, at endAt,
	// after linking its exec, so that the batch links every exec that
	// links it and End never waits.
	recording int
	spanEnded bool
	// pending are the members not linked yet: at the end, their request
	// spans are.
	pending map[*Request]bool
	// links counts the links the batch made or has reserved (a Record in
	// progress): at most maxBatchLinks.
	links int
}

// maxBatchLinks bounds the members a batch links: an SDK keeps a bounded
// number of links on a span and evicts the oldest beyond, which would leave
// those members linking a batch that no longer links them. otelsetup keeps
// this many by default; beyond it a member is linked neither way, and
// counted in Stats.Conflicts.
const maxBatchLinks = 1024

// batchRef is what a member's exec carries of its batch.
type batchRef struct {
	id   string
	size int
	sc   trace.SpanContext
	// members collects the span contexts of execs recorded in the batch,
	// to link the batch to them.
	members []trace.SpanContext
}

// StartBatch starts the span of one batch of members (omni.batch.size is
// len(members)). A member whose exec is open (the live path) is linked both
// ways at once: its exec gets the batch's id and size and a link to the
// batch, and the batch a link to its exec. A member whose exec is recorded
// after the fact goes through [Batch.Record]. A member with neither by the
// batch's end is linked both ways by its request (or stage) span, unless
// it has ended by then. A member that has ended, or whose open exec is in
// another batch already (counted in Stats.Conflicts: an exec runs in one
// batch), is not linked. A batch links at most 1024 members (an SDK keeps a
// bounded number of links on a span: set its limit to at least that many);
// a member beyond is linked neither way, and counted in Stats.Conflicts. It
// returns nil, on which every method does nothing, when nothing is
// recorded.
func (in *Instrumenter) StartBatch(ctx context.Context, info BatchInfo, members ...*Request) *Batch {
	if ctx == nil {
		ctx = context.Background()
	}
	if in == nil {
		return nil
	}
	in.ready()
	if in.tracer == nil {
		return nil
	}
	id := in.str(info.ID)
	clk := newClock()
	start := info.Start
	if !start.IsZero() {
		start = clk.place(in.startTime(start, "batch "+id))
	}
	if start.IsZero() {
		start = clk.base
	}
	kv := []attribute.KeyValue{omniattr.BatchID(id), omniattr.BatchSize(len(members))}
	if info.Model != "" {
		kv = append(kv, omniattr.RequestModel(in.str(info.Model)))
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...),
		trace.WithTimestamp(start)}
	_, span := in.tracer.Start(ctx, plan.BatchSpanName, opts...)
	if !span.IsRecording() {
		return nil
	}
	b := &Batch{in: in, span: span, start: start, clk: clk, ref: batchRef{id: id, size: len(members), sc: span.SpanContext()},
		pending: map[*Request]bool{}}
	for i, m := range members {
		// No one else holds b yet: its links cannot race its end.
		if b.links+len(b.pending) >= maxBatchLinks {
			for range members[i:] {
				b.tooMany() // each member the batch cannot link is counted
			}
			break
		}
		switch sc, how := m.joinBatch(&b.ref); how {
		case joinedExec:
			b.links++
			span.AddLink(trace.Link{SpanContext: sc})
		case joinLater:
			b.pending[m] = true
		}
	}
	return b
}

// tooMany counts a member the batch cannot link.
func (b *Batch) tooMany() {
	b.in.stats.conflict(&scopeError{id: "batch " + b.ref.id, what: fmt.Sprintf("more than %d members: the others are linked neither way", maxBatchLinks)})
}

// Record records member req's timing record with its exec in the batch:
// the exec carries the batch's id, size and a link to it, and the batch a
// link to the exec. It is [Request.Record] otherwise. After the batch has
// ended it records nothing and returns an error that matches
// [ErrRequestEnded] (counted in Stats.Misuse): the batch could no longer
// link the exec back. Record the member with [Request.Record] then.
func (b *Batch) Record(req *Request, rec *spans.DiffusionRecord) error {
	if b == nil || b.span == nil {
		return req.Record(rec)
	}
	if !req.recording() || rec == nil {
		return nil
	}
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		b.in.stats.misused("a member was recorded in a batch that had already ended; nothing recorded")
		return errBatchEnded
	}
	// A member of the batch's start holds its place among the links; any
	// other takes one now, or is recorded unlinked when none is left.
	_, pending := b.pending[req]
	if !pending {
		if b.links+len(b.pending) >= maxBatchLinks {
			b.mu.Unlock()
			b.tooMany()
			if err := req.Record(rec); err != nil {
				return err
			}
			return fmt.Errorf("otelomni: batch %s: more than %d members; request %s recorded unlinked", b.ref.id, maxBatchLinks, req.id)
		}
		b.links++
	}
	b.recording++
	b.mu.Unlock()
	ref := batchRef{id: b.ref.id, size: b.ref.size, sc: b.ref.sc}
	defer func() {
		// Also when a span processor panicked: the batch's span must end.
		b.mu.Lock()
		switch {
		case len(ref.members) > 0 && pending:
			b.links++
			delete(b.pending, req)
		case len(ref.members) == 0 && !pending:
			b.links-- // its place is free again
		}
		// The batch's span has not ended: it waits for this record.
		for _, sc := range ref.members {
			b.span.AddLink(trace.Link{SpanContext: sc})
		}
		b.recording--
		last := b.done && b.recording == 0 && !b.spanEnded
		if last {
			b.spanEnded = true
		}
		at, err := b.endAt, b.endErr
		b.mu.Unlock()
		if last {
			b.endSpan(at, err)
		}
	}()
	return req.recordDiffusion(rec, &ref)
}

// SpanContext returns the batch span's context; an invalid one on a nil
// *Batch.
func (b *Batch) SpanContext() trace.SpanContext {
	if b == nil || b.span == nil {
		return trace.SpanContext{}
	}
	return b.span.SpanContext()
}

// End ends the batch span now. A non-nil err marks it failed.
func (b *Batch) End(err error) { _ = b.end(time.Time{}, err) }

// EndAt ends the batch span at t, for a batch rebuilt after the fact. A
// zero t, or one a span cannot carry, ends it now and returns an error; a t
// before the batch's start ends it at its start and returns an error.
func (b *Batch) EndAt(t time.Time, err error) error {
	if b == nil || b.span == nil {
		return nil
	}
	if t.IsZero() || !plan.InRange(t) {
		if e := b.end(time.Time{}, err); e != nil {
			return e // ended already: that is the one refusal
		}
		bad := &scopeError{id: "batch " + b.ref.id, what: fmt.Sprintf("EndAt(%v): a zero time or one a span cannot carry; ended now", t)}
		b.in.stats.reject(bad)
		return bad
	}
	return b.end(b.clk.place(t), err)
}

func (b *Batch) end(t time.Time, err error) error {
	if b == nil || b.span == nil {
		return nil
	}
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		b.in.stats.misused("a batch was ended twice")
		return errBatchEnded
	}
	b.done = true
	now := b.clk.now()
	var bad error
	switch {
	case t.IsZero() && b.start.After(now):
		t = b.start // a start given later than now: it ends no earlier
	case t.IsZero():
		t = now
	case t.Before(b.start):
		bad = &scopeError{id: "batch " + b.ref.id, what: fmt.Sprintf("EndAt(%v) is before its start (%v); ended there", t, b.start)}
		t = b.start
	}
	// The members not linked yet are linked both ways by their request
	// spans, before the batch's span ends, or not at all when they have
	// ended.
	for m := range b.pending {
		if sc, ok := m.linkBatch(b.ref.sc); ok {
			b.span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	b.pending = nil
	b.endAt, b.endErr = t, err
	last := b.recording == 0
	if last {
		b.spanEnded = true
	}
	b.mu.Unlock()
	if bad != nil {
		b.in.stats.clampedEnd(bad.Error())
	}
	if last {
		b.endSpan(t, err)
	}
	return bad
}

// endSpan ends the batch's span at t, failed when err is not nil.
func (b *Batch) endSpan(t time.Time, err error) {
	if err != nil {
		markError(b.in, b.span, err)
	}
	endSpanAt(b.span, t)
}

// How a member joins a batch at its start.
type joined uint8

const (
	// joinNever: the member records nothing, has ended, or its open exec
	// is in another batch.
	joinNever joined = iota
	// joinedExec: its open exec joined the batch.
	joinedExec
	// joinLater: its exec is to be recorded (Batch.Record), or else its
	// request span is linked at the batch's end.
	joinLater
)

// joinBatch puts r's open exec in batch b: its id, size and a link to it,
// set under r's lock, so that the exec cannot end in between. It returns
// the exec's span context to link the batch to.
func (r *Request) joinBatch(b *batchRef) (trace.SpanContext, joined) {
	if !r.recording() || r.span == nil {
		return trace.SpanContext{}, joinNever
	}
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return trace.SpanContext{}, joinNever
	}
	var exec *openPhase
	if r.exec.live != 0 {
		exec = r.open.find(r.exec.live)
	}
	if exec == nil || exec.starting || exec.span == nil {
		// No live exec, or one whose span is still starting: its exec is
		// to be recorded, or its request span is linked at the batch's end.
		r.mu.Unlock()
		return trace.SpanContext{}, joinLater
	}
	if in := r.exec.batch; in != nil {
		r.mu.Unlock()
		r.in.stats.conflict(&scopeError{id: r.id, what: fmt.Sprintf("exec already runs in batch %s; not linked to batch %s", in.id, b.id)})
		return trace.SpanContext{}, joinNever
	}
	r.exec.batch = b
	// A span's attributes and links, not its processors: cheap, and safe
	// under the lock.
	exec.span.SetAttributes(omniattr.BatchID(b.id), omniattr.BatchSize(b.size))
	exec.span.AddLink(trace.Link{SpanContext: b.sc})
	sc := exec.span.SpanContext()
	r.mu.Unlock()
	return sc, joinedExec
}

// linkBatch links r's request (or stage) span to the batch at sc, under r's
// lock, and returns the span's context for the batch to link back; false
// when r has ended: then neither link is made.
func (r *Request) linkBatch(sc trace.SpanContext) (trace.SpanContext, bool) {
	r.mu.Lock()
	if r.ended || r.starting {
		r.mu.Unlock()
		return trace.SpanContext{}, false
	}
	if r.batchLinks >= maxBatchLinks {
		// An SDK keeps a bounded number of links on a span and evicts the
		// oldest beyond: a batch more would link a request that no longer
		// links it back.
		r.mu.Unlock()
		r.in.stats.conflict(&scopeError{id: r.id, what: fmt.Sprintf("in more than %d batches: the others are linked neither way", maxBatchLinks)})
		return trace.SpanContext{}, false
	}
	r.batchLinks++
	r.span.AddLink(trace.Link{SpanContext: sc})
	defer r.mu.Unlock()
	return r.span.SpanContext(), true
}
