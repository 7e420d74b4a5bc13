// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"time"

	"github.com/otelomni/otelomni/spans"
)

// LLMRecord is the timing of one request at one LLM stage. Each interval is
// measured only when both of its ends were observed; build it from the
// stage's events with [LLMFromEvents], or set the intervals directly.
type LLMRecord struct {
	// Queue runs from the queued event to the first scheduled event.
	Queue spans.Interval
	// Prefill runs from the first scheduled event to the first token. A
	// re-schedule after preemption does not move its start.
	Prefill spans.Interval
	// Decode runs from the first token to the last token.
	Decode spans.Interval
	// Err, when not nil, is why the request failed, during the phase
	// FailedPhase (llm.decode when FailedPhase is 0): that phase's span
	// gets status Error and error.type.
	Err         error
	FailedPhase spans.Phase
	// Reconstructed marks records whose start times were placed by the
	// phase order rather than read from a clock.
	Reconstructed bool
}

// LLMFromEvents builds a record from the times an LLM stage saw a request's
// events; a zero time is an event that was not seen, and every interval
// that lacks an end is left unmeasured. scheduled is the first schedule,
// even when the request was preempted and scheduled again.
func LLMFromEvents(queued, scheduled, firstToken, lastToken time.Time) LLMRecord {
	var r LLMRecord
	if !queued.IsZero() && !scheduled.IsZero() {
		r.Queue = spans.Between(queued, scheduled)
	}
	if !scheduled.IsZero() && !firstToken.IsZero() {
		r.Prefill = spans.Between(scheduled, firstToken)
	}
	if !firstToken.IsZero() && !lastToken.IsZero() {
		r.Decode = spans.Between(firstToken, lastToken)
	}
	return r
}

// LLM appends one [Span] per measured and valid phase of r, in order
// (queue, prefill, decode), and reports each bad one in the error.
func LLM(dst []Span, r *LLMRecord) ([]Span, error) {
	if r == nil {
		return dst, nil
	}
	var errs []error
	failed := r.FailedPhase
	if failed == 0 {
		failed = LLMDecode
	}
	n := len(dst)
	for _, x := range [...]struct {
		p  spans.Phase
		iv spans.Interval
	}{{LLMQueue, r.Queue}, {LLMPrefill, r.Prefill}, {LLMDecode, r.Decode}} {
		m := len(dst)
		dst, errs = one(dst, errs, x.p, x.iv, -1, false, -1)
		if len(dst) > m && r.Err != nil && x.p == failed {
			dst[m].Err = r.Err
		}
	}
	if r.Err != nil && !planned(dst[n:], failed) {
		errs = append(errs, &spans.PhaseError{Phase: failed, Output: -1, Step: -1, Err: ErrFailedNotMeasured})
	}
	return dst, errors.Join(errs...)
}
