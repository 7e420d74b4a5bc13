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
//     request's (or stage's) span, exec or forward (admitLiveLocked,
//     fitLocked);
//   - measured once: a phase once per request, a per-output phase once per
//     output, a denoise step once per step (markMeasuredLocked);
//   - before its request's end: a live phase starts only while its request
//     and its parent are open, and ends no later than they do (see
//     request.go: every time is read under the request's lock).
//
// A phase that breaks one makes no span; a bad interval is counted in
// Stats.RejectedIntervals, a phase outside its parent or measured twice in
// Stats.Conflicts (countBad, refuse), a live phase started after its
// request ended, or by a call that does not take it, in Stats.Misuse
// (refuse).
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

// refuse counts a live phase that admitLiveLocked refused: one started
// after its request ended, or by a call that does not take it, in
// Stats.Misuse; one that breaks a rule in Stats.Conflicts.
func (r *Request) refuse(err error) {
	if err == errStartedAfterEnd || errors.Is(err, ErrInvalidPhase) {
		r.in.stats.misused(err.Error())
		return
	}
	r.in.stats.conflict(err)
}

// errParentStarting: a part started while the span of its exec (forward)
// was still being started on another goroutine. It is refused, not hung
// under the request, so that the tree never depends on which goroutine
// came first.
var errParentStarting = errors.New("its exec or forward was still starting on another goroutine")

// admitLiveLocked decides whether live phase p (output, step) may start now,
// and where, by the tree's rules alone: a part of exec (kv_recv, forward,
// vae_decode) hangs under the open exec, a denoise step under the open
// forward, else the open exec; a phase whose parents were not measured
// hangs under the request. It marks p measured and returns its start, read
// now, the id of the open phase it hangs under (0: the request) and the
// context of that span; or why it is refused. r.mu is held.
func (r *Request) admitLiveLocked(p spans.Phase, output, step int) (time.Time, uint32, context.Context, error) {
	if r.ended {
		return time.Time{}, 0, nil, errStartedAfterEnd
	}
	fail := func(err error) (time.Time, uint32, context.Context, error) {
		return time.Time{}, 0, nil, &spans.PhaseError{Phase: p, Output: output, Step: step, Err: err}
	}
	pctx, parentID := r.ctx, uint32(0)
	for _, pp := range parentsOf(p) {
		parent := r.parentPhaseOf(pp)
		if !parent.set {
			continue
		}
		if parent.live == 0 {
			// Recorded, or ended: a part starting now lies outside it.
			return fail(errParentEnded)
		}
		if parent.ctx == nil {
			return fail(errParentStarting)
		}
		pctx, parentID = parent.ctx, parent.live
		break
	}
	start := r.clk.now()
	if r.startsLater && start.Before(r.start) {
		return fail(errBeforeScopeStart)
	}
	if err := r.markMeasuredLocked(p, output, step); err != nil {
		return fail(err)
	}
	return start, parentID, pctx, nil
}

// stepBeforeEngine returns why an engine step named name, starting at
// start, makes no span, or nil: it would start before its engine, given a
// start later than now.
func stepBeforeEngine(name string, start, engineStart time.Time) error {
	if start.Before(engineStart) {
		return &stepError{name: name, err: errBeforeScopeStart}
	}
	return nil
}

// parentsOf returns the phases p hangs under when they were measured,
// nearest first.
func parentsOf(p spans.Phase) []spans.Phase {
	switch plan.ParentOf(p) {
	case plan.UnderForward:
		return underForward[:]
	case plan.UnderExec:
		return underExec[:]
	}
	return nil
}

// place is where a recorded phase's span hangs: under ctx, or, when in >=
// 0, under the span of the phase at index in of the same batch of recorded
// phases, or, when wait is set, under a live exec or forward whose span is
// still starting: the phase waits in its pending parts.
type place struct {
	ctx  context.Context
	in   int
	wait *parentPhase
}

// underForward and underExec are the phases a part hangs under, nearest
// first: without its forward a denoise step hangs under exec, and without
// its exec a part hangs under the request.
var (
	underForward = [...]spans.Phase{spans.Forward, spans.Exec}
	underExec    = [...]spans.Phase{spans.Exec}
)

// fitLocked decides where recorded phase p (output, step), whose interval
// is iv, hangs, checks that it lies inside that parent and has not been
// measured yet, and marks it measured. It returns a [*spans.PhaseError]
// when it does not fit; the phase is then left unmarked. r.mu is held.
//
// It fits only when iv lies inside its parent's interval, or inside the
// span of its parent in the same batch (fitted, batch); no time a caller
// gives is moved. One recorded inside a live parent still open makes that
// parent end no earlier (lastChild). A phase already measured is refused
// as a duplicate before its interval is looked at, so that a record given
// twice is reported as given twice.
func (r *Request) fitLocked(p spans.Phase, output, step int, iv spans.Interval, batch batchNests, fitted []accepted) (place, error) {
	fail := func(err error) (place, error) {
		return place{}, &spans.PhaseError{Phase: p, Output: output, Step: step, Interval: iv, Err: err}
	}
	if once := onceBit(p, output, step); once != 0 && r.seen&once != 0 {
		return fail(spans.ErrDuplicatePhase)
	}
	// claim marks the phase measured, last: a phase refused for its
	// interval leaves the phase free.
	claim := func(at place) (place, error) {
		if err := r.markMeasuredLocked(p, output, step); err != nil {
			return fail(err)
		}
		return at, nil
	}
	for _, pp := range parentsOf(p) {
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
		start, end := parent.interval()
		if !plan.Within(iv, start, end) {
			return fail(spans.ErrOutsideParent)
		}
		at := place{ctx: parent.ctx, in: -1}
		if parent.ctx == nil {
			at.wait = parent
		}
		at, err := claim(at)
		if err == nil {
			// Its parent, and an open exec above a forward, end no earlier.
			for _, up := range parentsOf(p) {
				if q := r.parentPhaseOf(up); q.set && !q.closed {
					q.lastChild = later(q.lastChild, iv.End())
				}
			}
		}
		return at, err
	}
	if iv.Start().Before(r.start) {
		return fail(spans.ErrOutsideParent)
	}
	return claim(place{ctx: r.ctx, in: -1})
}

// claims remembers which per-output phases and denoise steps a request
// measured, each once. An index below denseIndices is a bit of its phase's
// bitset (8 KiB per phase at most), as the indices of real outputs and
// steps are, from 0 up; a larger one is a key of a map of at most
// maxSparse. So what a request holds is bounded whatever its outputs and
// steps: one beyond is refused (errTooManyParts, Stats.Conflicts).
type claims struct {
	dense  [3][]uint64
	sparse map[claimKey]struct{}
}

// claimKey is one output's per-output phase, or one denoise step.
type claimKey struct {
	phase spans.Phase
	index int
}

const (
	denseIndices = 1 << 16
	maxSparse    = 1024
)

// errTooManyParts: a per-output phase or step whose index lies beyond
// what a request remembers.
var errTooManyParts = fmt.Errorf("more than %d per-output phases or steps of indices from %d up measured for one request", maxSparse, denseIndices)

// kindOf is p's bitset: output-ready wait, postprocess, denoise step.
func kindOf(p spans.Phase) int {
	switch p {
	case spans.OutputReadyWait:
		return 0
	case spans.Postprocess:
		return 1
	}
	return 2
}

// claim marks index i of phase p measured; seen says it already was, full
// that it cannot be remembered.
func (c *claims) claim(p spans.Phase, i int) (seen, full bool) {
	if i < denseIndices {
		bits := &c.dense[kindOf(p)]
		w := i / 64
		if w >= len(*bits) {
			*bits = append(*bits, make([]uint64, w+1-len(*bits))...)
		}
		if (*bits)[w]&(1<<(i%64)) != 0 {
			return true, false
		}
		(*bits)[w] |= 1 << (i % 64)
		return false, false
	}
	k := claimKey{p, i}
	if _, ok := c.sparse[k]; ok {
		return true, false
	}
	if len(c.sparse) >= maxSparse {
		return false, true
	}
	if c.sparse == nil {
		c.sparse = map[claimKey]struct{}{}
	}
	c.sparse[k] = struct{}{}
	return false, false
}

// markMeasuredLocked marks a phase measured for this request (once per
// output for a per-output phase, once per step for a denoise step): nil,
// spans.ErrDuplicatePhase when it already was, errTooManyParts when it
// cannot be remembered. r.mu is held.
func (r *Request) markMeasuredLocked(p spans.Phase, output, step int) error {
	if once := onceBit(p, output, step); once != 0 {
		if r.seen&once != 0 {
			return spans.ErrDuplicatePhase
		}
		r.seen |= once
		return nil
	}
	switch seen, full := r.claimed.claim(p, max(output, step)); {
	case seen:
		return spans.ErrDuplicatePhase
	case full:
		return errTooManyParts
	}
	return nil
}

// onceBit returns the bit of a phase that is measured once per request,
// or 0 for one measured per output or per step.
func onceBit(p spans.Phase, output, step int) uint32 {
	if output >= 0 || step >= 0 {
		return 0
	}
	return 1 << p
}

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
