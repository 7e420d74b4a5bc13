// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package plan holds the rules of otelomni's span tree, the one place both
// the live path and the record path call: where each phase hangs
// ([ParentOf]), which intervals make a span (measured, valid, inside the
// parent), and the order of a record's spans ([Diffusion], [LLM],
// [Transfer]). It turns the public records of package spans into
// [Span]s, each with its explicit start and end; otelomni and the
// omnitrace import start them.
package plan

import (
	"errors"
	"math"
	"time"

	"github.com/otelomni/otelomni/spans"
)

// The phases of an LLM stage, as package spans names them, and the parts
// of a hand-over, which it does not export: only a transfer record makes
// them.
const (
	LLMQueue   = spans.LLMQueue
	LLMPrefill = spans.LLMPrefill
	LLMDecode  = spans.LLMDecode
)

const (
	TransferTx spans.Phase = spans.LLMDecode + 1 + iota
	TransferInFlight
	TransferRxDecode
)

// NumPhases is the size of a table indexed by spans.Phase: one more than
// the largest phase (index 0 is unused).
const NumPhases = int(TransferRxDecode) + 1

// PerOutput reports whether p is measured once per output of a streaming
// request: output-ready wait and postprocess.
func PerOutput(p spans.Phase) bool { return p == spans.OutputReadyWait || p == spans.Postprocess }

// IsLLM reports whether p is a phase of an LLM stage.
func IsLLM(p spans.Phase) bool { return p >= LLMQueue && p <= LLMDecode }

// Valid reports whether p is a phase of the catalogue.
func Valid(p spans.Phase) bool { return p > 0 && int(p) < NumPhases }

// The range of times a span can carry, as an Interval's Validate checks
// it: OTLP encodes a time as nanoseconds since 1970, and the OpenTelemetry
// Go SDK converts through int64 nanoseconds.
var (
	// MinTime is 1970-01-01T00:00:00Z.
	MinTime = time.Unix(0, 0).UTC()
	// MaxTime is 2262-04-11T23:47:16.854775807Z.
	MaxTime = time.Unix(0, math.MaxInt64).UTC()
)

// InRange reports whether t lies in the range a span can carry, from
// MinTime to MaxTime, both included.
func InRange(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// Phases returns every phase of the catalogue in tree order: the diffusion
// phases, the LLM phases, then a transfer's parts.
func Phases() []spans.Phase {
	out := make([]spans.Phase, 0, NumPhases-1)
	for p := spans.Phase(1); int(p) < NumPhases; p++ {
		out = append(out, p)
	}
	return out
}

// LookupSpanName returns the phase whose span is named name, such as
// "omni.llm.prefill".
func LookupSpanName(name string) (spans.Phase, bool) {
	for p := spans.Phase(1); int(p) < NumPhases; p++ {
		if p.SpanName() == name {
			return p, true
		}
	}
	return 0, false
}

// Names of the spans that are neither a request, a stage nor a phase.
const (
	// TransferSpanName is the span of one hand-over between two stages.
	TransferSpanName = "omni.transfer"
	// OutputSpanName is the span of one emitted output at a stage that is
	// not a diffusion stage (an audio chunk, a text chunk).
	OutputSpanName = "omni.output"
	// BatchSpanName is the span of one forward pass that ran several
	// requests together: the root of a trace of its own.
	BatchSpanName = "omni.batch"
	// EngineStartSpanName is the root of an engine's own trace: from its
	// start to ready.
	EngineStartSpanName = "omni.engine.start"
	// EngineLoadSpanName is loading a model's weights.
	EngineLoadSpanName = "omni.engine.load"
	// EngineWarmupSpanName is the warm-up runs before serving.
	EngineWarmupSpanName = "omni.engine.warmup"
	// EngineStageInitSpanName is one stage's initialisation.
	EngineStageInitSpanName = "omni.engine.stage_init"
)

// Parent says which span a phase's span hangs under.
type Parent uint8

const (
	// Scope is the request span in a single-stage pipeline, or the stage
	// span in a multi-stage one.
	Scope Parent = iota + 1
	// UnderExec is the exec span.
	UnderExec
	// UnderForward is the forward span.
	UnderForward
	// UnderTransfer is the transfer span.
	UnderTransfer
)

// String returns the parent's name as the docs write it.
func (p Parent) String() string {
	switch p {
	case Scope:
		return "scope"
	case UnderExec:
		return "exec"
	case UnderForward:
		return "forward"
	case UnderTransfer:
		return "transfer"
	}
	return "Parent(?)"
}

// ParentOf returns where phase p's span hangs in the tree; 0 for a value
// that is not a phase.
func ParentOf(p spans.Phase) Parent {
	switch {
	case !Valid(p):
		return 0
	case p == spans.KVRecv || p == spans.Forward || p == spans.VAEDecode:
		return UnderExec
	case p == spans.DenoiseStep:
		return UnderForward
	case p >= TransferTx:
		return UnderTransfer
	}
	return Scope
}

// Within reports whether iv lies inside [start, end]; a zero end means the
// parent is still open, so only the start is checked.
func Within(iv spans.Interval, start, end time.Time) bool {
	if iv.Start().Before(start) {
		return false
	}
	return end.IsZero() || !iv.End().After(end)
}

// Errors of a record beyond a bad interval.
var (
	// ErrOutputsConflict: a record sets both the single-output fields
	// (OutputReadyWait, Postprocess) and Outputs. The per-output entries
	// are emitted and the single-output fields are not.
	ErrOutputsConflict = errors.New("both the single-output fields and Outputs are set")
	// ErrFailedNotMeasured: a record's Err names a phase the record did
	// not measure, so no span carries the failure; end the request with
	// the error to mark the request span.
	ErrFailedNotMeasured = errors.New("the record's error names a phase it did not measure")
	// ErrClockSkew: a part computed across two hosts' clocks came out
	// negative: the clocks disagree by more than the part lasted. The part
	// is left out, never exported negative.
	ErrClockSkew = errors.New("negative across two hosts' clocks (clock skew)")
	// ErrNoTransferPart: no part of a transfer was measured validly, so
	// there is no interval to give its span.
	ErrNoTransferPart = errors.New("no part of the transfer was measured")
)

// Span is one span to emit for a measured, valid phase.
type Span struct {
	Phase      spans.Phase
	Start, End time.Time
	// Output is the output index of a per-output phase of a streaming
	// request, or -1.
	Output int
	// Final is omni.output.final when Output >= 0.
	Final bool
	// Step is the step of a denoise step, or -1.
	Step int
	// Err, when not nil, marks the span failed.
	Err error
}

// Interval returns the span's interval.
func (s *Span) Interval() spans.Interval { return spans.Between(s.Start, s.End) }

// Check returns the reason interval iv of a phase makes no span, or nil:
// a bad interval (spans.Interval.Validate).
func Check(p spans.Phase, output, step int, iv spans.Interval) error {
	if err := iv.Validate(); err != nil {
		return &spans.PhaseError{Phase: p, Output: output, Step: step, Interval: iv, Err: err}
	}
	return nil
}

// one appends the span of phase p when iv is measured and valid, and
// reports it in errs when it is bad.
func one(dst []Span, errs []error, p spans.Phase, iv spans.Interval, output int, final bool, step int) ([]Span, []error) {
	if !iv.Measured() {
		return dst, errs
	}
	if err := Check(p, output, step, iv); err != nil {
		return dst, append(errs, err)
	}
	return append(dst, Span{Phase: p, Start: iv.Start(), End: iv.End(), Output: output, Final: final, Step: step}), errs
}

func planned(ps []Span, p spans.Phase) bool {
	for i := range ps {
		if ps[i].Phase == p {
			return true
		}
	}
	return false
}

// Options tune [Diffusion].
type Options struct {
	// DenoiseSteps plans one span per measured step. Off by default: a
	// 50-step request would make 50 more spans.
	DenoiseSteps bool
}

// Diffusion appends to dst, in tree order, one [Span] per measured and
// valid phase of r, and returns the extended slice. Phases that were not
// measured are left out. A bad measurement is left out too and reported in
// the returned error (a join of *spans.PhaseError, one per bad phase); the
// other phases are still planned. A part of exec (kv_recv, forward,
// vae_decode) must lie inside the record's exec when the record measured
// one, and a denoise step inside forward; otherwise it is reported as
// spans.ErrOutsideParent.
//
// Parents come before their children in the result, so a caller can start
// each span as it goes.
func Diffusion(dst []Span, r *spans.DiffusionRecord, opts Options) ([]Span, error) {
	if r == nil {
		return dst, nil
	}
	var errs []error
	failed := r.FailedPhase
	if failed == 0 {
		failed = spans.Exec
	}
	add := func(p spans.Phase, iv spans.Interval, output int, final bool, step int) bool {
		n := len(dst)
		dst, errs = one(dst, errs, p, iv, output, final, step)
		if len(dst) > n && r.Err != nil && p == failed {
			dst[n].Err = r.Err
		}
		return len(dst) > n
	}
	inside := func(p spans.Phase, iv, parent spans.Interval, parentOK bool, step int) {
		if iv.Measured() && parentOK && iv.Validate() == nil && !Within(iv, parent.Start(), parent.End()) {
			errs = append(errs, &spans.PhaseError{Phase: p, Output: -1, Step: step, Interval: iv, Err: spans.ErrOutsideParent})
			return
		}
		add(p, iv, -1, false, step)
	}
	add(spans.QueueWait, r.QueueWait, -1, false, -1)
	add(spans.Preprocess, r.Preprocess, -1, false, -1)
	execOK := add(spans.Exec, r.Exec, -1, false, -1)
	inside(spans.KVRecv, r.KVRecv, r.Exec, execOK, -1)
	n := len(dst)
	inside(spans.Forward, r.Forward, r.Exec, execOK, -1)
	forwardOK := len(dst) > n
	if opts.DenoiseSteps {
		for i, iv := range r.DenoiseSteps {
			inside(spans.DenoiseStep, iv, r.Forward, forwardOK, i)
		}
	}
	inside(spans.VAEDecode, r.VAEDecode, r.Exec, execOK, -1)
	if len(r.Outputs) > 0 {
		if r.OutputReadyWait.Measured() || r.Postprocess.Measured() {
			errs = append(errs, &spans.PhaseError{Phase: spans.Postprocess, Output: -1, Step: -1, Err: ErrOutputsConflict})
		}
		for i, o := range r.Outputs {
			add(spans.OutputReadyWait, o.ReadyWait, i, o.Final, -1)
			add(spans.Postprocess, o.Postprocess, i, o.Final, -1)
		}
	} else {
		add(spans.OutputReadyWait, r.OutputReadyWait, -1, false, -1)
		add(spans.Postprocess, r.Postprocess, -1, false, -1)
	}
	if r.Err != nil && !planned(dst, failed) {
		errs = append(errs, &spans.PhaseError{Phase: failed, Output: -1, Step: -1, Err: ErrFailedNotMeasured})
	}
	return dst, errors.Join(errs...)
}

// The phases expected in a tree, in tree order: directly under a diffusion
// or an LLM scope, under a phase span, and under a transfer. The views
// list them, a phase not measured shown as such.
var (
	diffusionScope = []spans.Phase{spans.QueueWait, spans.Preprocess, spans.Exec, spans.OutputReadyWait, spans.Postprocess}
	llmScope       = []spans.Phase{LLMQueue, LLMPrefill, LLMDecode}
	underExec      = []spans.Phase{spans.KVRecv, spans.Forward, spans.VAEDecode}
	underForward   = []spans.Phase{spans.DenoiseStep}
	transferParts  = []spans.Phase{TransferTx, TransferInFlight, TransferRxDecode}
)

// ScopePhases are the phases expected directly under a scope: an LLM
// stage's when llm, else a diffusion request's or stage's.
func ScopePhases(llm bool) []spans.Phase {
	if llm {
		return llmScope
	}
	return diffusionScope
}

// NestedPhases are the phases expected under the span of phase p; nil for
// a phase that holds none.
func NestedPhases(p spans.Phase) []spans.Phase {
	switch p {
	case spans.Exec:
		return underExec
	case spans.Forward:
		return underForward
	}
	return nil
}

// TransferParts are the phases expected under a transfer span.
func TransferParts() []spans.Phase { return transferParts }
