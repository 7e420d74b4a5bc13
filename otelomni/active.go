// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/spans"
)

// An ActivePhase and its end: the start options and attributes of a live
// phase's span, and its end (endLive), which ends the parts still open
// inside it and records the measurement (finish).

// ActivePhase is a phase started on the live path. End it when the phase
// ends. Its start and end are read from its request's clock, once each,
// and given both to its span and to its measurement, so that the
// measurement is the span's duration exactly. The zero ActivePhase, and
// the one returned when nothing is recorded or the phase was refused, are
// safe to use and record nothing.
type ActivePhase struct {
	r *Request
	// id is the phase's among its request's open phases; 0 when there is
	// nothing to end.
	id   uint32
	span trace.Span
	ctx  context.Context
}

// End ends the phase now; a non-nil err marks it failed (status Error with
// err's message, and error.type), as [Request.End] does the request. Ending
// it twice, or after its request ended (which ended it), does nothing.
// Ending an exec or a forward first ends the parts still open inside it, at
// the same moment, so that no part outlives the phase it is part of. End
// never waits for another goroutine.
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
	if a.span != nil && a.r != nil {
		a.span.SetAttributes(a.r.in.callerKVs("ActivePhase.SetAttributes", kv)...)
	}
}

// Context returns the context the phase was started with, holding the
// phase's span when one is recorded: for spans of your own inside the
// phase, and for bounding an engine call (context.WithTimeout). The span
// it holds records exactly when the phase's does
// (trace.SpanFromContext(a.Context()).IsRecording()). It is never nil: the
// zero ActivePhase returns context.Background().
func (a ActivePhase) Context() context.Context {
	if a.ctx == nil {
		return context.Background()
	}
	if a.span == nil {
		return a.ctx
	}
	return trace.ContextWithSpan(a.ctx, a.span)
}

// phaseOptions returns the start options of a live phase's span
// (startLive): its start, and the table's prebuilt attributes in the
// common case, no copy; else the table's attributes with the output's
// index and finality, the step's index and the caller's kv.
func (r *Request) phaseOptions(p spans.Phase, args *liveArgs, start time.Time) []trace.SpanStartOption {
	if args.output < 0 && args.step < 0 && len(args.kv) == 0 {
		return []trace.SpanStartOption{r.tbl.phaseOpt[p][0], trace.WithTimestamp(start)}
	}
	a := append(make([]attribute.KeyValue, 0, 4+len(args.kv)), r.tbl.kv(p)...)
	if args.output >= 0 {
		a = append(a, omniattr.OutputIndex(args.output), omniattr.OutputFinal(args.final))
	}
	if args.step >= 0 {
		a = append(a, omniattr.Step(args.step))
	}
	a = append(a, args.kv...)
	return []trace.SpanStartOption{trace.WithAttributes(a...), trace.WithTimestamp(start)}
}

// endLive ends the live phase id ([ActivePhase.End]) now, failed when err is
// not nil. An exec or forward first ends the parts still open inside it, at
// the same moment; its end moves to a later end of a part recorded inside
// it. An id already ended does nothing.
func (r *Request) endLive(id uint32, err error) {
	r.mu.Lock()
	if o := r.open.find(id); o == nil || o.starting {
		r.mu.Unlock()
		return
	}
	at := r.clk.now()
	clamped := false
	o, _ := r.open.remove(id)
	if asParent := r.parentPhaseOf(o.phase); asParent != nil && asParent.live == id {
		if asParent.lastChild.After(at) {
			// A part recorded inside it ends later: it ends there.
			at, clamped = asParent.lastChild, true
		}
		asParent.closed, asParent.live, asParent.end = true, 0, at
	}
	kids := r.open.takeUnder(id, at)
	r.closeParentsLocked(at)
	r.lastEnd = later(r.lastEnd, at)
	stepsRun := r.stepsRun
	r.mu.Unlock()
	if clamped {
		r.in.stats.clampedEnd(fmt.Sprintf("%s: %v ended before a part recorded inside it; ended at that part's end", r.id, o.phase))
	}
	if len(kids) == 0 {
		// The common case, one span: nothing to keep going past a panic.
		r.finishWithSteps(&o, at, err, stepsRun)
		return
	}
	r.finishWithKids(kids, o, at, err, stepsRun)
}

// finishWithKids ends the parts a phase ended (latest started first), then
// the phase, at at: every span ends, whichever span processor panics, then
// the first panic goes on. Apart from endLive, so that its common case
// moves nothing to the heap.
func (r *Request) finishWithKids(kids []openPhase, o openPhase, at time.Time, err error, stepsRun int) {
	steps := make([]func(), 0, len(kids)+1)
	for i := len(kids) - 1; i >= 0; i-- {
		k := &kids[i]
		steps = append(steps, func() { r.finishTaken(k, at, stepsRun) })
	}
	runAll(append(steps, func() { r.finishWithSteps(&o, at, err, stepsRun) }))
}

// closeParentsLocked closes the live exec or forward that has just been
// ended with its parent or request (no longer open, or still starting and
// marked to end): no part starts or is recorded under it after at. r.mu is
// held.
func (r *Request) closeParentsLocked(at time.Time) {
	for _, pp := range [...]*parentPhase{&r.exec, &r.forward} {
		if pp.live == 0 {
			continue
		}
		if o := r.open.find(pp.live); o == nil || !o.endAt.IsZero() {
			pp.closed, pp.live, pp.end = true, 0, at
		}
	}
}

// finishTaken ends a phase its parent or request ended, at at.
func (r *Request) finishTaken(o *openPhase, at time.Time, stepsRun int) {
	r.finishWithSteps(o, at, nil, stepsRun)
}

// finishWithSteps is finish, giving an exec its mean step duration when
// the steps run are known: the same division as the exec-per-step
// histogram's.
func (r *Request) finishWithSteps(o *openPhase, at time.Time, err error, stepsRun int) {
	if o.phase == spans.Exec && stepsRun > 0 && o.span != nil {
		o.span.SetAttributes(omniattr.MeanStepDuration(seconds(at.Sub(o.start)) / float64(stepsRun)))
	}
	r.finish(o, at, err, stepsRun)
}

// finish ends a live phase's span at at, and records its measurement, from
// the same two readings.
func (r *Request) finish(o *openPhase, at time.Time, err error, stepsRun int) {
	if o.span != nil {
		r.endSpan(o.span, at, err)
	}
	if r.met != nil {
		ctx := o.spanCtx
		if o.span == nil {
			ctx = o.ctx
		}
		r.observe(ctx, o.phase, o.start, at, int(o.output), stepsRun, err != nil)
	}
}
