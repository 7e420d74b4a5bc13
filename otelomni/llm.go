package otelomni

import (
	"time"

	"github.com/otelomni/otelomni/attrs"
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

// llmState is what a scope remembers of the LLM events it was told.
type llmState struct {
	queued, scheduled, first time.Time
	decoded                  bool
	preemptions              int
}

// markLLM records event e at t (under mu) and emits each LLM phase once
// both of its ends have been seen.
func (r *scope) markLLM(e LLMEvent, t time.Time) error {
	if !r.recording() {
		return nil
	}
	if t.IsZero() {
		err := &spans.PhaseError{Phase: llmPhaseOf(e), Output: -1, Step: -1, Err: spans.ErrZeroTime}
		r.in.stats.reject(err)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.in.stats.misused("an LLM event on a scope that had already ended")
		return ErrRequestEnded
	}
	st := &r.llm
	var p spans.Phase
	var from time.Time
	switch e {
	case LLMQueued:
		if st.queued.IsZero() {
			st.queued = t
		}
		return nil
	case LLMScheduled:
		if !st.scheduled.IsZero() {
			return nil // a re-schedule after preemption
		}
		st.scheduled = t
		p, from = spans.LLMQueue, st.queued
	case LLMFirstToken:
		if !st.first.IsZero() {
			return nil
		}
		st.first = t
		p, from = spans.LLMPrefill, st.scheduled
	case LLMLastToken:
		if st.decoded {
			return nil
		}
		if !st.first.IsZero() {
			st.decoded = true
		}
		p, from = spans.LLMDecode, st.first
	case LLMPreempted:
		st.preemptions++
		r.setAttributes(attrs.NumPreemptions(st.preemptions))
		return nil
	default:
		r.in.stats.misused("an unknown LLM event")
		return ErrInvalidPhase
	}
	if from.IsZero() {
		return nil // its start was never seen: not measured
	}
	iv := spans.Between(from, t)
	if err := iv.Validate(); err != nil {
		err = &spans.PhaseError{Phase: p, Output: -1, Step: -1, Interval: iv, Err: err}
		r.in.stats.reject(err)
		return err
	}
	r.emitLocked(p, iv.Start(), iv.End(), -1, false, -1, false, nil)
	return nil
}

func llmPhaseOf(e LLMEvent) spans.Phase {
	switch e {
	case LLMQueued, LLMScheduled:
		return spans.LLMQueue
	case LLMFirstToken:
		return spans.LLMPrefill
	}
	return spans.LLMDecode
}

// recordLLM emits an LLM record's phases.
func (r *scope) recordLLM(rec *spans.LLMRecord) error {
	if !r.recording() || rec == nil {
		return nil
	}
	var buf [3]spans.PlannedSpan
	plan, err := rec.Plan(buf[:0])
	r.countRejects(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		r.in.stats.misused("a record was handed to a scope that had already ended")
		return ErrRequestEnded
	}
	for _, ps := range plan {
		r.emitLocked(ps.Phase, ps.Start, ps.End, -1, false, -1, rec.Reconstructed, nil)
	}
	return err
}
