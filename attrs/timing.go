// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys of spans imported from what an engine wrote (omnitrace import): how
// exact an imported duration is, and what its writer did to it.
const (
	// ResolutionKey is the step of an imported duration as its writer
	// wrote it (double, milliseconds): 1 for int()-truncated milliseconds,
	// 10 for seconds with two decimals. Absent when written at full
	// precision.
	ResolutionKey = attribute.Key("omni.timing.resolution_ms")
	// SummedKey marks a duration its writer added up over the request's
	// outputs (diffusion values) or the transfer's chunks (bytes and send
	// time): the parts cannot be told apart (bool).
	SummedKey = attribute.Key("omni.timing.summed")
	// UnmeasuredZeroKey lists the fields of a scope whose 0 was read as "not
	// measured", because their writer puts 0 when it measured nothing
	// (string array).
	UnmeasuredZeroKey = attribute.Key("omni.timing.unmeasured_zero")
	// LengthUnmeasuredKey marks an imported stage span whose own length its
	// record did not give (no generation time, no phase measured): the span
	// holds the stage's attributes and its hand-over, and its duration is
	// no measurement. Tools show its length as not measured, never 0
	// (bool).
	LengthUnmeasuredKey = attribute.Key("omni.timing.length_unmeasured")
	// TransferResolutionKey is ResolutionKey of the hand-over into a stage,
	// on the stage's span (double, milliseconds).
	TransferResolutionKey = attribute.Key("omni.timing.transfer_resolution_ms")
	// TransferSummedKey is SummedKey of the hand-over into a stage, on the
	// stage's span (bool).
	TransferSummedKey = attribute.Key("omni.timing.transfer_summed")
	// ImportSourceKey names the form a request was imported from:
	// "summary", "log", "events" or "jsonl" (string); the forms merged,
	// joined by "+" ("summary+log"), for a request given in several.
	ImportSourceKey = attribute.Key("omni.import.source")
)
