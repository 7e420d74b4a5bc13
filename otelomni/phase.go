// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// ActivePhase is a phase started on the live path. End it when the phase
// ends; the SDK takes its end from the monotonic clock (start plus
// elapsed), so a step of the wall clock cannot make it negative. The zero
// ActivePhase, and the one returned when nothing is recorded, are safe to
// use.
type ActivePhase struct {
	r    *Request
	id   uint32
	span trace.Span
	ctx  context.Context
}

// End ends the phase now; a non-nil err marks it failed (status Error with
// err's message, and error.type), as [Request.End] does the request. Ending
// it twice, or after its request ended (which ended it), does nothing.
// Ending an exec or a forward first ends the phases still open inside it,
// at the same moment, so that no part outlives the phase it is part of.
func (a ActivePhase) End(err error) {
	if a.r != nil {
		a.r.endLive(a.id, err)
	}
}

// SetAttributes records kv on the phase span, such as a kernel's name.
// Strings are bounded like every string otelomni records. An attribute
// whose key otelomni sets itself (the phase, step and output keys, a
// request's or stage's identity, a batch's id and size) is left out and
// counted in Stats.Misuse.
func (a ActivePhase) SetAttributes(kv ...attribute.KeyValue) {
	if a.span != nil {
		a.span.SetAttributes(a.r.in.callerKVs("ActivePhase.SetAttributes", kv)...)
	}
}

// Context returns the context the phase was started with, holding the
// phase's span when one is recorded: for spans of your own inside the
// phase, and for bounding an engine call (context.WithTimeout). It is never
// nil: the zero ActivePhase returns context.Background().
func (a ActivePhase) Context() context.Context {
	if a.ctx == nil {
		return context.Background()
	}
	if a.span == nil {
		return a.ctx
	}
	return trace.ContextWithSpan(a.ctx, a.span)
}

// StartPhase starts phase p now, under its parent in the tree: kv_recv,
// forward and vae_decode under exec (once exec has started; without an exec
// they hang under the request), the other phases directly under the request
// (or stage) span. ctx is the caller's context: the phase's
// [ActivePhase.Context] derives from it. kv adds attributes of the
// caller's own; one whose key otelomni sets itself (the phase, step and
// output keys, a request's or stage's identity, a batch's id and size)
// starts nothing and is counted in Stats.Misuse: give an output with
// [Request.StartOutputPhase], a step with [Request.StartStep], a batch with
// [Instrumenter.StartBatch]. A phase never started makes no span; a phase
// still open when the request ends is ended with it.
//
// Each phase is measured once per request: a second exec is refused
// (counted in Stats.Conflicts), as is a part of exec started after exec
// ended. The outputs of a streaming request use [Request.StartOutputPhase],
// denoise steps [Request.StartStep], transfers [Request.StartReceive], and
// an LLM stage [Request.MarkLLM]; a phase this call does not take starts
// nothing and is counted in Stats.Misuse.
func (r *Request) StartPhase(ctx context.Context, p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	// Written out so that it inlines: a disabled phase costs a nil check.
	if r == nil || r.in == nil {
		return ActivePhase{ctx: ctx}
	}
	return r.startLive(ctx, p, -1, false, -1, kv)
}

// StartOutputPhase starts a per-output phase (output-ready wait or
// postprocess) of output out of a streaming request, with
// omni.output.index and omni.output.final.
func (r *Request) StartOutputPhase(ctx context.Context, p spans.Phase, out spans.Output, kv ...attribute.KeyValue) ActivePhase {
	if r == nil || r.in == nil {
		return ActivePhase{ctx: ctx}
	}
	if !p.PerOutput() {
		r.in.stats.misused(fmt.Sprintf("StartOutputPhase(%v): not a per-output phase", p))
		return ActivePhase{ctx: ctx}
	}
	if badIndex(out.Index) {
		_ = r.in.outOfRange("output index", int64(out.Index), 0, maxIndex, "no span emitted", ErrInvalidPhase)
		return ActivePhase{ctx: ctx}
	}
	return r.startLive(ctx, p, out.Index, out.Final, -1, kv)
}

// StartStep starts the span of denoise step i (from 0 to 2^31-1) under
// forward. It does nothing unless per-step spans are on (WithDenoiseSteps).
// An i out of range starts nothing and is counted in Stats.Misuse.
func (r *Request) StartStep(ctx context.Context, i int) ActivePhase {
	if r == nil || r.in == nil {
		return ActivePhase{ctx: ctx}
	}
	if badIndex(i) {
		_ = r.in.outOfRange("denoise step", int64(i), 0, maxIndex, "no span emitted", nil)
		return ActivePhase{ctx: ctx}
	}
	if !r.in.cfg.denoiseSteps {
		return ActivePhase{ctx: ctx}
	}
	return r.startLive(ctx, spans.DenoiseStep, -1, false, i, nil)
}

func (r *Request) startLive(ctx context.Context, p spans.Phase, output int, final bool, step int, kv []attribute.KeyValue) ActivePhase {
	if ctx == nil {
		ctx = context.Background()
	}
	if !plan.Valid(p) || (p == spans.DenoiseStep) != (step >= 0) || plan.ParentOf(p) == plan.UnderTransfer || plan.IsLLM(p) {
		r.in.stats.misused(fmt.Sprintf("StartPhase(%v): not a phase this call takes (denoise steps: StartStep; transfer parts: StartReceive; LLM phases: MarkLLM)", p))
		return ActivePhase{ctx: ctx}
	}
	if len(kv) > 0 && r.in.reserved("StartPhase("+p.String()+")", kv) != nil {
		return ActivePhase{ctx: ctx}
	}
	parent, parentLive, refused := r.admitLive(p, output, step)
	if refused != nil {
		r.refuse(refused)
		return ActivePhase{ctx: ctx}
	}
	started := false
	defer func() {
		if !started {
			// tracer.Start panicked (a span processor's OnStart): undo the
			// counts, so that no End waits for this start forever.
			r.startedUnder(parentLive)
			r.startDone()
		}
	}()

	o := openPhase{phase: p, output: int32(output), parentLive: parentLive, ctx: parent}
	if r.span != nil {
		o.ctx, o.span = r.tracer.Start(parent, p.SpanName(), r.phaseOptions(p, output, final, step, kv)...)
	}
	// otelomni's own reading of the start, taken after the span started,
	// so no earlier than the span's own: a part recorded inside it that
	// starts no earlier than this lies inside the exported span too. It is
	// also the measurement's start.
	o.start = time.Now()

	r.mu.Lock()
	o.id = r.open.add(o)
	if n := r.parentPhaseOf(p); n != nil {
		*n = parentPhase{set: true, ctx: o.ctx, span: o.span, start: o.start, live: o.id}
	}
	r.mu.Unlock()
	started = true
	r.startedUnder(parentLive)
	r.startDone()
	return ActivePhase{r: r, id: o.id, span: o.span, ctx: ctx}
}

// phaseOptions returns the start options of a phase span: the table's
// prebuilt ones in the common case, no copy.
func (r *Request) phaseOptions(p spans.Phase, output int, final bool, step int, kv []attribute.KeyValue) []trace.SpanStartOption {
	if output < 0 && step < 0 && len(kv) == 0 {
		return r.tbl.phaseOpt[p]
	}
	a := append(make([]attribute.KeyValue, 0, 4+len(kv)), r.tbl.kv(p)...)
	if output >= 0 {
		a = append(a, omniattr.OutputIndex(output), omniattr.OutputFinal(final))
	}
	if step >= 0 {
		a = append(a, omniattr.Step(step))
	}
	if len(kv) > 0 {
		a = append(a, r.in.kvs(kv)...)
	}
	return []trace.SpanStartOption{trace.WithAttributes(a...)}
}

func (r *Request) endLive(id uint32, err error) {
	r.mu.Lock()
	o, ok := r.open.remove(id)
	if !ok {
		r.mu.Unlock()
		return
	}
	// Counted as a start in flight: the request's end waits for this one,
	// and then ends no earlier than the phase.
	r.starting.Add(1)
	defer r.liveEnded(&o)
	var kids []openPhase
	var at time.Time
	stepsRun := r.stepsRun
	if n := r.parentPhaseOf(o.phase); n != nil && n.live == id {
		for r.childrenStarting > 0 {
			// A part is starting under it on another goroutine: end
			// after it is in the set, so that it ends with its parent.
			if r.cond == nil {
				r.cond = sync.NewCond(&r.mu)
			}
			r.cond.Wait()
		}
		kids = r.open.removeUnder(id)
		if !n.lastChild.IsZero() && n.lastChild.After(time.Now()) {
			// A part recorded inside it ends later: it ends there.
			at = n.lastChild
			r.in.stats.clampedEnd(fmt.Sprintf("%s: %v ended before a part recorded inside it; ended at that part's end", r.id, o.phase))
		}
		n.closed, n.live, n.end = true, 0, at
		if at.IsZero() {
			// Its span ends after this, so no earlier than now: a part
			// placed inside it from now on must end by then.
			n.ending = time.Now()
			if n.span == nil {
				n.end = n.ending
			}
		}
	}
	r.mu.Unlock()
	for i := len(kids) - 1; i >= 0; i-- {
		r.finish(&kids[i], at, nil)
	}
	if o.phase == spans.Exec && stepsRun > 0 && o.span != nil {
		end := at
		if end.IsZero() {
			end = time.Now()
		}
		o.span.SetAttributes(omniattr.MeanStepDuration(seconds(end.Sub(o.start)) / float64(stepsRun)))
	}
	r.finish(&o, at, err)
}

// liveEnded ends an end counted in starting: the phase o, and the parts
// ended with it, have ended, and the request (or stage) ends no earlier
// (liveEnd).
func (r *Request) liveEnded(o *openPhase) {
	// Read after the span ended: no earlier than its own end.
	for n := time.Now().UnixNano(); ; {
		last := r.liveEnd.Load()
		if n <= last || r.liveEnd.CompareAndSwap(last, n) {
			break
		}
	}
	r.startDone()
}
