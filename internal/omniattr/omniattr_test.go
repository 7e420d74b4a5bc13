// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package omniattr_test

import (
	"testing"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
)

// TestEachConstructorHasItsKeyAndType pins every constructor to its key of
// package attrs and the type the documented table gives it.
func TestEachConstructorHasItsKeyAndType(t *testing.T) {
	cases := []struct {
		kv   attribute.KeyValue
		key  string
		kind attribute.Type
	}{
		{omniattr.RequestID("chatcmpl-1"), "omni.request.id", attribute.STRING},
		{omniattr.RequestModel("m"), "gen_ai.request.model", attribute.STRING},
		{omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()), "gen_ai.operation.name", attribute.STRING},
		{omniattr.OutputModality(attrs.ModalityImage), "omni.output.modality", attribute.STRING},
		{omniattr.NumInferenceSteps(50), "omni.diffusion.num_inference_steps", attribute.INT64},
		{omniattr.GuidanceScale(7.5), "omni.diffusion.guidance_scale", attribute.FLOAT64},
		{omniattr.Height(1024), "omni.diffusion.height", attribute.INT64},
		{omniattr.Width(1024), "omni.diffusion.width", attribute.INT64},
		{omniattr.NumFrames(81), "omni.diffusion.num_frames", attribute.INT64},
		{omniattr.ErrorType(attrs.ErrorClientAbort), "error.type", attribute.STRING},
		{omniattr.Prompt("a red fox"), "omni.request.prompt", attribute.STRING},
		{omniattr.StageID(0), "omni.stage.id", attribute.INT64},
		{omniattr.StageName("thinker"), "omni.stage.name", attribute.STRING},
		{omniattr.StageType(attrs.StageLLM), "omni.stage.type", attribute.STRING},
		{omniattr.ReplicaID("0"), "omni.replica.id", attribute.STRING},
		{omniattr.InputTokens(1), "gen_ai.usage.input_tokens", attribute.INT64},
		{omniattr.OutputTokens(1), "gen_ai.usage.output_tokens", attribute.INT64},
		{omniattr.NumPreemptions(1), "omni.llm.num_preemptions", attribute.INT64},
		{omniattr.BatchID("b"), "omni.batch.id", attribute.STRING},
		{omniattr.BatchSize(4), "omni.batch.size", attribute.INT64},
		{omniattr.Phase("exec"), "omni.phase", attribute.STRING},
		{omniattr.Step(0), "omni.diffusion.step", attribute.INT64},
		{omniattr.OutputIndex(0), "omni.output.index", attribute.INT64},
		{omniattr.OutputFinal(true), "omni.output.final", attribute.BOOL},
		{omniattr.TransferFromStage(0), "omni.transfer.from_stage", attribute.INT64},
		{omniattr.TransferToStage(1), "omni.transfer.to_stage", attribute.INT64},
		{omniattr.TransferBytes(1 << 20), "omni.transfer.bytes", attribute.INT64},
		{omniattr.TransferConnector("shm"), "omni.transfer.connector", attribute.STRING},
		{omniattr.Reconstructed(true), "omni.timing.reconstructed", attribute.BOOL},
		{omniattr.ProviderName("vllm_omni"), "gen_ai.provider.name", attribute.STRING},
		{omniattr.EngineModel("m"), "omni.engine.model", attribute.STRING},
		{omniattr.EngineWeightBytes(1), "omni.engine.weight_bytes", attribute.INT64},
		{omniattr.EngineDType("bfloat16"), "omni.engine.dtype", attribute.STRING},
		{omniattr.EngineQuantization("fp8"), "omni.engine.quantization", attribute.STRING},
		{omniattr.EngineDeviceKind("cuda"), "omni.engine.device.kind", attribute.STRING},
		{omniattr.EngineDeviceCount(2), "omni.engine.device.count", attribute.INT64},
		{omniattr.EngineAcceleratorMemory(1), "omni.engine.accelerator_memory_bytes", attribute.INT64},
		{omniattr.StepsRun(28), "omni.diffusion.num_steps_run", attribute.INT64},
		{omniattr.MeanStepDuration(0.1), "omni.diffusion.mean_step_duration", attribute.FLOAT64},
	}
	for _, tc := range cases {
		if string(tc.kv.Key) != tc.key || tc.kv.Value.Type() != tc.kind {
			t.Errorf("%s (%v), want %s (%v)", tc.kv.Key, tc.kv.Value.Type(), tc.key, tc.kind)
		}
	}
	if v := omniattr.RequestID("0_501f96ba-7c1d").Value.AsString(); v != "0_501f96ba-7c1d" {
		t.Errorf("request id changed to %q", v)
	}
}

func TestOutputTypeOnlyWhereTheConventionsHaveOne(t *testing.T) {
	for modality, want := range map[string]string{attrs.ModalityImage: "image", attrs.ModalityAudio: "speech",
		attrs.ModalityText: "text", attrs.ModalityVideo: "", attrs.ModalityLatent: ""} {
		kv, ok := omniattr.OutputType(modality)
		if ok != (want != "") || kv.Value.AsString() != want || (ok && kv.Key != "gen_ai.output.type") {
			t.Errorf("OutputType(%s) = %v %v, want %q", modality, kv, ok, want)
		}
	}
}
