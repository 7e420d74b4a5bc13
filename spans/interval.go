package spans

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Interval is the measured interval of one phase. Its zero value means "not
// measured", which is never the same as "measured as 0": build a measured
// interval with [Between] or [Lasting].
type Interval struct {
	start, end time.Time
	measured   bool
}

// Between returns the measured interval from start to end. Equal ends make
// a measured 0, which becomes a zero-length span. An end before the start, or
// a zero time, is kept as given and reported by [Interval.Validate].
//
// When both times carry a monotonic clock reading (they came from time.Now in
// this process), the end is re-based on the start plus the monotonic elapsed
// time, so a step of the wall clock between the two cannot make the exported
// span negative.
func Between(start, end time.Time) Interval {
	if !start.IsZero() && !end.IsZero() {
		// Sub uses the monotonic readings when both have one; Add carries
		// the start's wall time forward by exactly that much.
		end = start.Add(end.Sub(start))
	}
	return Interval{start: start, end: end, measured: true}
}

// Lasting returns the measured interval that starts at start and lasts d.
// A negative d is kept as given and reported by [Interval.Validate].
func Lasting(start time.Time, d time.Duration) Interval {
	end := time.Time{}
	if !start.IsZero() {
		end = start.Add(d)
	}
	return Interval{start: start, end: end, measured: true}
}

// Measured reports whether the interval was measured.
func (iv Interval) Measured() bool { return iv.measured }

// Start returns the start of the interval; the zero time when not measured.
func (iv Interval) Start() time.Time { return iv.start }

// End returns the end of the interval; the zero time when not measured.
func (iv Interval) End() time.Time { return iv.end }

// Duration returns the length of the interval and whether it was measured.
// It never adds intervals together.
func (iv Interval) Duration() (time.Duration, bool) {
	if !iv.measured {
		return 0, false
	}
	return iv.end.Sub(iv.start), true
}

// Validate returns nil for an interval that was not measured or that is a
// valid measurement, [ErrZeroTime] when either end is the zero time, and
// [ErrEndBeforeStart] when the end lies before the start.
func (iv Interval) Validate() error {
	if !iv.measured {
		return nil
	}
	if iv.start.IsZero() || iv.end.IsZero() {
		return ErrZeroTime
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

// Errors that [Interval.Validate] returns, wrapped in a [*PhaseError] by the
// record and live paths.
var (
	// ErrEndBeforeStart: the interval's end lies before its start.
	ErrEndBeforeStart = errors.New("end before start")
	// ErrZeroTime: an end of the interval is the zero time.Time, which is
	// not a measurement (the SDK would read it as "now").
	ErrZeroTime = errors.New("zero time.Time")
)

// PhaseError reports a phase that produced no span because its measurement
// was bad. The other phases of the same record are still emitted.
type PhaseError struct {
	// Phase is the phase whose measurement was bad.
	Phase Phase
	// Output is the 0-based output index for a per-output phase of a
	// streaming request, or -1.
	Output int
	// Step is the 0-based step of a denoise step, or -1.
	Step int
	// Interval is the bad measurement.
	Interval Interval
	// Err is the reason: [ErrEndBeforeStart], [ErrZeroTime] or another
	// error of the record.
	Err error
}

// Error names the phase and the reason.
func (e *PhaseError) Error() string {
	where := e.Phase.String()
	if e.Output >= 0 {
		where += " (output " + strconv.Itoa(e.Output) + ")"
	}
	if e.Step >= 0 {
		where += " (step " + strconv.Itoa(e.Step) + ")"
	}
	if errors.Is(e.Err, ErrEndBeforeStart) {
		return fmt.Sprintf("omni: phase %s: %v by %v; no span emitted", where, e.Err, e.Interval.start.Sub(e.Interval.end))
	}
	return fmt.Sprintf("omni: phase %s: %v; no span emitted", where, e.Err)
}

// Unwrap returns the reason, so errors.Is(err, ErrEndBeforeStart) works.
func (e *PhaseError) Unwrap() error { return e.Err }
