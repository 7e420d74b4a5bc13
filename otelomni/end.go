// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/spans"
)

// End ends the request (or stage) span now. A non-nil err marks it failed:
// status Error with err's message, and error.type (see ErrClientAbort and
// friends; other errors carry their own type). Phases still open are ended
// first, at the same moment. When a phase recorded with its own times ends
// later than now, the span ends there instead, so that no child outlives
// it (counted in Stats.ClampedEnds). Ending twice does nothing more.
func (r *Request) End(err error) {
	if r.recording() {
		_ = r.end(time.Time{}, err)
	}
}

// EndAt ends the request (or stage) span at t, for timing handed over after
// the fact. A zero t, or one a span cannot carry, is refused: the span ends
// as End would, and EndAt returns an error. A t before the start of the
// request or of a phase it holds, or before the end of a recorded phase,
// would make the tree inconsistent: the span then ends at the latest of
// those, and EndAt returns an error.
func (r *Request) EndAt(t time.Time, err error) error {
	if !r.recording() {
		return nil
	}
	if t.IsZero() || !spans.InRange(t) {
		bad := &scopeError{id: r.id, what: fmt.Sprintf("EndAt(%v): a zero time or one a span cannot carry; ended now", t)}
		r.in.stats.reject(bad)
		if e := r.end(time.Time{}, err); e != nil {
			return e
		}
		return bad
	}
	return r.end(t, err)
}

func (r *Request) end(at time.Time, err error) error {
	r.mu.Lock()
	if r.ended.Load() {
		r.mu.Unlock()
		r.in.stats.misused("a request or stage was ended twice")
		return ErrRequestEnded
	}
	r.ended.Store(true)
	for r.starting.Load() > 0 {
		// A live phase is starting on another goroutine: end after it,
		// so that it does not start after its request ended.
		if r.cond == nil {
			r.cond = sync.NewCond(&r.mu)
		}
		r.cond.Wait()
	}
	open := r.open.drain()
	floor := r.lastEnd
	r.mu.Unlock()

	var bad error
	var now time.Time
	if at.IsZero() {
		// A start given from another clock may lie in the future, and a
		// recorded phase may end later than now: the span ends no earlier.
		if start := r.scopeStart(); !floor.IsZero() || !r.start.IsZero() || r.span == nil {
			now = time.Now()
			if start.After(now) {
				floor = later(floor, start)
			}
			if floor.After(now) {
				at = floor
				r.in.stats.clampedEnd(fmt.Sprintf("%s: ended before a phase it holds ended; ended at that phase's end", r.id))
			}
		}
	} else {
		if n := r.liveEnd.Load(); n != 0 {
			floor = later(floor, time.Unix(0, n))
		}
		floor = later(floor, r.scopeStart())
		for i := range open {
			floor = later(floor, open[i].start)
		}
		if at.Before(floor) {
			bad = &scopeError{id: r.id, what: fmt.Sprintf("EndAt(%v) is before its start or a phase it holds (%v); ended there", at, floor)}
			r.in.stats.clampedEnd(bad.Error())
			at = floor
		}
	}
	// Children end before their parents: latest started first.
	for i := len(open) - 1; i >= 0; i-- {
		r.finish(&open[i], at, nil)
	}
	if r.span != nil {
		if err != nil {
			r.markError(r.span, err)
		}
		endSpan(r.span, at)
	}
	r.observeScope(at, now, err)
	return bad
}

// observeScope records the request's (or stage's) duration.
func (r *Request) observeScope(at, now time.Time, err error) {
	if r.met == nil {
		return
	}
	start, end := r.start, at
	if end.IsZero() {
		end = now
		if end.IsZero() {
			end = time.Now()
		}
	}
	d := end.Sub(start)
	if d < 0 {
		return
	}
	r.vouchEnd(d)
	ctx := r.exemplarCtx(r.ctx)
	if r.kind == kindStage {
		opts := r.tbl.rec.scope
		if err != nil {
			opts = r.tbl.rec.failedStage(r.in.errorType(err))
		}
		r.met.stage.Record(ctx, seconds(d), opts...)
		return
	}
	opts := r.tbl.rec.request
	if err != nil {
		opts = r.tbl.rec.failedRequest(r.in.errorType(err))
	}
	r.met.request.Float64Histogram.Record(ctx, seconds(d), opts...)
}

// markError sets status Error with err's message and error.type on span,
// both bounded: a 10 MB error must cost neither a batch nor a log line.
func (r *Request) markError(span trace.Span, err error) {
	markError(r.in, span, err)
	// A span with status Error keeps its trace in the collector tier, once
	// the tier receives it.
	if exported(span) {
		r.kept.Store(true)
	}
}

func markError(in *Instrumenter, span trace.Span, err error) {
	span.SetStatus(codes.Error, in.str(err.Error()))
	span.SetAttributes(omniattr.ErrorType(in.errorType(err)))
}

// endSpan ends s at at, or now (the SDK's clock) when at is zero.
func endSpan(s trace.Span, at time.Time) {
	if at.IsZero() {
		s.End()
		return
	}
	s.End(trace.WithTimestamp(at))
}

// exported says the tier receives span: it is sampled (a span that is
// not recorded is not sampled either).
func exported(span trace.Span) bool {
	return span != nil && span.SpanContext().IsSampled()
}
