package otelomni

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// EmitOutput makes the omni.output span of the next output (an audio chunk,
// a text chunk) at a stage that is not a diffusion stage: from the previous
// output, or the start of the request (or stage), to now, with
// omni.output.index and omni.output.final. It returns the output, whose
// Index is -1 when nothing is recorded (as when the next index would be
// past 2^31-1, which is counted in Stats.Misuse).
func (r *Request) EmitOutput(final bool) spans.Output {
	if !r.recording() {
		return spans.Output{Index: -1}
	}
	r.mu.Lock()
	if r.ended.Load() {
		r.mu.Unlock()
		r.in.stats.misused("an output emitted on a request that had already ended")
		return spans.Output{Index: -1}
	}
	if r.outputs > maxIndex {
		r.mu.Unlock()
		_ = r.in.outOfRange("output index", int64(r.outputs), 0, maxIndex, "no span emitted", nil)
		return spans.Output{Index: -1}
	}
	// Read under the lock: an output emitted on another goroutine at the
	// same time is either before this one or after it.
	now := time.Now()
	start := r.lastOutput
	if start.IsZero() {
		start = r.scopeStart()
	}
	out := spans.Output{Index: r.outputs, Final: final}
	iv := spans.Between(start, now)
	if err := iv.Validate(); err != nil {
		// The previous output (recorded with engine times) or the start
		// lies after now.
		r.mu.Unlock()
		r.in.stats.reject(&spans.PhaseError{Output: out.Index, Interval: iv, Err: err})
		return spans.Output{Index: -1}
	}
	r.claimLocked(0, out.Index, -1)
	r.claimOutputLocked(out.Index, iv)
	r.mu.Unlock()
	r.emitOutput(out, iv)
	return out
}

// RecordOutput makes the omni.output span of output out with its own
// interval. A bad interval makes no span and returns a [*spans.OutputError];
// so does one that starts before the request (or stage), and an output
// index already recorded. An index out of its range (0 to 2^31-1) makes no
// span and returns an error that matches [ErrInvalidPhase] (counted in
// Stats.Misuse).
func (r *Request) RecordOutput(out spans.Output, iv spans.Interval) error {
	if !r.recording() || !iv.Measured() {
		return nil
	}
	if badIndex(out.Index) {
		return r.in.outOfRange("output index", int64(out.Index), 0, maxIndex, "no span emitted", ErrInvalidPhase)
	}
	if err := iv.Validate(); err != nil {
		err = &spans.PhaseError{Output: out.Index, Interval: iv, Err: err}
		r.in.stats.reject(err)
		return err
	}
	r.mu.Lock()
	if r.ended.Load() {
		r.mu.Unlock()
		r.in.stats.misused("an output recorded on a request that had already ended")
		return ErrRequestEnded
	}
	if iv.Start().Before(r.scopeStart()) {
		r.mu.Unlock()
		err := &spans.PhaseError{Output: out.Index, Interval: iv, Err: spans.ErrOutsideParent}
		r.in.stats.conflict(err)
		return err
	}
	if !r.claimLocked(0, out.Index, -1) {
		r.mu.Unlock()
		err := &spans.PhaseError{Output: out.Index, Interval: iv, Err: spans.ErrDuplicatePhase}
		r.in.stats.conflict(err)
		return err
	}
	r.claimOutputLocked(out.Index, iv)
	r.mu.Unlock()
	r.emitOutput(out, iv)
	return nil
}

// claimOutputLocked counts output i and moves the request's bounds.
func (r *Request) claimOutputLocked(i int, iv spans.Interval) {
	if i >= r.outputs {
		r.outputs = i + 1
	}
	r.lastOutput = later(r.lastOutput, iv.End())
	r.lastEnd = later(r.lastEnd, iv.End())
}

func (r *Request) emitOutput(out spans.Output, iv spans.Interval) {
	ctx := r.ctx
	if r.span != nil {
		kv := make([]attribute.KeyValue, 0, 3)
		if r.tbl.hasModel {
			kv = append(kv, attrs.RequestModel(r.tbl.model))
		}
		kv = append(kv, attrs.OutputIndex(out.Index), attrs.OutputFinal(out.Final))
		var span trace.Span
		ctx, span = r.tracer.Start(r.ctx, spans.OutputSpanName, trace.WithAttributes(kv...), trace.WithTimestamp(iv.Start()))
		span.End(trace.WithTimestamp(iv.End()))
	}
	if out.Index == 0 {
		r.firstOutput(ctx, iv.End())
	}
}
