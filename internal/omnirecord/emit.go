package omnirecord

// This file holds every use of the otelomni API in the import, so that a
// change of that API touches one file.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Emitter makes the traces of requests through otelomni, with tp.
type Emitter struct {
	in *otelomni.Instrumenter
}

// NewEmitter returns an emitter whose spans go to tp. An import makes no
// metrics: its requests ran long ago.
func NewEmitter(tp trace.TracerProvider) *Emitter {
	return &Emitter{in: otelomni.New(otelomni.WithTracerProvider(withSpanNames(tp)), otelomni.WithMeterProvider(metricnoop.NewMeterProvider()))}
}

// Emit makes r's trace (see [Request.Emit]).
func (e *Emitter) Emit(ctx context.Context, r *Request, anchor time.Time) error {
	return r.Emit(ctx, e.in, anchor)
}

// diffusionOrder is the order in which a stage's diffusion phases are
// recorded: parents before their children, as the tree is built.
var diffusionOrder = []spans.Phase{spans.QueueWait, spans.Preprocess, spans.Exec, spans.KVRecv, spans.Forward,
	spans.VAEDecode, spans.OutputReadyWait, spans.Postprocess}

var llmOrder = []spans.Phase{spans.LLMQueue, spans.LLMPrefill, spans.LLMDecode}

// placedStage is a stage with its phases placed.
type placedStage struct {
	st *Stage
	p  Placed
}

// plan places every time of the request and checks that each lies within
// what OTLP carries, naming the phase that does not. Nothing is emitted
// for a request that fails.
func (r *Request) plan(anchor time.Time) ([]placedStage, time.Time, error) {
	r.placeTimes(anchor)
	out := make([]placedStage, len(r.Stages))
	end := r.Arrival
	if r.Total != nil {
		end = r.Arrival.Add(r.Total.D)
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		p := st.Place()
		out[i] = placedStage{st, p}
		if p.End.After(end) {
			end = p.End
		}
		for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
			for _, ph := range order {
				if err := checkRange(intervalOf(&p, ph)); err != nil {
					return nil, end, fmt.Errorf("stage %d: %s: %w", st.ID, ph.ID(), err)
				}
			}
		}
		for _, iv := range [...]struct {
			ph spans.Phase
			iv spans.Interval
		}{{spans.TransferTx, p.Transfer.Tx}, {spans.TransferInFlight, p.Transfer.InFlight}, {spans.TransferRxDecode, p.Transfer.RxDecode}} {
			if err := checkRange(iv.iv); err != nil {
				return nil, end, fmt.Errorf("stage %d: %s: %w", st.ID, iv.ph.ID(), err)
			}
		}
		// The stage itself last: the phase that made it too long is named.
		if err := checkRange(spans.Between(st.Submit, p.End)); err != nil {
			return nil, end, fmt.Errorf("stage %d: %w", st.ID, err)
		}
	}
	if err := checkRange(spans.Between(r.Arrival, end)); err != nil {
		return nil, end, fmt.Errorf("request: %w", err)
	}
	return out, end, nil
}

// intervalOf returns the placed interval of a diffusion or LLM phase.
func intervalOf(p *Placed, ph spans.Phase) spans.Interval {
	d, l := &p.Diffusion, &p.LLM
	switch ph {
	case spans.QueueWait:
		return d.QueueWait
	case spans.Preprocess:
		return d.Preprocess
	case spans.Exec:
		return d.Exec
	case spans.KVRecv:
		return d.KVRecv
	case spans.Forward:
		return d.Forward
	case spans.VAEDecode:
		return d.VAEDecode
	case spans.OutputReadyWait:
		return d.OutputReadyWait
	case spans.Postprocess:
		return d.Postprocess
	case spans.LLMQueue:
		return l.Queue
	case spans.LLMPrefill:
		return l.Prefill
	case spans.LLMDecode:
		return l.Decode
	}
	return spans.Interval{}
}

// EndTime returns the request's end once placed from anchor: its measured
// end-to-end time, or its last stage's end if later.
func (r *Request) EndTime(anchor time.Time) time.Time {
	_, end, _ := r.plan(anchor)
	return end
}

// Emit makes the request's trace with in: a single-stage trace (no
// omni.stage span; the request span carries the stage's attributes and
// unknown keys) for a request with one stage and no hand-over, a
// multi-stage trace otherwise. Times the input lacks are placed (see
// placeTimes) from anchor. The trace and span ids come from
// [IDGenerator] when the tracer provider uses it: the same request read
// twice makes the same ids, and each span's id says what the span is (see
// idState), whichever other spans the request has. A request with a time outside what OTLP
// carries makes no span at all.
func (r *Request) Emit(ctx context.Context, in *otelomni.Instrumenter, anchor time.Time) error {
	placed, end, err := r.plan(anchor)
	if err != nil {
		return err
	}
	ctx, ids := withIDs(ctx, r.Key())
	info := otelomni.RequestInfo{
		ID: r.ID, Model: r.Model, Modality: r.Modality, NumInferenceSteps: r.Steps, GuidanceScale: r.Guidance,
		Height: r.Height, Width: r.Width, NumFrames: r.Frames, Start: r.Arrival,
		Attributes: append(append(make([]attribute.KeyValue, 0, len(r.Extra)+9), r.Extra...), attrs.Reconstructed(true)),
	}
	if r.Source != "" {
		info.Attributes = append(info.Attributes, SourceKey.String(r.Source))
	}
	if r.Total != nil {
		info.Attributes = qualityAttrs(info.Attributes, r.Total.Quality)
		if end.After(r.Arrival.Add(r.Total.D)) {
			// A stage ends after the measured end-to-end time: the span
			// reaches it, and the measurement is kept beside it.
			info.Attributes = append(info.Attributes, e2eAttr.Float64(float64(r.Total.D)/float64(time.Millisecond)))
		}
	}
	var errs []error
	if len(placed) == 1 && !placed[0].p.HasTransfer {
		ps := &placed[0]
		st := ps.st
		info.Stage = otelomni.StageInfo{ID: st.ID, Name: st.Name, Type: stageType(st)}
		info.Attributes = append(info.Attributes, st.Extra...)
		info.Attributes = append(info.Attributes, st.RxExtra...) // no previous stage
		info.Attributes = stageAttrs(info.Attributes, st)
		if st.GenTime != nil {
			// No omni.stage span carries the stage's own length here.
			info.Attributes = append(info.Attributes, genTimeAttr.Float64(float64(st.GenTime.D)/float64(time.Millisecond)))
		}
		_, req := in.Start(ctx, info)
		errs = append(errs, recordPhases(req, ps)...)
		errs = append(errs, req.EndAt(end, nil))
		return errors.Join(errs...)
	}
	rctx, req := in.Start(ctx, info)
	for i := range placed {
		ps := &placed[i]
		st := ps.st
		ids.stage = int64(st.ID)
		_, stage := in.StartStage(rctx, otelomni.StageInfo{ID: st.ID, Name: st.Name, Type: stageType(st), Model: r.Model, Start: st.Submit})
		switch {
		case ps.p.HasTransfer && (i > 0 || st.RxFrom != nil):
			ps.p.Transfer.FromStage = r.Stages[max(i-1, 0)].ID
			if st.RxFrom != nil {
				ps.p.Transfer.FromStage = *st.RxFrom
			}
			errs = append(errs, stage.RecordTransfer(ps.p.Transfer))
			stage.SetAttributes(transferQuality(st)...)
		case i == 0:
			stage.SetAttributes(st.RxExtra...) // no previous stage
		}
		errs = append(errs, recordPhases(stage, ps)...)
		stage.SetAttributes(st.Extra...)
		kv := stageAttrs(reconstructedOnly[:1:1], st)
		if !st.hasLength() {
			kv = append(kv, attrs.LengthUnmeasuredKey.Bool(true))
		}
		stage.SetAttributes(kv...)
		errs = append(errs, stage.EndAt(ps.p.End, nil))
	}
	errs = append(errs, req.EndAt(end, nil))
	return errors.Join(errs...)
}

// hasLength reports whether a record gave the stage's own length: its
// generation time, or a phase of it (a hand-over into it is not its own).
func (s *Stage) hasLength() bool {
	if s.GenTime != nil {
		return true
	}
	for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
		for _, p := range order {
			if _, ok := s.Durations[p]; ok {
				return true
			}
		}
	}
	return false
}

// e2eAttr keeps a measured end-to-end time shorter than the request span,
// which a stage's end made longer.
var e2eAttr = attrs.RecordKey("e2e_total_ms")

// genTimeAttr keeps a single-stage request's stage_gen_time, which has no
// omni.stage span to give it a length.
var genTimeAttr = attrs.RecordKey("stage_gen_time_ms")

// reconstructedOnly is the attribute of a placed phase of exact duration,
// shared: the SDK copies what it keeps.
var reconstructedOnly = []attribute.KeyValue{attrs.Reconstructed(true)}

// recordPhases records each placed phase of a stage, with its quality.
func recordPhases(rec *otelomni.Request, ps *placedStage) []error {
	var errs []error
	for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
		for _, ph := range order {
			iv := intervalOf(&ps.p, ph)
			if !iv.Measured() {
				continue
			}
			kv := reconstructedOnly
			if q := ps.st.Quality[ph]; q != (Quality{}) {
				kv = qualityAttrs([]attribute.KeyValue{attrs.Reconstructed(true)}, q)
			}
			if err := rec.RecordPhase(ph, iv, kv...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// stageAttrs appends a stage's own attributes: preemptions, the quality of
// its stage_gen_time, and the fields whose 0 meant "not measured".
func stageAttrs(kv []attribute.KeyValue, st *Stage) []attribute.KeyValue {
	if st.Preemptions != nil {
		kv = append(kv, attrs.NumPreemptions(*st.Preemptions))
	}
	if st.GenTime != nil {
		kv = qualityAttrs(kv, st.GenTime.Quality)
	}
	if len(st.Unmeasured) > 0 {
		u := append([]string(nil), st.Unmeasured...)
		sort.Strings(u)
		kv = append(kv, UnmeasuredZeroKey.StringSlice(u))
	}
	return kv
}

// transferQuality says how exact the hand-over into st is.
func transferQuality(st *Stage) []attribute.KeyValue {
	var q Quality
	for _, p := range []spans.Phase{spans.TransferTx, spans.TransferInFlight, spans.TransferRxDecode} {
		pq := st.Quality[p]
		q.Resolution = max(q.Resolution, pq.Resolution)
		q.Summed = q.Summed || pq.Summed
	}
	var kv []attribute.KeyValue
	if q.Resolution > 0 {
		kv = append(kv, TransferResolutionKey.Float64(float64(q.Resolution)/float64(time.Millisecond)))
	}
	if q.Summed || st.RxBytesSummed {
		kv = append(kv, TransferSummedKey.Bool(true))
	}
	return kv
}

// stageType is the input's stage type, or what its keys say it is: a
// diffusion phase makes a diffusion stage, else an LLM phase an LLM stage.
func stageType(s *Stage) string {
	if s.Type != "" {
		return s.Type
	}
	for _, p := range diffusionOrder {
		if _, ok := s.Durations[p]; ok {
			return attrs.StageDiffusion
		}
	}
	for _, p := range llmOrder {
		if _, ok := s.Durations[p]; ok {
			return attrs.StageLLM
		}
	}
	return attrs.StageOther
}
