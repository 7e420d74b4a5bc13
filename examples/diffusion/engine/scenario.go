// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package engine is a simulated diffusion serving engine, instrumented with
// otelomni: no model weights, realistic sleeps and a little CPU work. Its
// scenarios cover every branch of the phase model: a model with and without
// a pre-processor, synchronous and asynchronous outputs, streaming requests,
// the pipeline profiler on and off, upstream KV or not, a request aborted
// before admission, a failed request, and a queue wait measured as 0.
package engine

import (
	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// Output is how the engine hands one output back.
type Output int

const (
	// Sync outputs are ready at once: they have no output-ready wait.
	Sync Output = iota
	// Async outputs are copied device-to-host through shared memory, and
	// the server waits for that copy: an output-ready wait.
	Async
)

// Scenario is one kind of request.
type Scenario struct {
	Name     string
	Model    string
	Modality string
	Steps    int
	Guidance float64
	Height   int
	Width    int
	Frames   int
	// Preprocessor: the model has one, so preprocess is measured.
	Preprocessor bool
	// Profiler: the pipeline profiler is on, so forward and VAE decode are
	// measured.
	Profiler bool
	// UpstreamKV: the request receives an upstream stage's KV cache.
	UpstreamKV bool
	// Outputs lists the request's outputs; more than one is a streaming
	// request, whose last output is the final one.
	Outputs []Output
	// AbortBeforeAdmission: the client goes away before the scheduler
	// admits the request.
	AbortBeforeAdmission bool
	// Fail: the denoising loop fails (the stage errors).
	Fail bool
	// Priority: admitted in the same scheduler step, so its queue wait is
	// a measured 0.
	Priority bool
}

// Scenarios are the demo's request kinds, covering every branch of the
// phase model (docs/phases.md): phases measured, not measured and measured
// as 0, streaming outputs, aborts and failures.
var Scenarios = []Scenario{
	{Name: "t2i", Model: "Qwen/Qwen-Image", Modality: attrs.ModalityImage, Steps: 20, Guidance: 4, Height: 1024, Width: 1024,
		Outputs: []Output{Sync}},
	{Name: "i2i-profiled", Model: "Qwen/Qwen-Image-Edit", Modality: attrs.ModalityImage, Steps: 20, Guidance: 4, Height: 1024, Width: 1024,
		Preprocessor: true, Profiler: true, Outputs: []Output{Async}},
	{Name: "t2v-streaming", Model: "Wan-AI/Wan2.2-T2V-A14B", Modality: attrs.ModalityVideo, Steps: 16, Guidance: 5, Height: 480, Width: 832, Frames: 33,
		Preprocessor: true, Profiler: true, Outputs: []Output{Async, Async, Sync}},
	{Name: "t2i-upstream-kv", Model: "ByteDance-Seed/BAGEL-7B-MoT", Modality: attrs.ModalityImage, Steps: 20, Guidance: 4, Height: 1024, Width: 1024,
		Profiler: true, UpstreamKV: true, Outputs: []Output{Sync}},
	{Name: "t2i-turbo-zero-wait", Model: "stabilityai/sdxl-turbo", Modality: attrs.ModalityImage, Steps: 2, Guidance: 0, Height: 512, Width: 512,
		Priority: true, Outputs: []Output{Sync}},
	{Name: "i2i-aborted", Model: "Qwen/Qwen-Image-Edit", Modality: attrs.ModalityImage, Steps: 20, Guidance: 4, Height: 1024, Width: 1024,
		Preprocessor: true, AbortBeforeAdmission: true, Outputs: []Output{Sync}},
	{Name: "t2i-failed", Model: "Qwen/Qwen-Image", Modality: attrs.ModalityImage, Steps: 20, Guidance: 4, Height: 2048, Width: 2048,
		Profiler: true, Fail: true, Outputs: []Output{Sync}},
}

// Lookup returns the scenario named name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Expect returns, per phase, how many spans the scenario must make (0: the
// phase must be absent), and the error.type of the request ("" when it
// succeeds). It is what the end-to-end tests check a trace against.
func (s Scenario) Expect() (map[spans.Phase]int, string) {
	want := map[spans.Phase]int{}
	for p := spans.QueueWait; p <= spans.Postprocess; p++ { // the diffusion phases
		want[p] = 0
	}
	if s.Preprocessor {
		want[spans.Preprocess] = 1
	}
	if s.AbortBeforeAdmission {
		return want, attrs.ErrorClientAbort
	}
	want[spans.Exec] = 1
	want[spans.QueueWait] = 1
	if s.UpstreamKV {
		want[spans.KVRecv] = 1
	}
	if s.Profiler {
		want[spans.Forward] = 1
	}
	if s.Fail {
		return want, attrs.ErrorStageError
	}
	if s.Profiler {
		want[spans.VAEDecode] = 1
	}
	for _, o := range s.Outputs {
		if o == Async {
			want[spans.OutputReadyWait]++
		}
		want[spans.Postprocess]++
	}
	return want, ""
}

// Models returns the models the scenarios use, each once, in order.
func Models() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range Scenarios {
		if !seen[s.Model] {
			seen[s.Model] = true
			out = append(out, s.Model)
		}
	}
	return out
}
