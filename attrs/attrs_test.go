package attrs_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
)

// TestKeysAreTheContract pins every key with its type: they are what users'
// queries and dashboards are written against.
func TestKeysAreTheContract(t *testing.T) {
	cases := []struct {
		kv   attribute.KeyValue
		key  string
		kind attribute.Type
	}{
		{attrs.RequestID("chatcmpl-1"), "omni.request.id", attribute.STRING},
		{attrs.RequestModel("m"), "gen_ai.request.model", attribute.STRING},
		{attrs.OperationName(attrs.OperationGenerateContent), "gen_ai.operation.name", attribute.STRING},
		{attrs.OutputModality(attrs.ModalityImage), "omni.output.modality", attribute.STRING},
		{attrs.NumInferenceSteps(50), "omni.diffusion.num_inference_steps", attribute.INT64},
		{attrs.GuidanceScale(7.5), "omni.diffusion.guidance_scale", attribute.FLOAT64},
		{attrs.Height(1024), "omni.diffusion.height", attribute.INT64},
		{attrs.Width(1024), "omni.diffusion.width", attribute.INT64},
		{attrs.NumFrames(81), "omni.diffusion.num_frames", attribute.INT64},
		{attrs.ErrorType(attrs.ErrorClientAbort), "error.type", attribute.STRING},
		{attrs.StageID(0), "omni.stage.id", attribute.INT64},
		{attrs.StageName("thinker"), "omni.stage.name", attribute.STRING},
		{attrs.StageType(attrs.StageLLM), "omni.stage.type", attribute.STRING},
		{attrs.ReplicaID("0"), "omni.replica.id", attribute.STRING},
		{attrs.InputTokens(1), "gen_ai.usage.input_tokens", attribute.INT64},
		{attrs.OutputTokens(1), "gen_ai.usage.output_tokens", attribute.INT64},
		{attrs.NumPreemptions(1), "omni.llm.num_preemptions", attribute.INT64},
		{attrs.BatchID("b"), "omni.batch.id", attribute.STRING},
		{attrs.BatchSize(4), "omni.batch.size", attribute.INT64},
		{attrs.Phase("exec"), "omni.phase", attribute.STRING},
		{attrs.Step(0), "omni.diffusion.step", attribute.INT64},
		{attrs.OutputIndex(0), "omni.output.index", attribute.INT64},
		{attrs.OutputFinal(true), "omni.output.final", attribute.BOOL},
		{attrs.TransferFromStage(0), "omni.transfer.from_stage", attribute.INT64},
		{attrs.TransferToStage(1), "omni.transfer.to_stage", attribute.INT64},
		{attrs.TransferBytes(1 << 20), "omni.transfer.bytes", attribute.INT64},
		{attrs.TransferConnector("shm"), "omni.transfer.connector", attribute.STRING},
		{attrs.Reconstructed(true), "omni.timing.reconstructed", attribute.BOOL},
		{attrs.RecordKey("cfg").String("x"), "omni.record.cfg", attribute.STRING},
		{attrs.ProviderName("vllm_omni"), "gen_ai.provider.name", attribute.STRING},
		{attrs.EngineModel("m"), "omni.engine.model", attribute.STRING},
		{attrs.EngineWeightBytes(1), "omni.engine.weight_bytes", attribute.INT64},
		{attrs.EngineDType("bfloat16"), "omni.engine.dtype", attribute.STRING},
		{attrs.EngineQuantization("fp8"), "omni.engine.quantization", attribute.STRING},
		{attrs.EngineDeviceKind("cuda"), "omni.engine.device.kind", attribute.STRING},
		{attrs.EngineDeviceCount(2), "omni.engine.device.count", attribute.INT64},
		{attrs.EngineAcceleratorMemory(1), "omni.engine.accelerator_memory_bytes", attribute.INT64},
		{attrs.StepsRun(28), "omni.diffusion.num_steps_run", attribute.INT64},
		{attrs.MeanStepDuration(0.1), "omni.diffusion.mean_step_duration", attribute.FLOAT64},
		{attrs.Recovered(true), "omni.recovered", attribute.BOOL},
	}
	for _, tc := range cases {
		if string(tc.kv.Key) != tc.key || tc.kv.Value.Type() != tc.kind {
			t.Errorf("%s (%v), want %s (%v)", tc.kv.Key, tc.kv.Value.Type(), tc.key, tc.kind)
		}
	}
	if v := attrs.RequestID("0_501f96ba-7c1d").Value.AsString(); v != "0_501f96ba-7c1d" {
		t.Errorf("request id changed to %q", v)
	}
}

func TestEnumValues(t *testing.T) {
	for got, want := range map[string]string{
		attrs.ErrorClientAbort: "client_abort", attrs.ErrorClientDisconnect: "client_disconnect",
		attrs.ErrorStageError: "stage_error", attrs.ErrorTimeout: "timeout", attrs.ErrorProcessDied: "process_died",
		attrs.StageLLM: "llm", attrs.StageDiffusion: "diffusion", attrs.StageOther: "other",
		attrs.ModalityImage: "image", attrs.ModalityVideo: "video", attrs.ModalityAudio: "audio",
		attrs.ModalityText: "text", attrs.ModalityLatent: "latent",
		attrs.OperationGenerateContent: "generate_content",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

func TestOutputTypeOnlyWhereTheConventionsHaveOne(t *testing.T) {
	for modality, want := range map[string]string{attrs.ModalityImage: "image", attrs.ModalityAudio: "speech",
		attrs.ModalityText: "text", attrs.ModalityVideo: "", attrs.ModalityLatent: ""} {
		kv, ok := attrs.OutputType(modality)
		if ok != (want != "") || kv.Value.AsString() != want || (ok && kv.Key != "gen_ai.output.type") {
			t.Errorf("OutputType(%s) = %v %v, want %q", modality, kv, ok, want)
		}
	}
}

func TestEngineConfigRecordsWhatIsSetAndNothingElse(t *testing.T) {
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range (attrs.EngineConfig{TensorParallel: 2, DType: "bfloat16", StageConnector: "shm"}).Attributes() {
		got[kv.Key] = kv.Value
	}
	if len(got) != 3 || got["omni.engine.parallel.tensor"].AsInt64() != 2 || got["omni.engine.dtype"].AsString() != "bfloat16" ||
		got["omni.engine.stage_connector"].AsString() != "shm" {
		t.Errorf("attributes %v", got)
	}
	if n := len((attrs.EngineConfig{}).Attributes()); n != 0 {
		t.Errorf("a zero config records %d attributes", n)
	}
}
