// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// The starts of a live phase: Request.StartPhase and ActivePhase.StartPhase
// hand the phase to the tree's rules (admitLiveLocked, in rules.go), start
// its span and return its ActivePhase (active.go).

// StartPhase starts phase p now, as a child of the request's (or stage's)
// span: queue_wait, preprocess, exec, output_ready_wait, postprocess, and
// the LLM stage's phases. The phase's [ActivePhase.Context] is ctx holding
// the phase's span: ctx gives the values and deadline of your call, its
// parent is the request's span whatever span ctx holds. The parts of exec
// (kv_recv, forward, vae_decode) are started from exec itself
// ([ActivePhase.StartPhase]); only a request with no exec takes them here,
// under its own span.
//
// kv adds attributes of the caller's own. For a per-output phase
// (output_ready_wait and postprocess of a request that yields several
// outputs), attrs.OutputIndexKey (an int from 0 to 2^31-1) and
// attrs.OutputFinalKey (a bool) say which output it is of; an index of
// another type or out of range starts nothing and is counted in
// Stats.Misuse. An attribute whose key otelomni sets itself (omni.phase,
// a request's or stage's identity, a batch's id and size, the output keys
// on a phase that is not per-output) is left out, the phase started
// without it, and counted in Stats.Misuse.
//
// Each phase is measured once per request (per output for a per-output
// phase): a second exec is refused (counted in Stats.Conflicts). A phase
// started after its request ended is refused too (Stats.Misuse). A phase
// never started makes no span; a phase still open when the request ends is
// ended with it, at the same moment. A refused phase's ActivePhase records
// nothing, and the span its Context holds does not record.
func (r *Request) StartPhase(ctx context.Context, p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	// Written out so that it inlines: a disabled phase costs a nil check.
	if r == nil || r.in == nil {
		return ActivePhase{ctx: ctx}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return r.startLive(ctx, 0, p, kv)
}

// StartPhase starts phase p now as a part of a, and returns it: kv_recv,
// forward and vae_decode of an exec, and denoise_step of a forward (or of
// an exec with no forward). A denoise step names its step with
// attrs.StepKey (an int from 0 to 2^31-1); steps make spans only with
// [WithDenoiseSteps]. The part's Context derives from a's. A part of a
// phase that has ended, or that p is not a part of, starts nothing
// (counted in Stats.Conflicts and Stats.Misuse); kv is taken as by
// [Request.StartPhase]. The part ends when it is ended, or with a, at the
// same moment, whichever comes first.
func (a ActivePhase) StartPhase(p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	if a.r == nil {
		return ActivePhase{ctx: a.ctx}
	}
	return a.r.startLive(a.ctx, a.id, p, kv)
}

// liveArgs is what a live phase's attributes say of it: its output and
// step (-1 when none), and the caller's attributes left.
type liveArgs struct {
	output, step int
	final        bool
	kv           []attribute.KeyValue
}

// liveArgsOf reads p's output or step from kv, and drops what otelomni sets
// itself; fn is the call, "StartPhase" or "RecordPhase", for its errors. It
// returns an error, counted, when the output or step is not one p can take.
func (r *Request) liveArgsOf(fn string, p spans.Phase, kv []attribute.KeyValue) (liveArgs, error) {
	a := liveArgs{output: -1, step: -1}
	if len(kv) == 0 {
		// The common case: no name built.
		if p == spans.DenoiseStep {
			return a, r.misuse(callName(fn, p), "a denoise step needs its step (attrs.StepKey)")
		}
		return a, nil
	}
	call := callName(fn, p)
	var idx, fin, step *attribute.Value
	for i := range kv {
		switch kv[i].Key {
		case attrs.OutputIndexKey:
			idx = &kv[i].Value
		case attrs.OutputFinalKey:
			fin = &kv[i].Value
		case attrs.StepKey:
			step = &kv[i].Value
		}
	}
	if p == spans.DenoiseStep {
		if step == nil {
			return a, r.misuse(call, "a denoise step needs its step (attrs.StepKey)")
		}
		n, ok := indexOf(*step)
		if !ok {
			return a, r.in.outOfRange("denoise step", int64Of(*step), 0, maxIndex, "no span emitted", ErrInvalidPhase)
		}
		a.step = n
	}
	if p.PerOutput() && idx != nil {
		n, ok := indexOf(*idx)
		if !ok {
			return a, r.in.outOfRange("output index", int64Of(*idx), 0, maxIndex, "no span emitted", ErrInvalidPhase)
		}
		a.output = n
		if fin != nil && fin.Type() == attribute.BOOL {
			a.final = fin.AsBool()
		}
	}
	a.kv = r.in.callerKVsReading(call, kv, a.output >= 0, a.step >= 0)
	return a, nil
}

// indexOf returns an int attribute value in the range of an index.
func indexOf(v attribute.Value) (int, bool) {
	if v.Type() != attribute.INT64 {
		return 0, false
	}
	n := v.AsInt64()
	return int(n), n >= 0 && n <= maxIndex
}

// int64Of is v as an int for an error message, or -1.
func int64Of(v attribute.Value) int64 {
	if v.Type() == attribute.INT64 {
		return v.AsInt64()
	}
	return -1
}

// callName names call fn on phase p in errors, as "StartPhase(exec)".
func callName(fn string, p spans.Phase) string { return fn + "(" + p.String() + ")" }

// misuse counts a call that does nothing, and returns why as an error
// matching ErrInvalidPhase.
func (r *Request) misuse(call, why string) error {
	err := fmt.Errorf("%w: %s: %s", ErrInvalidPhase, call, why)
	r.in.stats.misused(err.Error())
	return err
}

// startLive starts live phase p now under the live phase parentID (0: under
// the request), when the tree's rules admit it, and returns its
// ActivePhase. A phase refused is counted and starts nothing.
func (r *Request) startLive(ctx context.Context, parentID uint32, p spans.Phase, kv []attribute.KeyValue) ActivePhase {
	if !plan.Valid(p) || plan.ParentOf(p) == plan.UnderTransfer {
		_ = r.misuse(callName("StartPhase", p), "not a phase a live call takes (a transfer's parts: RecordTransfer)")
		return refused(ctx)
	}
	args, err := r.liveArgsOf("StartPhase", p, kv)
	if err != nil {
		return refused(ctx)
	}
	if p == spans.DenoiseStep && !r.in.cfg.denoiseSteps {
		return ActivePhase{ctx: ctx}
	}
	r.mu.Lock()
	start, pctx, err := r.admitLiveLocked(parentID, p, args.output, args.step)
	if err != nil {
		r.mu.Unlock()
		r.refuse(err)
		return refused(ctx)
	}
	o := openPhase{phase: p, output: int32(args.output), parentLive: parentID, start: start, ctx: ctx, spanCtx: pctx, starting: r.span != nil}
	id := r.open.add(o)
	if asParent := r.parentPhaseOf(p); asParent != nil {
		*asParent = parentPhase{set: true, live: id, start: start, ctx: pctx}
		if r.span != nil {
			asParent.ctx = nil // until its span has started
		}
	}
	r.mu.Unlock()
	if r.span == nil {
		return ActivePhase{r: r, id: id, ctx: ctx}
	}
	started := false
	defer func() {
		if !started {
			// tracer.Start panicked (a span processor's OnStart): the
			// phase is no longer open.
			r.mu.Lock()
			r.open.remove(id)
			r.mu.Unlock()
		}
	}()
	sctx, span := r.tracer.Start(pctx, p.SpanName(), r.phaseOptions(p, &args, start)...)
	started = true
	return r.started(id, ctx, sctx, span)
}

// refused is the ActivePhase of a phase refused: its Context is ctx with a
// span that does not record (of the same trace), so that nothing recorded
// under it is taken for the phase's.
func refused(ctx context.Context) ActivePhase {
	sc := trace.SpanContextFromContext(ctx)
	if trace.SpanFromContext(ctx).IsRecording() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	return ActivePhase{ctx: ctx}
}

// started makes the phase id, whose span has just started, open: or ends
// it at once, where its parent or request ended meanwhile. The parts
// recorded inside it meanwhile are emitted now, under it.
func (r *Request) started(id uint32, ctx, sctx context.Context, span trace.Span) ActivePhase {
	r.mu.Lock()
	o := r.open.find(id)
	var deferred []deferredPart
	if pp := r.parentPhaseOf(o.phase); pp != nil && pp.set && pp.ctx == nil {
		// An exec or forward: the parts recorded while its span started
		// hang under it now.
		pp.ctx = sctx
		deferred, pp.pending = pp.pending, nil
	}
	if !o.endAt.IsZero() {
		done, _ := r.open.remove(id)
		r.mu.Unlock()
		done.span, done.spanCtx = span, sctx
		r.emitDeferred(sctx, deferred)
		r.finish(&done, done.endAt, nil)
		return ActivePhase{ctx: ctx, span: span}
	}
	o.span, o.spanCtx, o.starting = span, sctx, false
	r.mu.Unlock()
	r.emitDeferred(sctx, deferred)
	return ActivePhase{r: r, id: id, span: span, ctx: ctx}
}
