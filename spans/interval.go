// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Interval is the measured interval of one phase. Its zero value means "not
// measured", which is never the same as "measured as 0": build a measured
// interval with [Between].
type Interval struct {
	start, end time.Time
	measured   bool
}

// The range of times an exported span can carry: OTLP encodes a time as
// nanoseconds since 1970 in an unsigned 64-bit integer, and the
// OpenTelemetry Go SDK converts through int64 nanoseconds, so a time before
// 1970 or after 2262-04-11 would reach a backend as a different time, often
// making a span end before it starts.
const (
	// minUnixNano is the earliest time a span can carry:
	// 1970-01-01T00:00:00Z.
	minUnixNano = 0
	// maxUnixNano is the latest: 2262-04-11T23:47:16.854775807Z.
	maxUnixNano = math.MaxInt64
)

// inRange reports whether t lies in the range a span can carry: from
// 1970-01-01T00:00:00Z to 2262-04-11T23:47:16.854775807Z, both included.
func inRange(t time.Time) bool {
	return !t.Before(time.Unix(0, minUnixNano)) && !t.After(time.Unix(0, maxUnixNano))
}

// Between returns the measured interval from start to end. Equal ends make
// a measured 0, which becomes a zero-length span. An end before the start,
// a zero time or a time out of range is kept as given and reported by
// [Interval.Validate].
//
// When both times carry a monotonic clock reading (they came from time.Now in
// this process), the end is re-based on the start plus the monotonic elapsed
// time, so a step of the wall clock between the two cannot make the exported
// span negative.
func Between(start, end time.Time) Interval {
	if monotonic(start) && monotonic(end) {
		// Sub uses the monotonic readings; Add carries the start's wall
		// time forward by exactly that much.
		end = start.Add(end.Sub(start))
	}
	return Interval{start: start, end: end, measured: true}
}

// monotonic reports whether t carries a monotonic clock reading: Round(0)
// strips it, and nothing else.
func monotonic(t time.Time) bool { return t != t.Round(0) }

// Measured reports whether the interval was measured.
func (iv Interval) Measured() bool { return iv.measured }

// Start returns the start of the interval; the zero time when not measured.
func (iv Interval) Start() time.Time { return iv.start }

// End returns the end of the interval; the zero time when not measured.
func (iv Interval) End() time.Time { return iv.end }

// Validate returns nil for an interval that was not measured or that is a
// valid measurement, [ErrZeroTime] when either end is the zero time,
// [ErrOutOfRange] when either end lies outside the range a span can carry
// (1970 to 2262-04-11), and
// [ErrEndBeforeStart] when the end lies before the start.
func (iv Interval) Validate() error {
	if !iv.measured {
		return nil
	}
	if iv.start.IsZero() || iv.end.IsZero() {
		return ErrZeroTime
	}
	if !inRange(iv.start) || !inRange(iv.end) {
		return ErrOutOfRange
	}
	if iv.end.Before(iv.start) {
		return ErrEndBeforeStart
	}
	return nil
}

// String formats the interval for logs: "not measured", or its start and
// duration.
func (iv Interval) String() string {
	if !iv.measured {
		return "not measured"
	}
	return iv.start.Format(time.RFC3339Nano) + " +" + iv.end.Sub(iv.start).String()
}

// The reasons a measurement makes no span, wrapped in a [*PhaseError]:
// match them with errors.Is.
var (
	// ErrEndBeforeStart: the interval's end lies before its start.
	ErrEndBeforeStart = errors.New("end before start")
	// ErrZeroTime: an end of the interval is the zero time.Time, which is
	// not a measurement (the SDK would read it as "now").
	ErrZeroTime = errors.New("zero time.Time")
	// ErrOutOfRange: an end of the interval lies before 1970 or after
	// 2262-04-11, which no exported span can carry.
	ErrOutOfRange = errors.New("time out of the range a span can carry (1970 to 2262-04-11)")
	// ErrOutsideParent: the interval does not lie inside the span it
	// would hang under (a part of exec outside exec, a phase that starts
	// before its request).
	ErrOutsideParent = errors.New("outside the interval of its parent span")
	// ErrDuplicatePhase: the phase was already measured for this request
	// (a second exec, say); a phase is measured once per request, once per
	// output for a per-output phase, once per step for a denoise step.
	ErrDuplicatePhase = errors.New("already measured for this request")
)

// PhaseError reports a phase, or an output (an omni.output span), that
// produced no span because its measurement was bad or contradicts the span
// tree. The other phases of the same record are still emitted.
type PhaseError struct {
	// Phase is the phase whose measurement was bad; 0 for an omni.output
	// span, whose index is Output.
	Phase Phase
	// Output is the 0-based output index for a per-output phase of a
	// streaming request or an omni.output span, or -1.
	Output int
	// Step is the 0-based step of a denoise step, or -1.
	Step int
	// Interval is the bad measurement.
	Interval Interval
	// Err is the reason: [ErrEndBeforeStart], [ErrZeroTime],
	// [ErrOutOfRange], [ErrOutsideParent], [ErrDuplicatePhase] or another
	// error of the record.
	Err error
}

// Error names the phase (or output) and the reason.
func (e *PhaseError) Error() string {
	if e.Phase == 0 {
		return "omni: output " + strconv.Itoa(e.Output) + ": " + reason(e.Err, e.Interval) + "; no span emitted"
	}
	where := e.Phase.String()
	if e.Output >= 0 {
		where += " (output " + strconv.Itoa(e.Output) + ")"
	}
	if e.Step >= 0 {
		where += " (step " + strconv.Itoa(e.Step) + ")"
	}
	return "omni: phase " + where + ": " + reason(e.Err, e.Interval) + "; no span emitted"
}

// Unwrap returns the reason, so errors.Is(err, ErrEndBeforeStart) works.
func (e *PhaseError) Unwrap() error { return e.Err }

func reason(err error, iv Interval) string {
	if errors.Is(err, ErrEndBeforeStart) {
		return fmt.Sprintf("%v by %v", err, iv.start.Sub(iv.end))
	}
	return fmt.Sprint(err)
}
