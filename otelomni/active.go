// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"sync"
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
// ends; the SDK takes its end from the monotonic clock (start plus
// elapsed), so a step of the wall clock cannot make it negative. The zero
// ActivePhase, and the one returned when nothing is recorded, are safe to
// use.
type ActivePhase struct {
	r    *Request
	id   uint32
	span trace.Span
	ctx  context.Context
}

// End ends the phase now; a non-nil err marks it failed (status Error with
// err's message, and error.type), as [Request.End] does the request. Ending
// it twice, or after its request ended (which ended it), does nothing.
// Ending an exec or a forward first ends the phases still open inside it,
// at the same moment, so that no part outlives the phase it is part of.
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
	if a.span != nil {
		a.span.SetAttributes(a.r.in.callerKVs("ActivePhase.SetAttributes", kv)...)
	}
}

// Context returns the context the phase was started with, holding the
// phase's span when one is recorded: for spans of your own inside the
// phase, and for bounding an engine call (context.WithTimeout). It is never
// nil: the zero ActivePhase returns context.Background().
func (a ActivePhase) Context() context.Context {
	if a.ctx == nil {
		return context.Background()
	}
	if a.span == nil {
		return a.ctx
	}
	return trace.ContextWithSpan(a.ctx, a.span)
}

// phaseOptions returns the start options of a live phase's span (startLive):
// the table's prebuilt ones in the common case, no copy; else the table's
// attributes with the output's index and finality, the step's index and the
// caller's kv, bounded.
func (r *Request) phaseOptions(p spans.Phase, output int, final bool, step int, kv []attribute.KeyValue) []trace.SpanStartOption {
	if output < 0 && step < 0 && len(kv) == 0 {
		return r.tbl.phaseOpt[p]
	}
	a := append(make([]attribute.KeyValue, 0, 4+len(kv)), r.tbl.kv(p)...)
	if output >= 0 {
		a = append(a, omniattr.OutputIndex(output), omniattr.OutputFinal(final))
	}
	if step >= 0 {
		a = append(a, omniattr.Step(step))
	}
	if len(kv) > 0 {
		a = append(a, r.in.kvs(kv)...)
	}
	return []trace.SpanStartOption{trace.WithAttributes(a...)}
}

// endLive ends the live phase id ([ActivePhase.End]) now, failed when err is
// not nil. An exec or forward first ends the parts still open inside it, at
// the same moment, after those starting under it on other goroutines have
// started; its end moves to a later end of a part recorded inside it. An id
// already ended does nothing.
func (r *Request) endLive(id uint32, err error) {
	r.mu.Lock()
	o, ok := r.open.remove(id)
	if !ok {
		r.mu.Unlock()
		return
	}
	// Counted as a start in flight: the request's end waits for this one,
	// and then ends no earlier than the phase.
	r.starting.Add(1)
	defer r.liveEnded(&o)
	var kids []openPhase
	var at time.Time
	stepsRun := r.stepsRun
	if asParent := r.parentPhaseOf(o.phase); asParent != nil && asParent.live == id {
		for r.childrenStarting > 0 {
			// A part is starting under it on another goroutine: end
			// after it is in the set, so that it ends with its parent.
			if r.cond == nil {
				r.cond = sync.NewCond(&r.mu)
			}
			r.cond.Wait()
		}
		kids = r.open.removeUnder(id)
		if !asParent.lastChild.IsZero() && asParent.lastChild.After(time.Now()) {
			// A part recorded inside it ends later: it ends there.
			at = asParent.lastChild
			r.in.stats.clampedEnd(fmt.Sprintf("%s: %v ended before a part recorded inside it; ended at that part's end", r.id, o.phase))
		}
		asParent.closed, asParent.live, asParent.end = true, 0, at
		if at.IsZero() {
			// Its span ends after this, so no earlier than now: a part
			// placed inside it from now on must end by then.
			asParent.ending = time.Now()
			if asParent.span == nil {
				asParent.end = asParent.ending
			}
		}
	}
	r.mu.Unlock()
	for i := len(kids) - 1; i >= 0; i-- {
		r.finish(&kids[i], at, nil)
	}
	if o.phase == spans.Exec && stepsRun > 0 && o.span != nil {
		end := at
		if end.IsZero() {
			end = time.Now()
		}
		o.span.SetAttributes(omniattr.MeanStepDuration(seconds(end.Sub(o.start)) / float64(stepsRun)))
	}
	r.finish(&o, at, err)
}

// liveEnded ends an end counted in starting: the phase o, and the parts
// ended with it, have ended, and the request (or stage) ends no earlier
// (liveEnd).
func (r *Request) liveEnded(o *openPhase) {
	// Read after the span ended: no earlier than its own end.
	for n := time.Now().UnixNano(); ; {
		last := r.liveEnd.Load()
		if n <= last || r.liveEnd.CompareAndSwap(last, n) {
			break
		}
	}
	r.startDone()
}

// finish ends a live phase's span, at at when it is given (its request or
// parent ended at an explicit time), and records its measurement.
func (r *Request) finish(o *openPhase, at time.Time, err error) {
	if o.span != nil {
		r.endSpan(o.span, at, err)
	}
	if r.met != nil {
		end := at
		if end.IsZero() {
			end = time.Now()
		}
		r.observe(o.ctx, o.phase, o.start, end, int(o.output))
	}
}
