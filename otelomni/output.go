package otelomni

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// emitOutput makes the omni.output span of the next output: from the
// previous output (or the scope's start) to now.
func (r *scope) emitOutput(final bool) int {
	if !r.recording() {
		return -1
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.in.stats.misused("an output emitted on a scope that had already ended")
		return -1
	}
	start := r.lastOutput
	if start.IsZero() {
		start = r.startTime(now)
	}
	iv := spans.Between(start, now)
	if err := iv.Validate(); err != nil {
		// The previous output (recorded with engine times) or the start
		// lies after now.
		r.in.stats.reject(&spans.PhaseError{Output: r.outputs, Step: -1, Interval: iv, Err: err})
		return -1
	}
	i := r.outputs
	r.outputOnLocked(i, iv, final)
	return i
}

// recordOutput makes the omni.output span of output i with its own
// interval.
func (r *scope) recordOutput(i int, iv spans.Interval, final bool) error {
	if !r.recording() || !iv.Measured() {
		return nil
	}
	if err := iv.Validate(); err != nil {
		err = &spans.PhaseError{Output: i, Step: -1, Interval: iv, Err: err}
		r.in.stats.reject(err)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.in.stats.misused("an output recorded on a scope that had already ended")
		return ErrRequestEnded
	}
	r.outputOnLocked(i, iv, final)
	return nil
}

func (r *scope) outputOnLocked(i int, iv spans.Interval, final bool) {
	ctx := r.ctx
	if r.span != nil {
		r.startOpt[0] = trace.WithTimestamp(iv.Start())
		var span trace.Span
		ctx, span = r.tracer.Start(r.ctx, spans.OutputSpanName, r.startOpt[:1]...)
		kv := append(r.attrBuf[:0], attrs.OutputIndex(i), attrs.OutputFinal(final))
		if r.pattrs.model != "" {
			kv = append(kv, attrs.RequestModel(r.pattrs.model))
		}
		span.SetAttributes(kv...)
		r.endOpt[0] = trace.WithTimestamp(iv.End())
		span.End(r.endOpt[:]...)
	}
	if i == 0 {
		r.firstOutput(ctx, iv.End())
	}
	if i >= r.outputs {
		r.outputs = i + 1
	}
	if iv.End().After(r.lastOutput) {
		r.lastOutput = iv.End()
	}
	if iv.End().After(r.lastEnd) {
		r.lastEnd = iv.End()
	}
}
