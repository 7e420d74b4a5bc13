// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package spans

import "strconv"

// Phase identifies one measured phase of a request. The zero Phase is not a
// phase. Phases are listed in the order of the span tree: the diffusion
// phases, then the LLM stage's. The parts of a hand-over between stages
// (omni.transfer.tx, omni.transfer.in_flight, omni.transfer.rx_decode) are
// phases too, made from a [TransferRecord] only.
type Phase uint8

// The diffusion phases, in tree order.
const (
	// QueueWait runs from the scheduler accepting the request to its first
	// move from WAITING to RUNNING; it lies inside exec.
	QueueWait Phase = iota + 1
	// Preprocess is the model's pre-processor (and admission preparation);
	// absent for a model without one.
	Preprocess
	// Exec runs from handing the prepared request to the engine until this
	// output arrives from the engine's output stream.
	Exec
	// KVRecv is the receipt of the upstream stage's KV cache in the
	// worker, inside exec.
	KVRecv
	// Forward is the denoising loop (transformer and scheduler steps),
	// inside exec; measured only with the pipeline profiler on.
	Forward
	// DenoiseStep is one step of the denoising loop, inside forward: one
	// span per step when per-step spans are switched on.
	DenoiseStep
	// VAEDecode turns latents into pixels, inside exec after forward;
	// measured only with the pipeline profiler on.
	VAEDecode
	// OutputReadyWait waits on an asynchronous output (a device-to-host
	// copy) after exec; absent for a synchronous output. Once per output.
	OutputReadyWait
	// Postprocess is the model's post-processor, the move to CPU under CPU
	// offload, and output formatting. Once per output.
	Postprocess
)

// The phases of an LLM stage, in tree order after the diffusion phases,
// each measured only when both its ends were seen.
const (
	// LLMQueue runs from the request entering the stage's queue to the
	// scheduler first running it.
	LLMQueue Phase = iota + Postprocess + 1
	// LLMPrefill runs from the first schedule to the first output token;
	// a re-schedule after a preemption does not move its start.
	LLMPrefill
	// LLMDecode runs from the first output token to the last.
	LLMDecode
)

// The parts of a hand-over, after the LLM phases.
const (
	transferTx Phase = iota + LLMDecode + 1
	transferInFlight
	transferRxDecode
	// numPhases is one more than the largest phase.
	numPhases
)

type phaseInfo struct {
	id        string
	spanName  string
	perOutput bool
}

var catalogue = [numPhases]phaseInfo{
	QueueWait:        {"queue_wait", "omni.diffusion.queue_wait", false},
	Preprocess:       {"preprocess", "omni.diffusion.preprocess", false},
	Exec:             {"exec", "omni.diffusion.exec", false},
	KVRecv:           {"kv_recv", "omni.diffusion.kv_recv", false},
	Forward:          {"forward", "omni.diffusion.forward", false},
	DenoiseStep:      {"denoise_step", "omni.diffusion.denoise_step", false},
	VAEDecode:        {"vae_decode", "omni.diffusion.vae_decode", false},
	OutputReadyWait:  {"output_ready_wait", "omni.diffusion.output_ready_wait", true},
	Postprocess:      {"postprocess", "omni.diffusion.postprocess", true},
	LLMQueue:         {"llm.queue", "omni.llm.queue", false},
	LLMPrefill:       {"llm.prefill", "omni.llm.prefill", false},
	LLMDecode:        {"llm.decode", "omni.llm.decode", false},
	transferTx:       {"transfer.tx", "omni.transfer.tx", false},
	transferInFlight: {"transfer.in_flight", "omni.transfer.in_flight", false},
	transferRxDecode: {"transfer.rx_decode", "omni.transfer.rx_decode", false},
}

// Phases returns every phase in tree order: the diffusion phases, then the
// LLM phases, then the transfer parts.
func Phases() []Phase {
	out := make([]Phase, 0, numPhases-1)
	for p := Phase(1); p < numPhases; p++ {
		out = append(out, p)
	}
	return out
}

// LookupSpanName returns the phase whose span name is name, such as
// "omni.llm.prefill".
func LookupSpanName(name string) (Phase, bool) {
	for p := Phase(1); p < numPhases; p++ {
		if catalogue[p].spanName == name {
			return p, true
		}
	}
	return 0, false
}

// valid reports whether p is a phase of the catalogue.
func (p Phase) valid() bool { return p > 0 && p < numPhases }

// SpanName returns the name of the phase's span, such as
// "omni.diffusion.exec"; "" for a value that is not a phase.
func (p Phase) SpanName() string {
	if !p.valid() {
		return ""
	}
	return catalogue[p].spanName
}

// PerOutput reports whether the phase is measured once per output of a
// streaming request (output-ready wait and postprocess).
func (p Phase) PerOutput() bool { return p.valid() && catalogue[p].perOutput }

// String returns the phase id, the value of the omni.phase attribute (such
// as "queue_wait" or "llm.prefill"), or "Phase(n)" for a value that is not
// a phase.
func (p Phase) String() string {
	if !p.valid() {
		return "Phase(" + strconv.Itoa(int(p)) + ")"
	}
	return catalogue[p].id
}

// Names of the spans that are not phases.
const (
	// RequestSpanName is the span of one request, the root of its tree.
	RequestSpanName = "omni.request"
	// StageSpanName is the span of one stage that served the request, in a
	// multi-stage pipeline.
	StageSpanName = "omni.stage"
	// TransferSpanName is the span of one hand-over between two stages.
	TransferSpanName = "omni.transfer"
	// OutputSpanName is the span of one emitted output at a stage that is
	// not a diffusion stage (an audio chunk, a text chunk).
	OutputSpanName = "omni.output"
	// BatchSpanName is the span of one forward pass that ran several
	// requests together: the root of a trace of its own, linked to each
	// member's exec span.
	BatchSpanName = "omni.batch"
)

// Names of the engine's own spans: a trace of their own, never under a
// request.
const (
	// EngineStartSpanName is the root: the engine from start to ready.
	EngineStartSpanName = "omni.engine.start"
	// EngineLoadSpanName is loading a model's weights.
	EngineLoadSpanName = "omni.engine.load"
	// EngineWarmupSpanName is the warm-up runs before serving.
	EngineWarmupSpanName = "omni.engine.warmup"
	// EngineStageInitSpanName is one stage's initialisation in a
	// multi-stage pipeline.
	EngineStageInitSpanName = "omni.engine.stage_init"
)
