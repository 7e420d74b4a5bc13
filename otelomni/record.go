package otelomni

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// Record turns a timing record, as an engine that timed itself reports it,
// into the request's phase spans, with the record's own start and end
// times: the same spans as the live path. Phases the record did not measure
// make no span. A bad measurement (end before start, zero time) makes no
// span and is reported in the returned error, which names each bad phase
// ([*spans.PhaseError]); the other phases are still recorded.
func (r *scope) record(rec *spans.DiffusionRecord) error {
	if !r.recording() || rec == nil {
		return nil
	}
	var buf [16]spans.PlannedSpan
	plan, err := rec.Plan(buf[:0], spans.PlanOptions{DenoiseSteps: r.in.cfg.denoiseSteps})
	if err != nil {
		r.countRejects(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.in.stats.misused("a record was handed to a request that had already ended")
		return errors.Join(ErrRequestEnded, err)
	}
	for i := range plan {
		ps := &plan[i]
		r.emitLocked(ps.Phase, ps.Start, ps.End, ps.Output, ps.Final, ps.Step, rec.Reconstructed, nil)
	}
	return err
}

// RecordPhase records one phase measured elsewhere (the scheduler's queue
// wait, say) as a span with the interval's own start and end. An interval
// that was not measured makes no span and no error; a bad one makes no span
// and returns a [*spans.PhaseError].
func (r *scope) recordPhase(p spans.Phase, iv spans.Interval, kv ...attribute.KeyValue) error {
	if !r.recording() || !iv.Measured() {
		return nil
	}
	if !p.Valid() || p == spans.DenoiseStep || p.Parent() == spans.ParentTransfer {
		// A denoise step needs its index (DiffusionRecord.DenoiseSteps), a
		// transfer part its transfer (Stage.RecordTransfer).
		r.in.stats.misused(fmt.Sprintf("RecordPhase(%v): use a record for denoise steps and a transfer for its parts", p))
		return ErrInvalidPhase
	}
	if err := iv.Validate(); err != nil {
		err = &spans.PhaseError{Phase: p, Output: -1, Step: -1, Interval: iv, Err: err}
		r.in.stats.reject(err)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.in.stats.misused("a phase was recorded on a request that had already ended")
		return ErrRequestEnded
	}
	r.emitLocked(p, iv.Start(), iv.End(), -1, false, -1, false, kv)
	if outputIndex(p, kv) == 0 && p == spans.Postprocess {
		r.firstOutput(r.ctx, iv.End())
	}
	return nil
}

// emitLocked starts and ends the span of one phase with explicit times.
func (r *scope) emitLocked(p spans.Phase, start, end time.Time, output int, final bool, step int, reconstructed bool, kv []attribute.KeyValue) {
	r.emitUnderLocked(r.parentLocked(p.Parent()), p, start, end, output, final, step, reconstructed, kv)
}

// emitUnderLocked starts and ends the span of one phase under parent, with
// explicit times, and records its measurement.
func (r *scope) emitUnderLocked(parent context.Context, p spans.Phase, start, end time.Time, output int, final bool, step int, reconstructed bool, kv []attribute.KeyValue) {
	ctx := parent
	if r.span != nil {
		r.startOpt[0] = trace.WithTimestamp(start)
		var span trace.Span
		ctx, span = r.tracer.Start(parent, p.SpanName(), r.startOpt[:1]...)
		a := append(r.attrBuf[:0], r.pattrs.of(p)...)
		if output >= 0 {
			a = append(a, attrs.OutputIndex(output), attrs.OutputFinal(final))
		}
		if step >= 0 {
			a = append(a, attrs.Step(step))
		}
		if reconstructed {
			a = append(a, attrs.Reconstructed(true))
		}
		span.SetAttributes(append(a, kv...)...)
		r.nestLocked(p, ctx)
		r.endOpt[0] = trace.WithTimestamp(end)
		span.End(r.endOpt[:]...)
	}
	r.observe(ctx, p, start, end, output)
	// A transfer's parts are timed partly on the sender's clock and hang
	// under the request: they do not bound this scope's end.
	if p.Parent() != spans.ParentTransfer && end.After(r.lastEnd) {
		r.lastEnd = end
	}
}

// countRejects counts each bad phase of a record's error.
func (r *scope) countRejects(err error) {
	for _, e := range flatten(err) {
		r.in.stats.reject(e)
	}
}

// flatten returns the errors an errors.Join holds, or err itself.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
