package otelomni

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
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
// back. Its methods are safe for concurrent use, and do nothing on a nil
// *Batch.
type Batch struct {
	in    *Instrumenter
	span  trace.Span
	start time.Time
	ref   batchRef
	mu    sync.Mutex
	done  bool
	// pending are the members not linked yet: at the end, their request
	// spans are.
	pending map[*Request]bool
}

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
// batch's end is linked by its request (or stage) span. It returns nil, on
// which every method does nothing, when nothing is recorded.
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
	start := info.Start
	if !start.IsZero() {
		start = in.startTime(start, "batch "+id)
	}
	kv := []attribute.KeyValue{attrs.BatchID(id), attrs.BatchSize(len(members))}
	if info.Model != "" {
		kv = append(kv, attrs.RequestModel(in.str(info.Model)))
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...)}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	_, span := in.tracer.Start(ctx, spans.BatchSpanName, opts...)
	if !span.IsRecording() {
		return nil
	}
	b := &Batch{in: in, span: span, start: spanStart(span, start), ref: batchRef{id: id, size: len(members), sc: span.SpanContext()},
		pending: map[*Request]bool{}}
	for _, m := range members {
		if sc, ok := m.joinBatch(&b.ref); ok {
			span.AddLink(trace.Link{SpanContext: sc})
		} else if m.recording() && m.span != nil {
			b.pending[m] = true
		}
	}
	return b
}

// Record records member req's timing record with its exec in the batch:
// the exec carries the batch's id, size and a link to it, and the batch a
// link to the exec. It is [Request.Record] otherwise.
func (b *Batch) Record(req *Request, rec *spans.DiffusionRecord) error {
	if b == nil {
		return req.Record(rec)
	}
	if !req.recording() || rec == nil {
		return nil
	}
	ref := batchRef{id: b.ref.id, size: b.ref.size, sc: b.ref.sc}
	err := req.recordDiffusion(rec, &ref)
	b.mu.Lock()
	done := b.done
	if len(ref.members) > 0 {
		delete(b.pending, req)
	}
	b.mu.Unlock()
	if !done {
		for _, sc := range ref.members {
			b.span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	return err
}

// SpanContext returns the batch span's context; an invalid one on a nil
// *Batch.
func (b *Batch) SpanContext() trace.SpanContext {
	if b == nil {
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
	if b == nil {
		return nil
	}
	if t.IsZero() || !spans.InRange(t) {
		bad := &scopeError{id: "batch " + b.ref.id, what: fmt.Sprintf("EndAt(%v): a zero time or one a span cannot carry; ended now", t)}
		b.in.stats.reject(bad)
		_ = b.end(time.Time{}, err)
		return bad
	}
	return b.end(t, err)
}

func (b *Batch) end(t time.Time, err error) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		b.in.stats.misused("a batch was ended twice")
		return ErrRequestEnded
	}
	b.done = true
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	for m := range pending {
		b.span.AddLink(trace.Link{SpanContext: m.span.SpanContext()})
	}
	if err != nil {
		markError(b.in, b.span, err)
	}
	var bad error
	if t.IsZero() && !b.start.IsZero() && b.start.After(time.Now()) {
		t = b.start
	}
	if !t.IsZero() && t.Before(b.start) {
		bad = &scopeError{id: "batch " + b.ref.id, what: fmt.Sprintf("EndAt(%v) is before its start (%v); ended there", t, b.start)}
		b.in.stats.clampedEnd(bad.Error())
		t = b.start
	}
	endSpan(b.span, t)
	return bad
}

// joinBatch puts r's open exec in batch: its id, size and a link to it. It
// returns the exec's span context to link the batch to, and false when r
// has no open exec.
func (r *Request) joinBatch(b *batchRef) (trace.SpanContext, bool) {
	if !r.recording() || r.span == nil {
		return trace.SpanContext{}, false
	}
	r.mu.Lock()
	var exec trace.Span
	if r.exec.set && !r.exec.closed {
		exec = r.exec.span
	}
	r.mu.Unlock()
	if exec == nil {
		return trace.SpanContext{}, false
	}
	exec.SetAttributes(attrs.BatchID(b.id), attrs.BatchSize(b.size))
	exec.AddLink(trace.Link{SpanContext: b.sc})
	return exec.SpanContext(), true
}
