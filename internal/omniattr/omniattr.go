// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package omniattr builds otelomni's attributes: one constructor per key of
// package attrs, each returning the [attribute.KeyValue] of that key with
// the key's type. Each comment gives the unit, when there is one, and an
// example value.
package omniattr

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/otelomni/otelomni/attrs"
)

// RequestID returns the omni.request.id attribute: the request id exactly as
// given, never parsed. Example: "chatcmpl-ac59cea85b422f04".
func RequestID(v string) attribute.KeyValue { return attrs.RequestIDKey.String(v) }

// RequestModel returns the gen_ai.request.model attribute. Example:
// "Qwen/Qwen-Image".
func RequestModel(v string) attribute.KeyValue { return semconv.GenAIRequestModelKey.String(v) }

// OperationName returns the gen_ai.operation.name attribute. Example:
// [semconv.GenAIOperationNameGenerateContent.Value.AsString()].
func OperationName(v string) attribute.KeyValue { return semconv.GenAIOperationNameKey.String(v) }

// OutputModality returns the omni.output.modality attribute. Example:
// [attrs.ModalityImage].
func OutputModality(v string) attribute.KeyValue { return attrs.OutputModalityKey.String(v) }

// OutputType returns the gen_ai.output.type attribute for an omni output
// modality, and false for a modality the GenAI conventions have no value
// for (video, latent). Example: [attrs.ModalityAudio] gives "speech".
func OutputType(modality string) (attribute.KeyValue, bool) {
	switch modality {
	case attrs.ModalityImage:
		return semconv.GenAIOutputTypeKey.String("image"), true
	case attrs.ModalityAudio:
		return semconv.GenAIOutputTypeKey.String("speech"), true
	case attrs.ModalityText:
		return semconv.GenAIOutputTypeKey.String("text"), true
	}
	return attribute.KeyValue{}, false
}

// ProviderName returns the gen_ai.provider.name attribute. Example:
// "vllm_omni".
func ProviderName(v string) attribute.KeyValue { return semconv.GenAIProviderNameKey.String(v) }

// NumInferenceSteps returns the omni.diffusion.num_inference_steps attribute
// (steps). Example: 50.
func NumInferenceSteps(v int) attribute.KeyValue { return attrs.NumInferenceStepsKey.Int(v) }

// GuidanceScale returns the omni.diffusion.guidance_scale attribute
// (dimensionless). Example: 7.5; 0 is a real value (guidance off).
func GuidanceScale(v float64) attribute.KeyValue { return attrs.GuidanceScaleKey.Float64(v) }

// Height returns the omni.diffusion.height attribute (pixels). Example: 1024.
func Height(v int) attribute.KeyValue { return attrs.HeightKey.Int(v) }

// Width returns the omni.diffusion.width attribute (pixels). Example: 1024.
func Width(v int) attribute.KeyValue { return attrs.WidthKey.Int(v) }

// NumFrames returns the omni.diffusion.num_frames attribute (frames).
// Example: 81.
func NumFrames(v int) attribute.KeyValue { return attrs.NumFramesKey.Int(v) }

// Prompt returns the omni.request.prompt attribute. Example: "a red fox in
// the snow". Request content is recorded only on opt-in.
func Prompt(v string) attribute.KeyValue { return attrs.PromptKey.String(v) }

// ErrorType returns the error.type attribute. Example: [attrs.ErrorClientAbort].
func ErrorType(v string) attribute.KeyValue { return semconv.ErrorTypeKey.String(v) }

// EngineModel returns the omni.engine.model attribute. Example:
// "Qwen/Qwen-Image".
func EngineModel(v string) attribute.KeyValue { return attrs.EngineModelKey.String(v) }

// EngineWeightBytes returns the omni.engine.weight_bytes attribute (bytes).
// Example: 40802189312.
func EngineWeightBytes(v int64) attribute.KeyValue { return attrs.EngineWeightBytesKey.Int64(v) }

// EngineDType returns the omni.engine.dtype attribute. Example: "bfloat16".
func EngineDType(v string) attribute.KeyValue { return attrs.EngineDTypeKey.String(v) }

// EngineQuantization returns the omni.engine.quantization attribute.
// Example: "fp8".
func EngineQuantization(v string) attribute.KeyValue { return attrs.EngineQuantizationKey.String(v) }

// EngineDeviceKind returns the omni.engine.device.kind attribute. Example:
// "cuda".
func EngineDeviceKind(v string) attribute.KeyValue { return attrs.EngineDeviceKindKey.String(v) }

// EngineDeviceCount returns the omni.engine.device.count attribute
// (devices). Example: 2.
func EngineDeviceCount(v int) attribute.KeyValue { return attrs.EngineDeviceCountKey.Int(v) }

// EngineAcceleratorMemory returns the omni.engine.accelerator_memory_bytes
// attribute (bytes). Example: 42949672960.
func EngineAcceleratorMemory(v int64) attribute.KeyValue {
	return attrs.EngineAcceleratorMemoryKey.Int64(v)
}

// StepsRun returns the omni.diffusion.num_steps_run attribute (steps).
// Example: 28 of 50 asked.
func StepsRun(v int) attribute.KeyValue { return attrs.StepsRunKey.Int(v) }

// MeanStepDuration returns the omni.diffusion.mean_step_duration attribute
// (seconds). Example: 0.085.
func MeanStepDuration(seconds float64) attribute.KeyValue {
	return attrs.MeanStepDurationKey.Float64(seconds)
}

// Phase returns the omni.phase attribute. Example: "queue_wait".
func Phase(id string) attribute.KeyValue { return attrs.PhaseKey.String(id) }

// Step returns the omni.diffusion.step attribute (0-based). Example: 17.
func Step(v int) attribute.KeyValue { return attrs.StepKey.Int(v) }

// OutputIndex returns the omni.output.index attribute (0-based). Example: 2.
func OutputIndex(v int) attribute.KeyValue { return attrs.OutputIndexKey.Int(v) }

// OutputFinal returns the omni.output.final attribute. Example: true.
func OutputFinal(v bool) attribute.KeyValue { return attrs.OutputFinalKey.Bool(v) }

// TransferFromStage returns the omni.transfer.from_stage attribute. Example: 0.
func TransferFromStage(v int) attribute.KeyValue { return attrs.TransferFromStageKey.Int(v) }

// TransferToStage returns the omni.transfer.to_stage attribute. Example: 1.
func TransferToStage(v int) attribute.KeyValue { return attrs.TransferToStageKey.Int(v) }

// TransferBytes returns the omni.transfer.bytes attribute (bytes). Example:
// 8388608.
func TransferBytes(v int64) attribute.KeyValue { return attrs.TransferBytesKey.Int64(v) }

// TransferConnector returns the omni.transfer.connector attribute. Example:
// "shm".
func TransferConnector(v string) attribute.KeyValue { return attrs.TransferConnectorKey.String(v) }

// Reconstructed returns the omni.timing.reconstructed attribute. Example: true.
func Reconstructed(v bool) attribute.KeyValue { return attrs.ReconstructedKey.Bool(v) }

// StageID returns the omni.stage.id attribute. Example: 0.
func StageID(v int) attribute.KeyValue { return attrs.StageIDKey.Int(v) }

// StageName returns the omni.stage.name attribute. Example: "thinker".
func StageName(v string) attribute.KeyValue { return attrs.StageNameKey.String(v) }

// StageType returns the omni.stage.type attribute. Example: [attrs.StageDiffusion].
func StageType(v string) attribute.KeyValue { return attrs.StageTypeKey.String(v) }

// ReplicaID returns the omni.replica.id attribute. Example: "dit-1".
func ReplicaID(v string) attribute.KeyValue { return attrs.ReplicaIDKey.String(v) }

// InputTokens returns the gen_ai.usage.input_tokens attribute (tokens).
// Example: 512.
func InputTokens(v int) attribute.KeyValue { return semconv.GenAIUsageInputTokensKey.Int(v) }

// OutputTokens returns the gen_ai.usage.output_tokens attribute (tokens).
// Example: 128.
func OutputTokens(v int) attribute.KeyValue { return semconv.GenAIUsageOutputTokensKey.Int(v) }

// NumPreemptions returns the omni.llm.num_preemptions attribute (count).
// Example: 1.
func NumPreemptions(v int) attribute.KeyValue { return attrs.NumPreemptionsKey.Int(v) }

// BatchID returns the omni.batch.id attribute. Example: "step-1842".
func BatchID(v string) attribute.KeyValue { return attrs.BatchIDKey.String(v) }

// BatchSize returns the omni.batch.size attribute (requests). Example: 4.
func BatchSize(v int) attribute.KeyValue { return attrs.BatchSizeKey.Int(v) }
