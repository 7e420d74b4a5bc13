// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"time"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// LLMEvent is an event of a request's life at an LLM stage, as the engine's
// scheduler and output processor see it.
type LLMEvent int

const (
	// LLMQueued: the request entered the stage's queue.
	LLMQueued LLMEvent = iota + 1
	// LLMScheduled: the scheduler ran the request. Only the first counts: a
	// re-schedule after preemption does not move the prefill's start.
	LLMScheduled
	// LLMFirstToken: the first output token came out.
	LLMFirstToken
	// LLMLastToken: the last output token came out.
	LLMLastToken
	// LLMPreempted: the scheduler preempted the request; counted in
	// omni.llm.num_preemptions.
	LLMPreempted
)

// llmState is what a request remembers of the LLM events it was told.
type llmState struct {
	queued, scheduled, first time.Time
	decoded                  bool
	preemptions              int
}

// MarkLLM records LLM event e, which happened at t: time.Now() on the live
// path, the time the engine stamped the event on the record path. It is the
// one way an LLM stage's phases are recorded. Each LLM phase is emitted as
// soon as both of its ends have been seen: omni.llm.queue at the first
// LLMScheduled after LLMQueued, omni.llm.prefill at LLMFirstToken,
// omni.llm.decode at LLMLastToken. A phase whose start was never seen (a
// request whose queued event was lost) makes no span. Only the first
// LLMScheduled counts. A zero t, or one a span cannot carry, is refused
// with a [*spans.PhaseError].
func (r *Request) MarkLLM(e LLMEvent, t time.Time) error {
	if !r.recording() {
		return nil
	}
	return r.markLLM(e, t)
}

func (r *Request) markLLM(e LLMEvent, t time.Time) error {
	if err := r.rejectTime(llmPhaseOf(e), t); err != nil {
		return err
	}
	r.mu.Lock()
	if r.ended.Load() {
		r.mu.Unlock()
		r.in.stats.misused("an LLM event on a request that had already ended")
		return ErrRequestEnded
	}
	if r.llm == nil {
		r.llm = &llmState{}
	}
	st := r.llm
	var p spans.Phase
	var from time.Time
	switch e {
	case LLMQueued:
		if st.queued.IsZero() {
			st.queued = t
		}
		r.mu.Unlock()
		return nil
	case LLMScheduled:
		if !st.scheduled.IsZero() {
			r.mu.Unlock()
			return nil // a re-schedule after preemption
		}
		st.scheduled = t
		p, from = plan.LLMQueue, st.queued
	case LLMFirstToken:
		if !st.first.IsZero() {
			r.mu.Unlock()
			return nil
		}
		st.first = t
		p, from = plan.LLMPrefill, st.scheduled
	case LLMLastToken:
		if st.decoded {
			r.mu.Unlock()
			return nil
		}
		if !st.first.IsZero() {
			st.decoded = true
		}
		p, from = plan.LLMDecode, st.first
	case LLMPreempted:
		st.preemptions++
		n := st.preemptions
		r.mu.Unlock()
		r.SetAttributes(omniattr.NumPreemptions(n))
		return nil
	default:
		r.mu.Unlock()
		r.in.stats.misused("an unknown LLM event")
		return ErrInvalidPhase
	}
	r.mu.Unlock()
	if from.IsZero() {
		return nil // its start was never seen: not measured
	}
	iv := spans.Between(from, t)
	if err := r.rejectInterval(p, -1, -1, iv); err != nil {
		return err
	}
	ps := [1]plan.Span{{Phase: p, Start: iv.Start(), End: iv.End(), Output: -1, Step: -1}}
	err := r.recordPlanned(ps[:], recordOpts{})
	if p == plan.LLMPrefill && err == nil {
		// The first token: the GenAI conventions' time to first token.
		r.firstOutput(r.ctx, t)
	}
	return err
}

func llmPhaseOf(e LLMEvent) spans.Phase {
	switch e {
	case LLMQueued, LLMScheduled:
		return plan.LLMQueue
	case LLMFirstToken:
		return plan.LLMPrefill
	}
	return plan.LLMDecode
}
