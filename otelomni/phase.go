// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// The starts of a live phase: StartPhase and the calls like it hand the
// phase to the tree's rules (admitLive, in rules.go), start its span and
// return its ActivePhase (active.go).

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

// startLive starts live phase p (output, step) now, when the tree's rules
// admit it (admitLive), and returns its ActivePhase; a phase refused is
// counted (refuse) and starts nothing.
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
	if asParent := r.parentPhaseOf(p); asParent != nil {
		*asParent = parentPhase{set: true, ctx: o.ctx, span: o.span, start: o.start, live: o.id}
	}
	r.mu.Unlock()
	started = true
	r.startedUnder(parentLive)
	r.startDone()
	return ActivePhase{r: r, id: o.id, span: o.span, ctx: ctx}
}
