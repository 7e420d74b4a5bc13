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

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
)

// TestKeysAreTheContract pins every key: they are what users' queries,
// dashboards and alerts are written against. A key declared in the package
// and missing here fails the test.
func TestKeysAreTheContract(t *testing.T) {
	want := map[attribute.Key]string{
		attrs.RequestIDKey:               "omni.request.id",
		attrs.OutputModalityKey:          "omni.output.modality",
		attrs.NumInferenceStepsKey:       "omni.diffusion.num_inference_steps",
		attrs.GuidanceScaleKey:           "omni.diffusion.guidance_scale",
		attrs.HeightKey:                  "omni.diffusion.height",
		attrs.WidthKey:                   "omni.diffusion.width",
		attrs.NumFramesKey:               "omni.diffusion.num_frames",
		attrs.PromptKey:                  "omni.request.prompt",
		attrs.StageIDKey:                 "omni.stage.id",
		attrs.StageNameKey:               "omni.stage.name",
		attrs.StageTypeKey:               "omni.stage.type",
		attrs.ReplicaIDKey:               "omni.replica.id",
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
	}
	// The GenAI conventions' keys otelomni sets, whose constants are
	// semconv's: part of the contract too.
	for k, v := range map[attribute.Key]string{
		semconv.GenAIRequestModelKey:      "gen_ai.request.model",
		semconv.GenAIOperationNameKey:     "gen_ai.operation.name",
		semconv.GenAIOutputTypeKey:        "gen_ai.output.type",
		semconv.GenAIProviderNameKey:      "gen_ai.provider.name",
		semconv.ErrorTypeKey:              "error.type",
		semconv.GenAIUsageInputTokensKey:  "gen_ai.usage.input_tokens",
		semconv.GenAIUsageOutputTokensKey: "gen_ai.usage.output_tokens",
	} {
		if string(k) != v {
			t.Errorf("%s, want %s", k, v)
		}
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
}

func TestEnumValues(t *testing.T) {
	for got, want := range map[string]string{
		attrs.ErrorClientAbort: "client_abort", attrs.ErrorClientDisconnect: "client_disconnect",
		attrs.ErrorStageError: "stage_error", attrs.ErrorTimeout: "timeout",
		attrs.StageLLM: "llm", attrs.StageDiffusion: "diffusion", attrs.StageOther: "other",
		attrs.ModalityImage: "image", attrs.ModalityVideo: "video", attrs.ModalityAudio: "audio",
		attrs.ModalityText: "text", attrs.ModalityLatent: "latent",
		semconv.GenAIOperationNameGenerateContent.Value.AsString(): "generate_content",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}
