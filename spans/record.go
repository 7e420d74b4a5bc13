package spans

import (
	"errors"
	"time"
)

// DiffusionRecord is the timing of one request at one diffusion stage, as an
// engine that timed itself reports it. Every interval is optional: leave a
// field at its zero value when the phase was not measured.
//
// A request that yields one output uses OutputReadyWait and Postprocess; a
// streaming request that yields several uses Outputs instead, one entry per
// output, so that each output's wait stays its own.
type DiffusionRecord struct {
	QueueWait  Interval
	Preprocess Interval
	Exec       Interval
	KVRecv     Interval
	Forward    Interval
	// DenoiseSteps holds step i at index i. Spans for them are made only
	// when per-step spans are switched on (they are off by default).
	DenoiseSteps []Interval
	VAEDecode    Interval

	OutputReadyWait Interval
	Postprocess     Interval
	Outputs         []OutputTiming

	// StepsRun is the number of denoising steps the request actually ran,
	// when the engine reports it: it can differ from the number asked (an
	// early exit). The exec span then carries the mean step duration, exec
	// divided by StepsRun. 0 when not reported.
	StepsRun int

	// Err, when not nil, is why the request failed, during the phase
	// FailedPhase (exec when FailedPhase is 0): that phase's span gets
	// status Error and error.type, as on the live path. End the request
	// with the same error to mark the request span too.
	Err         error
	FailedPhase Phase

	// Reconstructed marks records whose start times were placed by the
	// documented phase order rather than read from a clock (records rebuilt
	// from durations). Their spans carry omni.timing.reconstructed = true.
	Reconstructed bool
}

// Output identifies one output of a streaming request: its index, from 0,
// and whether it is the output that finishes the stage.
type Output struct {
	Index int
	Final bool
}

// OutputTiming is the timing of one output of a streaming request. Its index
// is its position in [DiffusionRecord.Outputs].
type OutputTiming struct {
	// ReadyWait is the wait on this output when it was asynchronous; leave it
	// unset for a synchronous output, which never waits.
	ReadyWait Interval
	// Postprocess is this output's post-processing.
	Postprocess Interval
	// Final marks the output that finishes the stage.
	Final bool
}

// ErrOutputsConflict is returned when a record sets both the single-output
// fields (OutputReadyWait, Postprocess) and Outputs. The per-output entries
// are emitted and the single-output fields are not.
var ErrOutputsConflict = errors.New("both the single-output fields and Outputs are set")

// PlannedSpan is one span to emit for a measured, valid phase.
type PlannedSpan struct {
	Phase      Phase
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

// PlanOptions tune [DiffusionRecord.Plan].
type PlanOptions struct {
	// DenoiseSteps plans one span per measured step. Off by default: a
	// 50-step request would make 50 more spans.
	DenoiseSteps bool
}

// Plan appends to dst, in tree order, one [PlannedSpan] per measured and
// valid phase of r, and returns the extended slice. Phases that were not
// measured are left out. A bad measurement is left out too and reported in
// the returned error (a join of [*PhaseError], one per bad phase); the other
// phases are still planned. A part of exec (kv_recv, forward, vae_decode)
// must lie inside the record's exec when the record measured one, and a
// denoise step inside forward; otherwise it is reported as
// [ErrOutsideParent].
//
// Parents come before their children in the result, so a caller can start
// each span as it goes.
func (r *DiffusionRecord) Plan(dst []PlannedSpan, opts PlanOptions) ([]PlannedSpan, error) {
	if r == nil {
		return dst, nil
	}
	var errs []error
	failed := r.FailedPhase
	if failed == 0 {
		failed = Exec
	}
	add := func(p Phase, iv Interval, output int, final bool, step int) bool {
		n := len(dst)
		dst, errs = planOne(dst, errs, p, iv, output, final, step)
		if len(dst) > n && r.Err != nil && p == failed {
			dst[n].Err = r.Err
		}
		return len(dst) > n
	}
	inside := func(p Phase, iv, parent Interval, parentOK bool, step int) {
		if iv.measured && parentOK && iv.Validate() == nil && !iv.Within(parent.start, parent.end) {
			errs = append(errs, &PhaseError{Phase: p, Output: -1, Step: step, Interval: iv, Err: ErrOutsideParent})
			return
		}
		add(p, iv, -1, false, step)
	}
	add(QueueWait, r.QueueWait, -1, false, -1)
	add(Preprocess, r.Preprocess, -1, false, -1)
	execOK := add(Exec, r.Exec, -1, false, -1)
	inside(KVRecv, r.KVRecv, r.Exec, execOK, -1)
	n := len(dst)
	inside(Forward, r.Forward, r.Exec, execOK, -1)
	forwardOK := len(dst) > n
	if opts.DenoiseSteps {
		for i, iv := range r.DenoiseSteps {
			inside(DenoiseStep, iv, r.Forward, forwardOK, i)
		}
	}
	inside(VAEDecode, r.VAEDecode, r.Exec, execOK, -1)
	if len(r.Outputs) > 0 {
		if r.OutputReadyWait.measured || r.Postprocess.measured {
			errs = append(errs, &PhaseError{Phase: Postprocess, Output: -1, Step: -1, Err: ErrOutputsConflict})
		}
		for i, o := range r.Outputs {
			add(OutputReadyWait, o.ReadyWait, i, o.Final, -1)
			add(Postprocess, o.Postprocess, i, o.Final, -1)
		}
	} else {
		add(OutputReadyWait, r.OutputReadyWait, -1, false, -1)
		add(Postprocess, r.Postprocess, -1, false, -1)
	}
	if r.Err != nil && !planned(dst, failed) {
		errs = append(errs, &PhaseError{Phase: failed, Output: -1, Step: -1, Err: ErrFailedNotMeasured})
	}
	return dst, errors.Join(errs...)
}

// ErrFailedNotMeasured is reported when a record's Err names a phase the
// record did not measure: there is no span to mark failed.
var ErrFailedNotMeasured = errors.New("the record's error names a phase it did not measure")

func planned(ps []PlannedSpan, p Phase) bool {
	for i := range ps {
		if ps[i].Phase == p {
			return true
		}
	}
	return false
}
