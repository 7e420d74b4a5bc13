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
	id       string
	spanName string
}

var catalogue = [numPhases]phaseInfo{
	QueueWait:        {"queue_wait", "omni.diffusion.queue_wait"},
	Preprocess:       {"preprocess", "omni.diffusion.preprocess"},
	Exec:             {"exec", "omni.diffusion.exec"},
	KVRecv:           {"kv_recv", "omni.diffusion.kv_recv"},
	Forward:          {"forward", "omni.diffusion.forward"},
	DenoiseStep:      {"denoise_step", "omni.diffusion.denoise_step"},
	VAEDecode:        {"vae_decode", "omni.diffusion.vae_decode"},
	OutputReadyWait:  {"output_ready_wait", "omni.diffusion.output_ready_wait"},
	Postprocess:      {"postprocess", "omni.diffusion.postprocess"},
	LLMQueue:         {"llm.queue", "omni.llm.queue"},
	LLMPrefill:       {"llm.prefill", "omni.llm.prefill"},
	LLMDecode:        {"llm.decode", "omni.llm.decode"},
	transferTx:       {"transfer.tx", "omni.transfer.tx"},
	transferInFlight: {"transfer.in_flight", "omni.transfer.in_flight"},
	transferRxDecode: {"transfer.rx_decode", "omni.transfer.rx_decode"},
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
)
