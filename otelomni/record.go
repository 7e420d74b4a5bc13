// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"errors"
	"fmt"
	"math"

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

// RecordPhase records one phase measured elsewhere (the scheduler's queue
// wait, say) as a span with the interval's own times, under its parent in
// the tree as for [Request.StartPhase]. A non-nil failed marks the phase
// failed (status Error and error.type), as [ActivePhase.End] does on the
// live path; nil records a phase that succeeded. An unmeasured interval
// makes no span and no error; a bad one makes no span and returns a
// [*spans.PhaseError] (see [Request.Record] for what is bad). kv adds
// attributes of the caller's own; one whose key otelomni sets itself makes
// no span and returns an error, as for [Request.StartPhase]. A phase this
// call does not take (a denoise step, which a record's DenoiseSteps hold; a
// transfer part: [Request.RecordTransfer]) makes no span and returns
// [ErrInvalidPhase]. An output-ready wait or postprocess recorded here
// belongs to the request's single output; the outputs of a streaming
// request use [Request.RecordOutputPhase].
func (r *Request) RecordPhase(p spans.Phase, iv spans.Interval, failed error, kv ...attribute.KeyValue) error {
	return r.recordOne(p, -1, false, iv, failed, kv)
}

// RecordOutputPhase records a per-output phase (output-ready wait or
// postprocess) of output out of a streaming request, with
// omni.output.index and omni.output.final; failed as for
// [Request.RecordPhase].
func (r *Request) RecordOutputPhase(p spans.Phase, out spans.Output, iv spans.Interval, failed error, kv ...attribute.KeyValue) error {
	if r.recording() && !p.PerOutput() {
		r.in.stats.misused(fmt.Sprintf("RecordOutputPhase(%v): not a per-output phase", p))
		return ErrInvalidPhase
	}
	if r.recording() && badIndex(out.Index) {
		return r.in.outOfRange("output index", int64(out.Index), 0, maxIndex, "no span emitted", ErrInvalidPhase)
	}
	return r.recordOne(p, out.Index, out.Final, iv, failed, kv)
}

func (r *Request) recordOne(p spans.Phase, output int, final bool, iv spans.Interval, fail error, kv []attribute.KeyValue) error {
	if !r.recording() || !iv.Measured() {
		return nil
	}
	if !plan.Valid(p) || p == spans.DenoiseStep || plan.ParentOf(p) == plan.UnderTransfer {
		// A denoise step needs its index (DiffusionRecord.DenoiseSteps), a
		// transfer part its transfer (RecordTransfer).
		r.in.stats.misused(fmt.Sprintf("RecordPhase(%v): not a phase this call takes (denoise steps: a record; transfer parts: RecordTransfer)", p))
		return ErrInvalidPhase
	}
	if err := r.rejectInterval(p, output, -1, iv); err != nil {
		return err
	}
	if len(kv) > 0 {
		if err := r.in.reserved("RecordPhase("+p.String()+")", kv); err != nil {
			return err
		}
	}
	ps := [1]plan.Span{{Phase: p, Start: iv.Start(), End: iv.End(), Output: output, Final: final, Step: -1, Err: fail}}
	return r.recordPlanned(ps[:], recordOpts{kv: kv})
}

// accepted is one planned span that passed the tree's checks, with where
// it hangs.
type accepted struct {
	ps *plan.Span
	place
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
	var buf [16]accepted
	fitted := buf[:0]
	var bad []error
	batch := batchNests{-1, -1}
	r.mu.Lock()
	if r.ended.Load() {
		r.mu.Unlock()
		r.in.stats.misused("a measurement was recorded on a request that had already ended")
		return ErrRequestEnded
	}
	for i := range planned {
		ps := &planned[i]
		at, err := r.fitLocked(ps.Phase, ps.Output, ps.Step, ps.Interval(), false, batch, fitted)
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
	r.mu.Unlock()
	for _, e := range bad {
		r.in.stats.conflict(e)
	}

	var ctxBuf [16]context.Context
	ctxs := ctxBuf[:0]
	for i := range fitted {
		a := &fitted[i]
		parent := a.ctx
		if a.in >= 0 {
			parent = ctxs[a.in]
		}
		c := r.emit(parent, a.ps, o)
		ctxs = append(ctxs, c)
		r.observe(c, a.ps.Phase, a.ps.Start, a.ps.End, a.ps.Output)
	}
	if batch.exec >= 0 || batch.forward >= 0 {
		r.mu.Lock()
		for _, p := range [...]spans.Phase{spans.Exec, spans.Forward} {
			if i := *batch.of(p); i >= 0 {
				if asParent := r.parentPhaseOf(p); !asParent.set {
					*asParent = parentPhase{set: true, closed: true, ctx: ctxs[i], start: fitted[i].ps.Start, end: fitted[i].ps.End}
				}
			}
		}
		r.mu.Unlock()
	}
	return errors.Join(bad...)
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
