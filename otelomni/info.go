// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"math"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
)

// RequestInfo describes a request when its span starts. Every field is
// optional except ID; a field left at its zero value is not recorded, except
// GuidanceScale, whose 0 is a real value and which is therefore a pointer.
// Strings are client input: each is recorded as valid UTF-8 and bounded to
// 1024 bytes.
type RequestInfo struct {
	// ID is the request id, recorded exactly as given (within 1024 bytes)
	// and never parsed.
	ID string
	// Model is the requested model, such as "Qwen/Qwen-Image".
	Model string
	// Modality is the output modality: attrs.ModalityImage, ...Video,
	// ...Audio, ...Text or ...Latent.
	Modality string
	// NumInferenceSteps is the number of denoising steps requested.
	// This and the sizes below are recorded when above 0; a negative one
	// is not, and is counted in Stats.Misuse.
	NumInferenceSteps int
	// GuidanceScale is the classifier-free guidance scale; nil when unknown.
	GuidanceScale *float64
	// Height, Width and NumFrames give the size of the output in pixels and
	// frames.
	Height, Width, NumFrames int
	// Stage describes the one stage that serves the request in a
	// single-stage pipeline; the request span then carries the stage
	// attributes itself. Leave it empty in a multi-stage pipeline.
	Stage StageInfo
	// Start is the request's arrival time; the zero time means now. A
	// time a span cannot carry (before 1970, after 2262-04-11) is refused:
	// the request starts now and the refusal is counted. A start later than
	// now (another host's clock, a record rebuilt after the fact) is kept;
	// live phases, which start now, are then refused until it is reached,
	// since they would start before their request.
	Start time.Time
	// Attributes are recorded on the request span as well, at its start;
	// one whose key otelomni sets itself (omni.request.id,
	// omni.output.modality, the stage's keys, the phase and output keys) is
	// left out and counted in Stats.Misuse: give those through the fields
	// above.
	Attributes []attribute.KeyValue
	// Prompt is the request's text prompt. It is recorded only when the
	// instrumenter was made WithContentCapture, and then cut short.
	Prompt string
}

// StageInfo describes one stage of a pipeline. A StageInfo whose Type is
// empty is not recorded on a request span.
type StageInfo struct {
	// ID is the stage's index in the pipeline, from 0 to 2^31-1. One out
	// of that range is not recorded (omni.stage.id), and is counted in
	// Stats.Misuse.
	ID int
	// Name is the stage's name, such as "thinker" or "dit".
	Name string
	// Type is attrs.StageLLM, attrs.StageDiffusion or attrs.StageOther;
	// any other value is recorded as attrs.StageOther.
	Type string
	// ReplicaID names the replica of the stage that served the request.
	ReplicaID string
	// Model is the model this stage runs; it is repeated on the stage's
	// phase spans (gen_ai.request.model). Optional.
	Model string
	// Start is when the stage started, for a stage rebuilt after the fact
	// ([Instrumenter.StartStage] only); the zero time means now. It is
	// checked as RequestInfo.Start is.
	Start time.Time
}

// stageInfo returns s with its strings bounded, its type one of the three
// the contract knows, and its ID -1 (not recorded) when out of its range,
// which is counted when the stage is to be recorded.
func (in *Instrumenter) stageInfo(s *StageInfo, recorded bool) StageInfo {
	out := *s
	out.Name, out.ReplicaID = in.str(s.Name), in.str(s.ReplicaID)
	switch s.Type {
	case "", attrs.StageLLM, attrs.StageDiffusion, attrs.StageOther:
	default:
		out.Type = attrs.StageOther
	}
	if badIndex(s.ID) {
		out.ID = -1
		if recorded {
			_ = in.outOfRange("stage id", int64(s.ID), 0, maxIndex, "omni.stage.id not recorded", nil)
		}
	}
	return out
}

// size appends the attribute of a count given at the start (a number of
// steps, a height): when known (above 0); a negative one is counted.
func (in *Instrumenter) size(kv []attribute.KeyValue, what string, v int, attr func(int) attribute.KeyValue) []attribute.KeyValue {
	if v > 0 {
		return append(kv, attr(v))
	}
	if v < 0 {
		_ = in.outOfRange(what, int64(v), 0, math.MaxInt, "not recorded", nil)
	}
	return kv
}

// requestAttrs appends the request span's attributes to kv and returns how
// many there are.
func (in *Instrumenter) requestAttrs(kv []attribute.KeyValue, info *RequestInfo, id, model, modality string, stage *StageInfo) int {
	kv = append(kv,
		omniattr.RequestID(id),
		omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()))
	if model != "" {
		kv = append(kv, omniattr.RequestModel(model))
	}
	if info.Modality != "" {
		m := modality
		kv = append(kv, omniattr.OutputModality(m))
		if t, ok := omniattr.OutputType(m); ok {
			kv = append(kv, t)
		}
	}
	kv = in.size(kv, "num_inference_steps", info.NumInferenceSteps, omniattr.NumInferenceSteps)
	if info.GuidanceScale != nil {
		kv = append(kv, omniattr.GuidanceScale(*info.GuidanceScale))
	}
	kv = in.size(kv, "height", info.Height, omniattr.Height)
	kv = in.size(kv, "width", info.Width, omniattr.Width)
	kv = in.size(kv, "num_frames", info.NumFrames, omniattr.NumFrames)
	if stage.Type != "" {
		kv = stage.appendAttrs(kv)
	}
	return len(kv)
}

func (s *StageInfo) appendAttrs(kv []attribute.KeyValue) []attribute.KeyValue {
	if s.ID >= 0 {
		kv = append(kv, omniattr.StageID(s.ID))
	}
	kv = append(kv, omniattr.StageType(s.Type))
	if s.Name != "" {
		kv = append(kv, omniattr.StageName(s.Name))
	}
	if s.ReplicaID != "" {
		kv = append(kv, omniattr.ReplicaID(s.ReplicaID))
	}
	return kv
}
