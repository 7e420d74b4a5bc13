package spans

import "strconv"

// Phase identifies one measured phase of a request. The zero Phase is not a
// phase. Phases are listed in the order of the span tree.
type Phase uint8

// The diffusion phases, in tree order.
const (
	// QueueWait is the scheduler's wait before the request first runs.
	QueueWait Phase = iota + 1
	// Preprocess is the model's pre-processor and admission preparation.
	Preprocess
	// Exec runs from hand-over to the engine until the output arrives.
	Exec
	// KVRecv is the receipt of the upstream stage's KV cache, inside exec.
	KVRecv
	// Forward is the denoising loop, inside exec.
	Forward
	// DenoiseStep is one step of the denoising loop, inside forward.
	DenoiseStep
	// VAEDecode turns latents into pixels, inside exec after forward.
	VAEDecode
	// OutputReadyWait waits on an asynchronous output after exec.
	OutputReadyWait
	// Postprocess is the model's post-processor and output formatting.
	Postprocess
)

// The LLM stage phases.
const (
	// LLMQueue runs from the queued event to the scheduled event.
	LLMQueue Phase = iota + 10
	// LLMPrefill runs from the first schedule to the first token.
	LLMPrefill
	// LLMDecode runs from the first token to the last token.
	LLMDecode
)

// The parts of a hand-over between two stages.
const (
	// TransferTx is the sender's serialise-and-send time.
	TransferTx Phase = iota + 13
	// TransferInFlight runs from the end of sending to the start of receipt.
	TransferInFlight
	// TransferRxDecode is the receiver's receive-and-decode time.
	TransferRxDecode
)

// NumPhases is the size of a table indexed by [Phase]: one more than the
// largest phase (index 0 is unused).
const NumPhases = int(TransferRxDecode) + 1

// Parent says which span a phase's span hangs under.
type Parent uint8

const (
	// ParentScope is the request span in a single-stage pipeline, or the
	// stage span in a multi-stage one.
	ParentScope Parent = iota + 1
	// ParentExec is the exec span.
	ParentExec
	// ParentForward is the forward span.
	ParentForward
	// ParentTransfer is the transfer span.
	ParentTransfer
)

// String returns the parent's name as the docs write it.
func (p Parent) String() string {
	switch p {
	case ParentScope:
		return "scope"
	case ParentExec:
		return "exec"
	case ParentForward:
		return "forward"
	case ParentTransfer:
		return "transfer"
	}
	return "Parent(" + strconv.Itoa(int(p)) + ")"
}

type phaseInfo struct {
	id        string
	spanName  string
	parent    Parent
	perOutput bool
	interval  string
}

var catalogue = [NumPhases]phaseInfo{
	QueueWait: {"queue_wait", "omni.diffusion.queue_wait", ParentScope, false,
		"from the scheduler accepting the request to its first move from WAITING to RUNNING; lies inside exec"},
	Preprocess: {"preprocess", "omni.diffusion.preprocess", ParentScope, false,
		"the model's pre-processor (and admission preparation) runs; absent for a model without one"},
	Exec: {"exec", "omni.diffusion.exec", ParentScope, false,
		"from handing the prepared request to the engine until this output arrives from the engine's output stream"},
	KVRecv: {"kv_recv", "omni.diffusion.kv_recv", ParentExec, false,
		"receiving the upstream stage's KV cache in the worker; inside exec"},
	Forward: {"forward", "omni.diffusion.forward", ParentExec, false,
		"the denoising loop (transformer and scheduler steps); inside exec, measured only with the pipeline profiler on"},
	DenoiseStep: {"denoise_step", "omni.diffusion.denoise_step", ParentForward, false,
		"one step of the denoising loop; inside forward, one span per step when per-step spans are switched on"},
	VAEDecode: {"vae_decode", "omni.diffusion.vae_decode", ParentExec, false,
		"latents to pixels; inside exec after forward, measured only with the pipeline profiler on"},
	OutputReadyWait: {"output_ready_wait", "omni.diffusion.output_ready_wait", ParentScope, true,
		"waiting on an asynchronous output (device-to-host copy) after exec; absent for a synchronous output"},
	Postprocess: {"postprocess", "omni.diffusion.postprocess", ParentScope, true,
		"the model's post-processor, the move to CPU under CPU offload, and output formatting"},
	LLMQueue: {"llm.queue", "omni.llm.queue", ParentScope, false,
		"from the request's queued event to its first scheduled event"},
	LLMPrefill: {"llm.prefill", "omni.llm.prefill", ParentScope, false,
		"from the first scheduled event to the first token; a re-schedule after preemption does not move its start"},
	LLMDecode: {"llm.decode", "omni.llm.decode", ParentScope, false,
		"from the first token to the last token"},
	TransferTx: {"transfer.tx", "omni.transfer.tx", ParentTransfer, false,
		"the sending stage serialises and sends the payload"},
	TransferInFlight: {"transfer.in_flight", "omni.transfer.in_flight", ParentTransfer, false,
		"from the end of sending to the start of receipt; computed across two hosts' clocks"},
	TransferRxDecode: {"transfer.rx_decode", "omni.transfer.rx_decode", ParentTransfer, false,
		"the receiving stage receives and decodes the payload"},
}

// Phases returns every phase in tree order: the diffusion phases, then the
// LLM phases, then the transfer parts.
func Phases() []Phase {
	out := make([]Phase, 0, NumPhases-1)
	for p := Phase(1); int(p) < NumPhases; p++ {
		out = append(out, p)
	}
	return out
}

// Lookup returns the phase whose id (the value of omni.phase, such as
// "queue_wait" or "llm.prefill") is id.
func Lookup(id string) (Phase, bool) {
	for p := Phase(1); int(p) < NumPhases; p++ {
		if catalogue[p].id == id {
			return p, true
		}
	}
	return 0, false
}

// LookupSpanName returns the phase whose span name is name.
func LookupSpanName(name string) (Phase, bool) {
	for p := Phase(1); int(p) < NumPhases; p++ {
		if catalogue[p].spanName == name {
			return p, true
		}
	}
	return 0, false
}

// Valid reports whether p is a phase of the catalogue.
func (p Phase) Valid() bool { return p > 0 && int(p) < NumPhases }

// ID returns the phase id, the value of the omni.phase attribute. It is ""
// for an invalid phase.
func (p Phase) ID() string {
	if !p.Valid() {
		return ""
	}
	return catalogue[p].id
}

// SpanName returns the name of the phase's span, such as
// "omni.diffusion.exec". It is "" for an invalid phase.
func (p Phase) SpanName() string {
	if !p.Valid() {
		return ""
	}
	return catalogue[p].spanName
}

// Parent returns where the phase's span hangs in the tree. It is 0 for an
// invalid phase.
func (p Phase) Parent() Parent {
	if !p.Valid() {
		return 0
	}
	return catalogue[p].parent
}

// PerOutput reports whether the phase is measured once per output of a
// streaming request (output-ready wait and postprocess).
func (p Phase) PerOutput() bool { return p.Valid() && catalogue[p].perOutput }

// Interval states, in one line, the interval the phase measures.
func (p Phase) Interval() string {
	if !p.Valid() {
		return ""
	}
	return catalogue[p].interval
}

// String returns the phase id, or "Phase(n)" for an invalid phase.
func (p Phase) String() string {
	if !p.Valid() {
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
