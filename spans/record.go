// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package spans

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
