// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package emit

import (
	"fmt"
	"time"

	tree "github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// Placed is a stage's phases placed on the timeline, in the documented
// phase order from the stage's submit time: preprocess, then exec, then
// output-ready wait, then postprocess; inside exec, one after another,
// queue wait, KV receive, forward, VAE decode; at an LLM stage, queue, then
// prefill, then decode; the hand-over from the previous stage ends at the
// submit time (send, then in flight, then receive-and-decode). A phase that
// is not in the record is not placed and takes no time.
type Placed struct {
	Diffusion spans.DiffusionRecord
	LLM       tree.LLMRecord
	Transfer  spans.TransferRecord
	// HasTransfer: the stage received a hand-over with a measured part.
	HasTransfer bool
	// End is the stage's end: submit plus stage_gen_time, or the end of
	// its last phase.
	End time.Time
}

// place places a stage's phases.
func place(s *forms.Stage) Placed {
	p := Placed{End: s.Submit}
	d := s.Durations
	span := func(start time.Time, ph spans.Phase) (spans.Interval, time.Time) {
		dur, ok := d[ph]
		if !ok {
			return spans.Interval{}, start
		}
		end := start.Add(dur)
		if end.After(p.End) {
			p.End = end
		}
		return spans.Between(start, end), end
	}
	t := s.Submit
	p.Diffusion.Preprocess, t = span(t, spans.Preprocess)
	p.Diffusion.Exec, _ = span(t, spans.Exec)
	inner := t
	p.Diffusion.QueueWait, inner = span(inner, spans.QueueWait)
	p.Diffusion.KVRecv, inner = span(inner, spans.KVRecv)
	p.Diffusion.Forward, inner = span(inner, spans.Forward)
	p.Diffusion.VAEDecode, inner = span(inner, spans.VAEDecode)
	if e, ok := d[spans.Exec]; ok {
		t = t.Add(e)
		if inner.After(t) {
			// The parts outlast exec by no more than the writer's
			// resolution (checkExecParts refuses more): exec, truncated
			// or rounded, lasted at least as long as its parts.
			p.Diffusion.Exec = spans.Between(p.Diffusion.Exec.Start(), inner)
			t = inner
			if t.After(p.End) {
				p.End = t
			}
		}
	} else {
		t = inner // without exec, its parts still come before the output
	}
	p.Diffusion.OutputReadyWait, t = span(t, spans.OutputReadyWait)
	p.Diffusion.Postprocess, _ = span(t, spans.Postprocess)
	p.Diffusion.Reconstructed = true

	t = s.Submit
	p.LLM.Queue, t = span(t, tree.LLMQueue)
	p.LLM.Prefill, t = span(t, tree.LLMPrefill)
	p.LLM.Decode, _ = span(t, tree.LLMDecode)
	p.LLM.Reconstructed = true

	rx, hasRx := d[tree.TransferRxDecode]
	fl, hasFl := d[tree.TransferInFlight]
	tx, hasTx := d[tree.TransferTx]
	if hasRx || hasFl || hasTx {
		p.HasTransfer = true
		rxStart := s.Submit.Add(-rx)
		flStart := rxStart.Add(-fl)
		if hasRx {
			p.Transfer.RxDecode = spans.Between(rxStart, s.Submit)
		}
		if hasFl {
			p.Transfer.InFlight = spans.Between(flStart, rxStart)
		}
		if hasTx {
			p.Transfer.Tx = spans.Between(flStart.Add(-tx), flStart)
		}
		p.Transfer.ToStage = s.ID
		p.Transfer.Reconstructed = true
		if s.RxBytes != nil {
			p.Transfer.Bytes = *s.RxBytes
		}
	}
	if s.GenTime != nil {
		if end := s.Submit.Add(s.GenTime.D); end.After(p.End) {
			p.End = end
		}
	}
	return p
}

// transferLength is how long the hand-over into s lasts when placed.
func transferLength(s *forms.Stage) time.Duration {
	d := s.Durations
	return forms.AddSat(forms.AddSat(d[tree.TransferTx], d[tree.TransferInFlight]), d[tree.TransferRxDecode])
}

// length is how long s lasts when placed from its submit time.
func length(s *forms.Stage) time.Duration {
	d := s.Durations
	execLen := d[spans.Exec]
	if _, ok := d[spans.Exec]; !ok {
		for _, p := range forms.ExecParts {
			execLen = forms.AddSat(execLen, d[p])
		}
	}
	diff := forms.AddSat(forms.AddSat(d[spans.Preprocess], execLen), forms.AddSat(d[spans.OutputReadyWait], d[spans.Postprocess]))
	llm := forms.AddSat(forms.AddSat(d[tree.LLMQueue], d[tree.LLMPrefill]), d[tree.LLMDecode])
	n := max(diff, llm)
	if s.GenTime != nil {
		n = max(n, s.GenTime.D)
	}
	return n
}

// placeTimes gives the request and its stages the times the input did
// not: the request starts at its arrival, or ends at its end (a log line's
// time), or starts at anchor; its stages follow one another in stage
// order, each after the hand-over into it. When they would pass the
// request's measured end, the stages overlapped (a streaming pipeline runs
// them side by side): a stage is then placed as late as lets it end with
// the request, and never before its start.
func placeTimes(r *forms.Request, anchor time.Time) {
	var chain time.Duration
	for i := range r.Stages {
		if r.Stages[i].Submit.IsZero() {
			chain = forms.AddSat(chain, forms.AddSat(transferLength(&r.Stages[i]), length(&r.Stages[i])))
		}
	}
	if r.Arrival.IsZero() {
		switch {
		case !r.End.IsZero() && r.Total != nil:
			r.Arrival = r.End.Add(-r.Total.D)
		case !r.End.IsZero():
			r.Arrival = r.End.Add(-chain)
		default:
			r.Arrival = anchor
		}
	}
	end := r.Arrival.Add(chain)
	if r.Total != nil {
		end = r.Arrival.Add(r.Total.D)
	}
	cursor := r.Arrival
	for i := range r.Stages {
		s := &r.Stages[i]
		if !s.Submit.IsZero() {
			continue
		}
		need := forms.AddSat(transferLength(s), length(s))
		if cursor.Add(need).After(end) {
			cursor = end.Add(-need)
			if cursor.Before(r.Arrival) {
				cursor = r.Arrival
			}
		}
		s.Submit = cursor.Add(transferLength(s))
		cursor = s.Submit.Add(length(s))
	}
}

// The times OTLP carries: nanoseconds since 1970 that a time.Time's
// UnixNano can hold (up to 2262-04-11).
var (
	minTime = tree.MinTime
	maxTime = tree.MaxTime
)

// checkRange refuses an interval that OTLP cannot carry.
func checkRange(iv spans.Interval) error {
	if !iv.Measured() {
		return nil
	}
	for _, t := range [2]time.Time{iv.Start(), iv.End()} {
		if t.Before(minTime) || t.After(maxTime) {
			return fmt.Errorf("%v..%v is %w", iv.Start().UTC().Format(time.RFC3339), iv.End().UTC().Format(time.RFC3339), forms.ErrOutOfRange)
		}
	}
	return nil
}
