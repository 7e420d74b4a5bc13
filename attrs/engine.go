// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys of the engine's own spans (omni.engine.start and its children) and
// of its configuration on the resource.
const (
	// EngineModelKey is the model an engine loads (string). Example:
	// "Qwen/Qwen-Image".
	EngineModelKey = attribute.Key("omni.engine.model")
	// EngineWeightBytesKey is the size of the weights loaded (int, bytes).
	// Example: 40802189312.
	EngineWeightBytesKey = attribute.Key("omni.engine.weight_bytes")
	// EngineDTypeKey is the dtype the weights run in (string). Example:
	// "bfloat16".
	EngineDTypeKey = attribute.Key("omni.engine.dtype")
	// EngineQuantizationKey is the weights' quantization method (string).
	// Example: "fp8".
	EngineQuantizationKey = attribute.Key("omni.engine.quantization")
	// EngineDeviceKindKey is the kind of accelerator the engine runs on
	// (string). Example: "cuda".
	EngineDeviceKindKey = attribute.Key("omni.engine.device.kind")
	// EngineDeviceCountKey is the number of accelerators the engine uses
	// (int). Example: 2.
	EngineDeviceCountKey = attribute.Key("omni.engine.device.count")
	// EngineAcceleratorMemoryKey is the accelerator memory in use after the
	// model loaded, when the engine reports it (int, bytes). Example:
	// 42949672960.
	EngineAcceleratorMemoryKey = attribute.Key("omni.engine.accelerator_memory_bytes")
	// EngineTensorParallelKey is the tensor-parallel size (int).
	EngineTensorParallelKey = attribute.Key("omni.engine.parallel.tensor")
	// EnginePipelineParallelKey is the pipeline-parallel size (int).
	EnginePipelineParallelKey = attribute.Key("omni.engine.parallel.pipeline")
	// EngineDataParallelKey is the data-parallel size (int).
	EngineDataParallelKey = attribute.Key("omni.engine.parallel.data")
	// EngineSchedulingModeKey is how the engine's scheduler batches
	// requests (string). Example: "continuous".
	EngineSchedulingModeKey = attribute.Key("omni.engine.scheduling_mode")
	// EngineStageConnectorKey is the connector a multi-stage pipeline's
	// stages hand requests over with (string). Example: "shm".
	EngineStageConnectorKey = attribute.Key("omni.engine.stage_connector")
)

// Keys of classifier-free guidance and denoising steps, beside
// omni.diffusion.guidance_scale and omni.diffusion.num_inference_steps.
const (
	// StepsRunKey is the number of denoising steps a request actually ran,
	// which can differ from the number asked (an early exit) (int, steps).
	// Example: 28 of 50 asked.
	StepsRunKey = attribute.Key("omni.diffusion.num_steps_run")
	// MeanStepDurationKey is one exec span's duration divided by the steps
	// it ran: a ratio of one span, never a sum across requests (double,
	// seconds). Example: 0.085.
	MeanStepDurationKey = attribute.Key("omni.diffusion.mean_step_duration")
)
