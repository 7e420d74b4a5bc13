// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/spans"
)

// MarkOutput makes the omni.output span of the next output (an audio
// chunk, a text chunk) at a stage that is not a diffusion stage, emitted at
// t: time.Now() on the live path, the engine's own time on the record path.
// The span runs from the previous output, or the start of the request (or
// stage), to t, with omni.output.index (0 for the first output, then 1, 2,
// ...) and omni.output.final. A zero t, or one a span cannot carry, makes
// no span and returns a [*spans.PhaseError] (spans.ErrZeroTime,
// spans.ErrOutOfRange); so does a t before the previous output or the
// start (spans.ErrEndBeforeStart): outputs are marked in their order, each
// with a t no earlier than the one before (mark a request's outputs from
// the goroutine that emits them). The outputs of a diffusion stage are its
// per-output phases instead ([Request.StartPhase] with attrs.OutputIndexKey).
func (r *Request) MarkOutput(final bool, t time.Time) error {
	if !r.recording() {
		return nil
	}
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		r.in.stats.misused("an output marked on a request that had already ended")
		return ErrRequestEnded
	}
	if n := r.outputs; n > maxIndex {
		r.mu.Unlock()
		return r.in.outOfRange("output index", int64(n), 0, maxIndex, "no span emitted", ErrInvalidPhase)
	}
	// Read under the lock: an output marked on another goroutine at the
	// same time is either before this one or after it.
	start := r.lastOutput
	if start.IsZero() {
		start = r.start
	}
	t = r.clk.place(t)
	out := output{index: r.outputs, final: final}
	iv := spans.Between(start, t)
	if err := intervalError(0, out.index, -1, iv); err != nil {
		r.mu.Unlock()
		r.in.stats.reject(err)
		return err
	}
	r.claimOutputLocked(out.index, iv)
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

// output is one output of a request: its index, from 0, and whether it
// finishes the stage.
type output struct {
	index int
	final bool
}

func (r *Request) emitOutput(out output, iv spans.Interval) {
	ctx := r.ctx
	if r.span != nil {
		kv := make([]attribute.KeyValue, 0, 3)
		if r.tbl.hasModel {
			kv = append(kv, omniattr.RequestModel(r.tbl.model))
		}
		kv = append(kv, omniattr.OutputIndex(out.index), omniattr.OutputFinal(out.final))
		var span trace.Span
		ctx, span = r.tracer.Start(r.ctx, plan.OutputSpanName, trace.WithAttributes(kv...), trace.WithTimestamp(iv.Start()))
		span.End(trace.WithTimestamp(iv.End()))
	}
	if out.index == 0 {
		r.firstOutput(ctx, iv.End())
	}
}

// firstOutput records the time from the scope's start to its first output,
// once per scope whichever path reports that output.
func (r *Request) firstOutput(ctx context.Context, at time.Time) {
	if r.met == nil {
		return
	}
	r.mu.Lock()
	first := !r.firstOut
	r.firstOut = true
	r.mu.Unlock()
	if !first {
		return
	}
	d := at.Sub(r.start)
	if d < 0 {
		r.in.stats.reject(&scopeError{id: r.id, what: fmt.Sprintf("first output at %v, before its start; not recorded", at)})
		return
	}
	r.met.ttft.Float64Histogram.Record(ctx, seconds(d), r.tbl.rec.request...)
}
