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

	// Reconstructed marks records whose start times were placed by the
	// documented phase order rather than read from a clock (records rebuilt
	// from durations). Their spans carry omni.timing.reconstructed = true.
	Reconstructed bool
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
// phases are still planned.
//
// Parents come before their children in the result, so a caller can start
// each span as it goes.
func (r *DiffusionRecord) Plan(dst []PlannedSpan, opts PlanOptions) ([]PlannedSpan, error) {
	if r == nil {
		return dst, nil
	}
	var errs []error
	add := func(p Phase, iv Interval, output int, final bool, step int) {
		dst, errs = planOne(dst, errs, p, iv, output, final, step)
	}
	add(QueueWait, r.QueueWait, -1, false, -1)
	add(Preprocess, r.Preprocess, -1, false, -1)
	add(Exec, r.Exec, -1, false, -1)
	add(KVRecv, r.KVRecv, -1, false, -1)
	add(Forward, r.Forward, -1, false, -1)
	if opts.DenoiseSteps {
		for i, iv := range r.DenoiseSteps {
			add(DenoiseStep, iv, -1, false, i)
		}
	}
	add(VAEDecode, r.VAEDecode, -1, false, -1)
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
	return dst, errors.Join(errs...)
}
