// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"errors"
	"math"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// Record turns a diffusion timing record, as an engine that timed itself
// reports it, into phase spans with the record's own start and end times:
// the same spans as the live path, a failed phase marked failed
// (DiffusionRecord.Err). A phase the record did not measure makes no span.
// A bad measurement makes no span and is reported in the returned error,
// which names each bad phase ([*spans.PhaseError]); the other phases are
// still recorded. Bad are: an end before its start, a zero time or one a
// span cannot carry (Stats.RejectedIntervals); a phase this request already
// measured, a phase that starts before the request, a part of exec outside
// exec (Stats.Conflicts).
func (r *Request) Record(rec *spans.DiffusionRecord) error {
	if !r.recording() || rec == nil {
		return nil
	}
	return r.recordDiffusion(rec, nil)
}

// recordDiffusion records rec, its exec in batch when batch is not nil.
func (r *Request) recordDiffusion(rec *spans.DiffusionRecord, batch *batchRef) error {
	var buf [16]plan.Span
	ps, err := plan.Diffusion(buf[:0], rec, plan.Options{DenoiseSteps: r.in.cfg.denoiseSteps})
	r.countBad(err)
	steps := rec.StepsRun
	if steps < 0 {
		err = errors.Join(err, r.in.outOfRange("steps run", int64(steps), 0, math.MaxInt, "not recorded", nil))
		steps = 0
	}
	if steps > 0 {
		r.SetStepsRun(steps)
	}
	return errors.Join(err, r.recordPlanned(ps, recordOpts{reconstructed: rec.Reconstructed, batch: batch, stepsRun: steps}))
}

// RecordPhase records phase p with its measured interval iv, for an
// engine that timed the phase itself: the same span as on the live path,
// with iv's own times. A zero iv (not measured) records nothing. failed,
// when not nil, marks the phase failed, as [ActivePhase.End] does. kv is
// taken as by [Request.StartPhase]: attrs.OutputIndexKey and
// attrs.OutputFinalKey name the output of a per-output phase, and
// attrs.StepKey the step of a denoise step (recorded only with
// [WithDenoiseSteps]).
//
// The phase hangs under its parent in the tree, as recorded or live so
// far: a part of exec under the request's exec when one was measured (and
// iv must lie inside it; one still open ends no earlier than iv), else
// under the request. It returns a [*spans.PhaseError] naming the phase for
// a bad interval, a phase measured twice, or one outside its parent; an
// error matching [ErrInvalidPhase] for a phase this call does not take
// (a transfer's parts: [Request.RecordTransfer]); [ErrRequestEnded] after
// the request ended. Nothing is recorded then, and the refusal is counted.
func (r *Request) RecordPhase(p spans.Phase, iv spans.Interval, failed error, kv ...attribute.KeyValue) error {
	if !r.recording() || !iv.Measured() {
		return nil
	}
	if !plan.Valid(p) || plan.ParentOf(p) == plan.UnderTransfer {
		return r.misuse(callName("RecordPhase", p), "not a phase this call takes (a transfer's parts: RecordTransfer)")
	}
	args, err := phaseArgs("RecordPhase", p, kv)
	if err != nil {
		r.in.stats.misused(err.Error())
		return err
	}
	if p == spans.DenoiseStep && !r.in.cfg.denoiseSteps {
		return nil
	}
	if err := r.rejectInterval(p, args.output, args.step, iv); err != nil {
		return err
	}
	ps := [1]plan.Span{{Phase: p, Start: iv.Start(), End: iv.End(), Output: args.output, Final: args.final, Step: args.step, Err: failed}}
	return r.recordPlanned(ps[:], recordOpts{kv: args.kv, args: &args})
}

// accepted is one planned span that passed the tree's checks, with where
// it hangs.
type accepted struct {
	ps *plan.Span
	place
	// waitIndex is its index among its parent's pending parts, when it
	// waits.
	waitIndex int
}

// batchNests are the indices, in a batch of accepted spans, of its exec and
// forward, or -1.
type batchNests struct{ exec, forward int }

func (b *batchNests) of(p spans.Phase) *int {
	if p == spans.Exec {
		return &b.exec
	}
	return &b.forward
}

// recordOpts are what a batch of recorded spans carries beside the plan.
type recordOpts struct {
	// args, for RecordPhase: the keys left out are counted once the phase
	// is admitted.
	args *liveArgs
	// kv are attributes of the caller's, on every span.
	kv            []attribute.KeyValue
	reconstructed bool
	// batch, when not nil, is the batch the exec ran in.
	batch *batchRef
	// stepsRun, when above 0, gives exec its mean step duration.
	stepsRun int
}

// recordPlanned checks planned spans against the request's tree, then
// starts and ends their spans outside the lock, and records their
// measurements.
func (r *Request) recordPlanned(planned []plan.Span, o recordOpts) error {
	if len(planned) == 0 {
		return nil
	}
	for i := range planned {
		// A time of this process's clock compares and exports on the
		// request's clock (see clock.place).
		planned[i].Start, planned[i].End = r.clk.place(planned[i].Start), r.clk.place(planned[i].End)
	}
	var buf [16]accepted
	fitted := buf[:0]
	var bad []error
	batch := batchNests{-1, -1}
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		r.in.stats.misused("a measurement was recorded on a request that had already ended")
		return ErrRequestEnded
	}
	if o.stepsRun <= 0 {
		// An exec recorded after SetStepsRun: the span and the histogram
		// divide by the same steps.
		o.stepsRun = r.stepsRun
	}
	for i := range planned {
		ps := &planned[i]
		at, err := r.fitLocked(ps.Phase, ps.Output, ps.Step, ps.Interval(), batch, fitted)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if ps.Phase == spans.Exec || ps.Phase == spans.Forward {
			*batch.of(ps.Phase) = len(fitted)
		}
		r.lastEnd = later(r.lastEnd, ps.End)
		fitted = append(fitted, accepted{ps: ps, place: at})
	}
	// A phase under a live parent whose span is still starting waits for
	// it, with the phases recorded under it in this batch: the goroutine
	// starting the parent emits them under its span.
	var waiting []bool
	for i := range fitted {
		a := &fitted[i]
		w := a.wait
		if a.in >= 0 && waiting != nil && waiting[a.in] {
			w = fitted[a.in].wait
			a.wait = w
		}
		if w == nil {
			continue
		}
		if waiting == nil {
			waiting = make([]bool, len(fitted))
		}
		waiting[i] = true
		in := -1
		if a.in >= 0 {
			in = fitted[a.in].waitIndex
		}
		a.waitIndex = len(w.pending)
		do := o
		do.kv = slices.Clone(o.kv) // held past the call: the caller may reuse its slice
		w.pending = append(w.pending, deferredPart{ps: *a.ps, in: in, o: do})
	}
	r.mu.Unlock()
	for _, e := range bad {
		r.in.stats.conflict(e)
	}
	if o.args != nil && len(fitted) > 0 {
		r.admitted("RecordPhase", fitted[0].ps.Phase, o.args.dropped)
	}

	var ctxBuf [16]context.Context
	ctxs := ctxBuf[:0]
	for i := range fitted {
		a := &fitted[i]
		if a.wait != nil {
			ctxs = append(ctxs, nil)
			continue
		}
		parent := a.ctx
		if a.in >= 0 {
			parent = ctxs[a.in]
		}
		c := r.emit(parent, a.ps, o)
		ctxs = append(ctxs, c)
		r.observe(c, a.ps.Phase, a.ps.Start, a.ps.End, a.ps.Output, o.stepsRun, a.ps.Err != nil)
	}
	if batch.exec >= 0 || batch.forward >= 0 {
		r.mu.Lock()
		for _, p := range [...]spans.Phase{spans.Exec, spans.Forward} {
			if i := *batch.of(p); i >= 0 && fitted[i].wait == nil {
				if asParent := r.parentPhaseOf(p); !asParent.set {
					*asParent = parentPhase{set: true, closed: true, ctx: ctxs[i], start: fitted[i].ps.Start, end: fitted[i].ps.End}
				}
			}
		}
		r.mu.Unlock()
	}
	return errors.Join(bad...)
}

// deferredPart is a recorded phase waiting for the span of the live exec
// or forward it hangs under to start: under that span (in < 0), or under
// the phase at index in of the same wait.
type deferredPart struct {
	ps plan.Span
	in int
	o  recordOpts
}

// emitDeferred emits the parts that waited for the span in ctx.
func (r *Request) emitDeferred(ctx context.Context, parts []deferredPart) {
	if len(parts) == 0 {
		return
	}
	ctxs := make([]context.Context, 0, len(parts))
	for i := range parts {
		d := &parts[i]
		parent := ctx
		if d.in >= 0 {
			parent = ctxs[d.in]
		}
		c := r.emit(parent, &d.ps, d.o)
		ctxs = append(ctxs, c)
		r.observe(c, d.ps.Phase, d.ps.Start, d.ps.End, d.ps.Output, d.o.stepsRun, d.ps.Err != nil)
	}
}

// emit starts and ends the span of one recorded phase under parent, with
// its own times, and returns the context that holds it.
func (r *Request) emit(parent context.Context, ps *plan.Span, o recordOpts) context.Context {
	if r.span == nil {
		return parent
	}
	var opts [3]trace.SpanStartOption
	opts[0] = trace.WithTimestamp(ps.Start)
	n := 1
	plain := ps.Output < 0 && ps.Step < 0 && !o.reconstructed && len(o.kv) == 0 &&
		(ps.Phase != spans.Exec || (o.stepsRun <= 0 && o.batch == nil))
	if plain {
		// The common case: the table's own attributes, no copy.
		opts[n] = r.tbl.phaseOpt[ps.Phase][0]
		n++
	} else {
		a := make([]attribute.KeyValue, 0, 6+len(o.kv))
		a = append(a, r.tbl.kv(ps.Phase)...)
		if ps.Output >= 0 {
			a = append(a, omniattr.OutputIndex(ps.Output), omniattr.OutputFinal(ps.Final))
		}
		if ps.Step >= 0 {
			a = append(a, omniattr.Step(ps.Step))
		}
		if o.reconstructed {
			a = append(a, omniattr.Reconstructed(true))
		}
		if len(o.kv) > 0 {
			a = append(a, r.in.kvs(o.kv)...)
		}
		if ps.Phase == spans.Exec && o.stepsRun > 0 {
			a = append(a, omniattr.MeanStepDuration(seconds(ps.End.Sub(ps.Start))/float64(o.stepsRun)))
		}
		if ps.Phase == spans.Exec && o.batch != nil {
			a = append(a, omniattr.BatchID(o.batch.id), omniattr.BatchSize(o.batch.size))
			opts[n] = trace.WithLinks(trace.Link{SpanContext: o.batch.sc})
			n++
		}
		opts[n] = trace.WithAttributes(a...)
		n++
	}
	ctx, span := r.tracer.Start(parent, ps.Phase.SpanName(), opts[:n]...)
	if ps.Phase == spans.Exec && o.batch != nil {
		o.batch.members = append(o.batch.members, span.SpanContext())
	}
	r.endSpan(span, ps.End, ps.Err)
	return ctx
}
