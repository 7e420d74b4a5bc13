// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// The rules of the span tree, which every phase passes before its span
// starts, on the live path ([Request.StartPhase] and friends) and on the
// record path ([Request.Record] and friends) alike:
//
//   - in order and in range: an interval ends no earlier than it starts,
//     and both its ends are times a span can carry (intervalError);
//   - inside its parent: a phase lies inside the span it hangs under, the
//     request's (or stage's) span, exec or forward (fitLocked,
//     liveBeforeScope);
//   - measured once: a phase once per request, a per-output phase once per
//     output, a denoise step once per step (claimOnce, fitLocked);
//   - before its request's end: a live phase starts only while its request
//     is open, and the request's End waits for the starts and ends in
//     flight, as an exec's or forward's end waits for the parts starting
//     under it (admitLive, startDone, startedUnder).
//
// A phase that breaks one makes no span; a bad interval is counted in
// Stats.RejectedIntervals, a phase outside its parent or measured twice in
// Stats.Conflicts (countBad, refuse), a live phase started after its
// request ended in Stats.Misuse (refuse). An engine step is held to its
// engine's start the same way (engineBeforeStart).
//
// A record's own parts are also checked against the record's own exec and
// forward when it is planned (plan.Diffusion), with the same plan.Within.

// errBeforeScopeStart: a live phase started before the start its request
// was given.
var errBeforeScopeStart = fmt.Errorf("%w: its request's start is later than now", spans.ErrOutsideParent)

// errParentEnded: a live part of exec (or a step of forward) started after
// its exec (forward) had ended.
var errParentEnded = fmt.Errorf("%w: its exec or forward had already ended", spans.ErrOutsideParent)

// errStartedAfterEnd: a live phase started after its request ended.
var errStartedAfterEnd = errors.New("a phase started after its request ended")

// intervalError returns why interval iv of phase p (output, step) makes no
// span, or nil when it is in order and in range.
func intervalError(p spans.Phase, output, step int, iv spans.Interval) error {
	return plan.Check(p, output, step, iv)
}

// rejectInterval returns intervalError's error, counted in
// Stats.RejectedIntervals.
func (r *Request) rejectInterval(p spans.Phase, output, step int, iv spans.Interval) error {
	err := intervalError(p, output, step, iv)
	if err != nil {
		r.in.stats.reject(err)
	}
	return err
}

// rejectTime returns why t, the time of an event of phase p, makes no span,
// counted in Stats.RejectedIntervals, or nil when it is a time a span can
// carry.
func (r *Request) rejectTime(p spans.Phase, t time.Time) error {
	if !t.IsZero() && spans.InRange(t) {
		return nil
	}
	err := &spans.PhaseError{Phase: p, Output: -1, Step: -1, Interval: spans.Between(t, t), Err: spans.ErrZeroTime}
	if !t.IsZero() {
		err.Err = spans.ErrOutOfRange
	}
	r.in.stats.reject(err)
	return err
}

// countBad counts each bad phase of a planner's error: one outside its
// parent or measured twice in Stats.Conflicts, a bad interval in
// Stats.RejectedIntervals.
func (r *Request) countBad(err error) {
	for _, e := range flatten(err) {
		if errors.Is(e, spans.ErrOutsideParent) || errors.Is(e, spans.ErrDuplicatePhase) {
			r.in.stats.conflict(e)
		} else {
			r.in.stats.reject(e)
		}
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

// refuse counts a live phase that admitLive refused: one started after its
// request ended in Stats.Misuse, one that breaks a rule in Stats.Conflicts.
func (r *Request) refuse(err error) {
	if err == errStartedAfterEnd {
		r.in.stats.misused(err.Error())
		return
	}
	r.in.stats.conflict(err)
}

// admitLive decides whether a live phase may start, and under which span,
// by the tree's rules (fitLocked). It counts the start (starting), so that
// an End on another goroutine waits for it; a phase that hangs directly
// under the request needs no lock for that. It returns why the phase is
// refused, or nil.
func (r *Request) admitLive(p spans.Phase, output, step int) (context.Context, uint32, error) {
	if err := r.liveBeforeScope(p, output, step); err != nil {
		return nil, 0, err
	}
	if plan.ParentOf(p) == plan.Scope && onceBit(p, output, step) != 0 {
		r.starting.Add(1)
		if r.ended.Load() {
			r.startDone()
			return nil, 0, errStartedAfterEnd
		}
		if err := r.claimOnce(p, output, step); err != nil {
			r.startDone()
			return nil, 0, err
		}
		return r.ctx, 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended.Load() {
		return nil, 0, errStartedAfterEnd
	}
	at, err := r.fitLocked(p, output, step, spans.Interval{}, true, batchNests{-1, -1}, nil)
	if err != nil {
		return nil, 0, err
	}
	if at.live != 0 {
		r.childrenStarting++
	}
	r.starting.Add(1)
	return at.ctx, at.live, nil
}

// liveBeforeScope returns a [*spans.PhaseError] when live phase p (output,
// step), starting now, would start before its request, or nil: only a
// request given a start later than the time it was started reads the clock
// for that.
func (r *Request) liveBeforeScope(p spans.Phase, output, step int) error {
	if r.startsLater && r.start.After(time.Now()) {
		return &spans.PhaseError{Phase: p, Output: output, Step: step, Err: errBeforeScopeStart}
	}
	return nil
}

// startDone ends a start counted in starting, waking an End that waits.
func (r *Request) startDone() {
	if r.starting.Add(-1) == 0 && r.ended.Load() {
		r.mu.Lock()
		if r.cond != nil {
			r.cond.Broadcast()
		}
		r.mu.Unlock()
	}
}

// startedUnder ends a start under the live exec or forward parentLive, counted
// in childrenStarting: that exec or forward's end waits for it, so that no part
// outlives it.
func (r *Request) startedUnder(parentLive uint32) {
	if parentLive == 0 {
		return
	}
	r.mu.Lock()
	r.childrenStarting--
	if r.childrenStarting == 0 && r.cond != nil {
		r.cond.Broadcast()
	}
	r.mu.Unlock()
}

// engineBeforeStart returns why an engine step named name, starting now,
// makes no span, or nil: it would start before the engine, given a start
// later than now.
func engineBeforeStart(name string, start time.Time) error {
	if start.After(time.Now()) {
		return &stepError{name: name, err: errBeforeScopeStart}
	}
	return nil
}

// place is where a phase's span hangs: under ctx, or, when in >= 0, under
// the span of the phase at index in of the same batch of recorded phases.
type place struct {
	ctx context.Context
	in  int
	// live is the id of the open live exec or forward it hangs under, or 0.
	live uint32
}

// underForward and underExec are the phases a part hangs under, nearest
// first: without its forward a denoise step hangs under exec, and without
// its exec a part hangs under the request.
var (
	underForward = [...]spans.Phase{spans.Forward, spans.Exec}
	underExec    = [...]spans.Phase{spans.Exec}
)

// fitLocked decides where phase p (output, step) hangs, checks that it lies
// inside that parent and has not been measured yet, and marks it measured.
// It returns a [*spans.PhaseError] when it does not fit; the phase is then
// left unmarked.
//
// live says the phase starts now on the live path, its end not yet known;
// iv is then the zero Interval, which the error carries. Under an exec or
// forward still open it fits, and ends with that parent, at the same
// moment, if it is still open then: its end is clamped to the parent's,
// since both are read from the clock. Under one that has ended it is
// refused (errParentEnded): it would start after its parent's end.
//
// A recorded phase (live false) has both its times already, given by the
// caller: it fits only when iv lies inside its parent's interval, or inside
// the span of its parent in the same batch (fitted, batch); no time a caller
// gives is moved. One recorded inside a live parent still open makes that
// parent end no earlier (lastChild). A recorded phase already measured is
// refused as a duplicate before its interval is looked at, so that a
// record given twice is reported as given twice.
func (r *Request) fitLocked(p spans.Phase, output, step int, iv spans.Interval, live bool, batch batchNests, fitted []accepted) (place, error) {
	fail := func(err error) (place, error) {
		return place{}, &spans.PhaseError{Phase: p, Output: output, Step: step, Interval: iv, Err: err}
	}
	if once := onceBit(p, output, step); !live && once != 0 && r.seen.Load()&once != 0 {
		return fail(spans.ErrDuplicatePhase)
	}
	// claim marks the phase measured, last: a phase refused for its
	// interval leaves the phase free.
	claim := func(at place) (place, error) {
		if !r.markMeasuredLocked(p, output, step) {
			return fail(spans.ErrDuplicatePhase)
		}
		return at, nil
	}
	var parents []spans.Phase
	switch plan.ParentOf(p) {
	case plan.UnderForward:
		parents = underForward[:]
	case plan.UnderExec:
		parents = underExec[:]
	}
	for _, pp := range parents {
		if i := *batch.of(pp); i >= 0 {
			// Its parent is in the same batch.
			if q := fitted[i].ps; !plan.Within(iv, q.Start, q.End) {
				return fail(spans.ErrOutsideParent)
			}
			return claim(place{in: i})
		}
		parent := r.parentPhaseOf(pp)
		if !parent.set {
			continue
		}
		if live {
			if parent.closed {
				return fail(errParentEnded)
			}
			return claim(place{ctx: parent.ctx, in: -1, live: parent.live})
		}
		start, end := parent.interval()
		if !plan.Within(iv, start, end) {
			return fail(spans.ErrOutsideParent)
		}
		at, err := claim(place{ctx: parent.ctx, in: -1})
		if err == nil && !parent.closed {
			parent.lastChild = later(parent.lastChild, iv.End())
		}
		return at, err
	}
	if !live && iv.Start().Before(r.scopeStart()) {
		return fail(spans.ErrOutsideParent)
	}
	return claim(place{ctx: r.ctx, in: -1})
}

// claimOnce marks phase p, measured once per request and hanging under the
// request, measured, without the lock; it returns a [*spans.PhaseError]
// when it already was.
func (r *Request) claimOnce(p spans.Phase, output, step int) error {
	if r.markOnce(onceBit(p, output, step)) {
		return nil
	}
	return &spans.PhaseError{Phase: p, Output: output, Step: step, Err: spans.ErrDuplicatePhase}
}

// claimKey is one output's per-output phase, or one denoise step.
type claimKey struct {
	phase spans.Phase
	index int
}

// markMeasuredLocked marks a phase measured for this request (once per output for
// a per-output phase, once per step for a denoise step), and reports
// whether it was not already.
func (r *Request) markMeasuredLocked(p spans.Phase, output, step int) bool {
	if once := onceBit(p, output, step); once != 0 {
		return r.markOnce(once)
	}
	k := claimKey{p, output}
	if step >= 0 {
		k.index = step
	}
	if r.claimed[k] {
		return false
	}
	if r.claimed == nil {
		r.claimed = map[claimKey]bool{}
	}
	r.claimed[k] = true
	return true
}

// markOnce marks phase bits once as measured, and reports whether they were
// not already.
func (r *Request) markOnce(once uint32) bool {
	for {
		seen := r.seen.Load()
		if seen&once != 0 {
			return false
		}
		if r.seen.CompareAndSwap(seen, seen|once) {
			return true
		}
	}
}

// onceBit returns the bit of a phase that is measured once per request,
// or 0 for one measured per output or per step.
func onceBit(p spans.Phase, output, step int) uint32 {
	if output >= 0 || step >= 0 {
		return 0
	}
	return 1 << p
}

// scopeStart returns the request's (or stage's) start: the one given, or
// otelomni's reading just after its span started.
func (r *Request) scopeStart() time.Time { return r.start }

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// parentPhaseOf returns the parentPhase that phase p is (exec or forward), or nil.
func (r *Request) parentPhaseOf(p spans.Phase) *parentPhase {
	switch p {
	case spans.Exec:
		return &r.exec
	case spans.Forward:
		return &r.forward
	}
	return nil
}
