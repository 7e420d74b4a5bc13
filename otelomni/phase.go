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

// The start of a live phase: Request.StartPhase hands the phase to the
// tree's rules (admitLiveLocked, in rules.go), starts its span and returns
// its ActivePhase (active.go).

// StartPhase starts phase p of the request (or stage) now, and returns it.
// Where its span hangs is the tree's, never ctx's: queue_wait, preprocess,
// exec, output_ready_wait, postprocess and the LLM stage's phases hang
// under the request's span; a part of exec (kv_recv, forward, vae_decode)
// under the open exec; a denoise step under the open forward, else the
// open exec. A part whose exec (forward) was never measured hangs under
// the request, or the exec. ctx gives the values and deadline of your
// call: the phase's [ActivePhase.Context] is ctx holding the phase's span.
//
// kv adds attributes of the caller's own. For a per-output phase
// (output_ready_wait and postprocess of a request that yields several
// outputs), attrs.OutputIndexKey (an int from 0 to 2^31-1) and
// attrs.OutputFinalKey (a bool) say which output it is of. A denoise step
// names its step with attrs.StepKey (an int from 0 to 2^31-1); steps make
// spans only with [WithDenoiseSteps]. An index or step of another type or
// out of range starts nothing and is counted in Stats.Misuse. These keys
// are read when the phase starts: set later, they are left out. An
// attribute whose key otelomni sets itself (omni.phase, omni.output.modality,
// a request's or stage's identity, a batch's id and size, the output keys
// on a phase that is not per-output) is left out, the phase started without
// it, and counted in Stats.Misuse.
//
// Each phase is measured once per request (per output for a per-output
// phase, per step for a denoise step): a second exec is refused (counted in
// Stats.Conflicts). So is a part whose exec (forward) has ended, and one
// started while its exec's span is still being started on another
// goroutine. A phase started after its request ended is refused (counted
// in Stats.Misuse). A phase never started makes no span; a phase still open
// when its exec (forward) or request ends is ended with it, at the same
// moment. A refused phase's ActivePhase records nothing, and the span its
// Context holds does not record.
func (r *Request) StartPhase(ctx context.Context, p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	// Written out so that it inlines: a disabled phase costs a nil check.
	if r == nil || r.in == nil {
		return ActivePhase{ctx: ctx}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return r.startLive(ctx, p, kv)
}

// liveArgs is what a phase's attributes say of it: its output and step
// (-1 when none), the caller's attributes left, and the keys otelomni sets
// itself that were left out.
type liveArgs struct {
	output, step int
	final        bool
	// badFinal: the output's finality was given, not as a bool.
	badFinal bool
	kv       []attribute.KeyValue
	dropped  []attribute.Key
}

// phaseArgs reads p's output or step from kv, and leaves out what otelomni
// sets itself. It counts nothing: a phase refused for another reason is
// counted for that reason alone. It returns an error matching
// ErrInvalidPhase when the output or step is not one p can take.
func phaseArgs(fn string, p spans.Phase, kv []attribute.KeyValue) (liveArgs, error) {
	a := liveArgs{output: -1, step: -1}
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
	bad := func(why string) (liveArgs, error) {
		return a, fmt.Errorf("%w: %s: %s; no span emitted", ErrInvalidPhase, callName(fn, p), why)
	}
	if p == spans.DenoiseStep {
		if step == nil {
			return bad("a denoise step needs its step (attrs.StepKey)")
		}
		n, why := indexOf(attrs.StepKey, *step)
		if why != "" {
			return bad(why)
		}
		a.step = n
	}
	if plan.PerOutput(p) && idx != nil {
		n, why := indexOf(attrs.OutputIndexKey, *idx)
		if why != "" {
			return bad(why)
		}
		a.output = n
		switch {
		case fin == nil:
		case fin.Type() == attribute.BOOL:
			a.final = fin.AsBool()
		default:
			// Not a bool: the output is not said to be final, and the
			// attribute is counted as left out.
			a.badFinal = true
		}
	}
	a.kv, a.dropped = withoutReserved(kv, a.output >= 0, a.step >= 0)
	if a.badFinal {
		a.dropped = append(a.dropped, attrs.OutputFinalKey)
	}
	return a, nil
}

// indexOf returns an int attribute value in the range of an index, or why
// it is not one.
func indexOf(key attribute.Key, v attribute.Value) (int, string) {
	if v.Type() != attribute.INT64 {
		return 0, fmt.Sprintf("%s of type %s: want an int from 0 to %d", key, v.Type(), maxIndex)
	}
	n := v.AsInt64()
	if n < 0 || n > maxIndex {
		return 0, fmt.Sprintf("%s %d is out of its range 0 to %d", key, n, maxIndex)
	}
	return int(n), ""
}

// misuse counts a call that does nothing, and returns why as an error
// matching ErrInvalidPhase.
func (r *Request) misuse(call, why string) error {
	err := fmt.Errorf("%w: %s: %s", ErrInvalidPhase, call, why)
	r.in.stats.misused(err.Error())
	return err
}

// admitted counts the keys a phase started or recorded without, once it
// is admitted.
func (r *Request) admitted(fn string, p spans.Phase, dropped []attribute.Key) {
	for _, k := range dropped {
		r.in.stats.misused((&reservedError{call: callName(fn, p), key: k}).Error())
	}
}

// callName names call fn on phase p in errors, as "StartPhase(exec)": built
// only when there is an error to write.
func callName(fn string, p spans.Phase) string { return fn + "(" + p.String() + ")" }

// startLive starts live phase p now, under the parent the tree's rules give
// it, when they admit it, and returns its ActivePhase. A phase refused is
// counted and starts nothing.
func (r *Request) startLive(ctx context.Context, p spans.Phase, kv []attribute.KeyValue) ActivePhase {
	if !plan.Valid(p) || plan.ParentOf(p) == plan.UnderTransfer {
		_ = r.misuse(callName("StartPhase", p), "not a phase a live call takes (a transfer's parts: RecordTransfer)")
		return refused(ctx)
	}
	args, err := phaseArgs("StartPhase", p, kv)
	if err != nil {
		r.in.stats.misused(err.Error())
		return refused(ctx)
	}
	if p == spans.DenoiseStep && !r.in.cfg.denoiseSteps {
		return ActivePhase{ctx: ctx}
	}
	r.mu.Lock()
	start, parentID, pctx, err := r.admitLiveLocked(p, args.output, args.step)
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
	r.admitted("StartPhase", p, args.dropped)
	if len(args.kv) > 0 {
		args.kv = r.in.kvs(args.kv)
	}
	if r.span == nil {
		return ActivePhase{r: r, id: id, ctx: ctx}
	}
	started := false
	defer func() {
		if !started {
			r.startPanicked(id, p)
		}
	}()
	sctx, span := r.tracer.Start(pctx, p.SpanName(), r.phaseOptions(p, &args, start)...)
	started = true
	return r.started(id, ctx, sctx, span)
}

// startPanicked undoes the start of phase id, whose tracer.Start panicked
// (a span processor's OnStart): it is no longer open, and, as a phase
// never measured, leaves the parts recorded under it while it started
// (and later ones) to hang under the request.
func (r *Request) startPanicked(id uint32, p spans.Phase) {
	r.mu.Lock()
	r.open.remove(id)
	var orphans []deferredPart
	if pp := r.parentPhaseOf(p); pp != nil && pp.live == id {
		// No span: as if it was never measured, the parts recorded while it
		// started, and those recorded from now on, hang under the request.
		orphans = pp.pending
		*pp = parentPhase{}
	}
	r.mu.Unlock()
	r.emitDeferred(r.ctx, orphans)
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
		stepsRun := r.stepsRun
		r.mu.Unlock()
		done.span, done.spanCtx = span, sctx
		r.emitDeferred(sctx, deferred)
		r.finishWithSteps(&done, done.endAt, nil, stepsRun)
		// Ended already: its End does nothing, and a part started now is
		// refused and counted, as under any phase that has ended.
		return ActivePhase{r: r, id: id, span: span, ctx: ctx}
	}
	o.span, o.spanCtx, o.starting = span, sctx, false
	r.mu.Unlock()
	r.emitDeferred(sctx, deferred)
	return ActivePhase{r: r, id: id, span: span, ctx: ctx}
}
