// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package attrs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
)

// TestKeysAreTheContract pins every key: they are what users' queries,
// dashboards and alerts are written against. A key declared in the package
// and missing here fails the test.
func TestKeysAreTheContract(t *testing.T) {
	want := map[attribute.Key]string{
		attrs.RequestIDKey:               "omni.request.id",
		attrs.RequestModelKey:            "gen_ai.request.model",
		attrs.OperationNameKey:           "gen_ai.operation.name",
		attrs.OutputModalityKey:          "omni.output.modality",
		attrs.NumInferenceStepsKey:       "omni.diffusion.num_inference_steps",
		attrs.GuidanceScaleKey:           "omni.diffusion.guidance_scale",
		attrs.HeightKey:                  "omni.diffusion.height",
		attrs.WidthKey:                   "omni.diffusion.width",
		attrs.NumFramesKey:               "omni.diffusion.num_frames",
		attrs.OutputTypeKey:              "gen_ai.output.type",
		attrs.ProviderNameKey:            "gen_ai.provider.name",
		attrs.ErrorTypeKey:               "error.type",
		attrs.PromptKey:                  "omni.request.prompt",
		attrs.StageIDKey:                 "omni.stage.id",
		attrs.StageNameKey:               "omni.stage.name",
		attrs.StageTypeKey:               "omni.stage.type",
		attrs.ReplicaIDKey:               "omni.replica.id",
		attrs.InputTokensKey:             "gen_ai.usage.input_tokens",
		attrs.OutputTokensKey:            "gen_ai.usage.output_tokens",
		attrs.NumPreemptionsKey:          "omni.llm.num_preemptions",
		attrs.BatchIDKey:                 "omni.batch.id",
		attrs.BatchSizeKey:               "omni.batch.size",
		attrs.PhaseKey:                   "omni.phase",
		attrs.StepKey:                    "omni.diffusion.step",
		attrs.OutputIndexKey:             "omni.output.index",
		attrs.OutputFinalKey:             "omni.output.final",
		attrs.TransferFromStageKey:       "omni.transfer.from_stage",
		attrs.TransferToStageKey:         "omni.transfer.to_stage",
		attrs.TransferBytesKey:           "omni.transfer.bytes",
		attrs.TransferConnectorKey:       "omni.transfer.connector",
		attrs.ReconstructedKey:           "omni.timing.reconstructed",
		attrs.EngineModelKey:             "omni.engine.model",
		attrs.EngineWeightBytesKey:       "omni.engine.weight_bytes",
		attrs.EngineDTypeKey:             "omni.engine.dtype",
		attrs.EngineQuantizationKey:      "omni.engine.quantization",
		attrs.EngineDeviceKindKey:        "omni.engine.device.kind",
		attrs.EngineDeviceCountKey:       "omni.engine.device.count",
		attrs.EngineAcceleratorMemoryKey: "omni.engine.accelerator_memory_bytes",
		attrs.EngineTensorParallelKey:    "omni.engine.parallel.tensor",
		attrs.EnginePipelineParallelKey:  "omni.engine.parallel.pipeline",
		attrs.EngineDataParallelKey:      "omni.engine.parallel.data",
		attrs.EngineSchedulingModeKey:    "omni.engine.scheduling_mode",
		attrs.EngineStageConnectorKey:    "omni.engine.stage_connector",
		attrs.StepsRunKey:                "omni.diffusion.num_steps_run",
		attrs.MeanStepDurationKey:        "omni.diffusion.mean_step_duration",
		attrs.ResolutionKey:              "omni.timing.resolution_ms",
		attrs.SummedKey:                  "omni.timing.summed",
		attrs.UnmeasuredZeroKey:          "omni.timing.unmeasured_zero",
		attrs.LengthUnmeasuredKey:        "omni.timing.length_unmeasured",
		attrs.TransferResolutionKey:      "omni.timing.transfer_resolution_ms",
		attrs.TransferSummedKey:          "omni.timing.transfer_summed",
		attrs.ImportSourceKey:            "omni.import.source",
		attrs.RecoveredKey:               "omni.recovered",
	}
	declared := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						if strings.HasSuffix(n.Name, "Key") {
							declared[n.Name] = true
						}
					}
				}
			}
		}
	}
	if len(declared) != len(want) {
		t.Errorf("the package declares %d keys, the test pins %d", len(declared), len(want))
	}
	for k, s := range want {
		if string(k) != s {
			t.Errorf("%s, want %s", k, s)
		}
	}
	if attrs.RecordKeyPrefix != "omni.record." {
		t.Errorf("RecordKeyPrefix %q", attrs.RecordKeyPrefix)
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
