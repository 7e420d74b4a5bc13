package omnirecord

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Placed is a stage's phases placed on the timeline, in DOMAIN.md's phase
// order from the stage's submit time: preprocess, then exec, then
// output-ready wait, then postprocess; inside exec, one after another,
// queue wait, KV receive, forward, VAE decode; at an LLM stage, queue, then
// prefill, then decode; the hand-over from the previous stage ends at the
// submit time (in flight, then receive-and-decode). A phase that is not in
// the record is not placed and takes no time.
type Placed struct {
	Diffusion spans.DiffusionRecord
	LLM       spans.LLMRecord
	Transfer  spans.TransferRecord
	// HasTransfer: the stage received a hand-over with a measured part.
	HasTransfer bool
	// End is the stage's end: submit plus stage_gen_time, or the end of
	// its last phase.
	End time.Time
}

// Place places a stage's phases.
func (s *Stage) Place() Placed {
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
	p.Diffusion.VAEDecode, _ = span(inner, spans.VAEDecode)
	if e, ok := d[spans.Exec]; ok {
		t = t.Add(e)
	}
	p.Diffusion.OutputReadyWait, t = span(t, spans.OutputReadyWait)
	p.Diffusion.Postprocess, _ = span(t, spans.Postprocess)
	p.Diffusion.Reconstructed = true

	t = s.Submit
	p.LLM.Queue, t = span(t, spans.LLMQueue)
	p.LLM.Prefill, t = span(t, spans.LLMPrefill)
	p.LLM.Decode, _ = span(t, spans.LLMDecode)
	p.LLM.Reconstructed = true

	rx, hasRx := d[spans.TransferRxDecode]
	fl, hasFl := d[spans.TransferInFlight]
	if hasRx || hasFl {
		p.HasTransfer = true
		rxStart := s.Submit.Add(-rx)
		if hasRx {
			p.Transfer.RxDecode = spans.Between(rxStart, s.Submit)
		}
		if hasFl {
			p.Transfer.InFlight = spans.Between(rxStart.Add(-fl), rxStart)
		}
		p.Transfer.ToStage = s.ID
		p.Transfer.Reconstructed = true
		if s.RxBytes != nil {
			p.Transfer.Bytes = *s.RxBytes
		}
	}
	if s.GenTime != nil {
		if end := s.Submit.Add(*s.GenTime); end.After(p.End) {
			p.End = end
		}
	}
	return p
}

// End returns the request's end: the last stage's end.
func (r *Request) End() time.Time {
	end := r.Arrival
	for i := range r.Stages {
		if e := r.Stages[i].Place().End; e.After(end) {
			end = e
		}
	}
	return end
}

// Emit makes the request's trace with in: a single-stage trace (no
// omni.stage span; the request span carries the stage's attributes and
// unknown keys) for a record with one stage, a multi-stage trace otherwise.
// The request span runs from the arrival time to the last stage's end.
func (r *Request) Emit(ctx context.Context, in *otelomni.Instrumenter) error {
	info := otelomni.RequestInfo{
		ID: r.ID, Model: r.Model, Modality: r.Modality, NumInferenceSteps: r.Steps, GuidanceScale: r.Guidance,
		Height: r.Height, Width: r.Width, NumFrames: r.Frames, Start: r.Arrival,
		Attributes: append([]attribute.KeyValue(nil), r.Extra...),
	}
	var errs []error
	if len(r.Stages) == 1 {
		st := &r.Stages[0]
		info.Stage = otelomni.StageInfo{ID: st.ID, Name: st.Name, Type: stageType(st)}
		info.Attributes = append(info.Attributes, st.Extra...)
		info.Attributes = append(info.Attributes, st.RxExtra...) // no previous stage
		if st.Preemptions != nil {
			info.Attributes = append(info.Attributes, attrs.NumPreemptions(*st.Preemptions))
		}
		_, req := in.Start(ctx, info)
		p := st.Place()
		errs = append(errs, req.Record(&p.Diffusion), req.RecordLLM(&p.LLM))
		errs = append(errs, req.EndAt(r.End(), nil))
		return errors.Join(errs...)
	}
	rctx, req := in.Start(ctx, info)
	for i := range r.Stages {
		st := &r.Stages[i]
		p := st.Place()
		_, stage := in.StartStage(rctx, otelomni.StageInfo{ID: st.ID, Name: st.Name, Type: stageType(st), Model: r.Model, Start: st.Submit})
		switch {
		case p.HasTransfer && i > 0:
			p.Transfer.FromStage = r.Stages[i-1].ID
			errs = append(errs, stage.RecordTransfer(p.Transfer))
		case i == 0:
			stage.SetAttributes(st.RxExtra...) // no previous stage
		}
		errs = append(errs, stage.Record(&p.Diffusion), stage.RecordLLM(&p.LLM))
		stage.SetAttributes(st.Extra...)
		if st.Preemptions != nil {
			stage.SetAttributes(attrs.NumPreemptions(*st.Preemptions))
		}
		errs = append(errs, stage.EndAt(p.End, nil))
	}
	errs = append(errs, req.EndAt(r.End(), nil))
	return errors.Join(errs...)
}

// stageType is the record's stage_type, or what its keys say it is: a
// diffusion phase makes a diffusion stage, else an LLM phase an LLM stage.
func stageType(s *Stage) string {
	if s.Type != "" {
		return s.Type
	}
	for _, p := range spans.Phases() {
		if _, ok := s.Durations[p]; ok && p < spans.LLMQueue {
			return attrs.StageDiffusion
		}
	}
	for _, p := range []spans.Phase{spans.LLMQueue, spans.LLMPrefill, spans.LLMDecode} {
		if _, ok := s.Durations[p]; ok {
			return attrs.StageLLM
		}
	}
	return attrs.StageOther
}
