// Package omnirecord reads the per-request timing that engines write and
// turns each request into otelomni's record path: a trace whose phases are
// placed in the documented phase order. It reads this project's own JSON
// lines (one request per line) and what vLLM-Omni writes itself: its
// orchestrator's summary dict, the [OmniTiming] lines and per-request
// tables of its log, and the older event dicts of its log. A phase that was
// not measured makes no span; a phase measured as 0 makes a zero-length
// span; a 0 that the writer puts for "not measured" is read as not
// measured (see docs/omnitrace.md for each field).
package omnirecord

import (
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/spans"
)

// Request is one request's timing, from whichever form it was read.
type Request struct {
	ID       string
	Model    string
	Modality string
	// Arrival is the request's start; zero when the input has no time for
	// it (a summary), and it is then placed (see [Placement]).
	Arrival time.Time
	// End is when the request ended, when the input says so without an
	// arrival (a log line's time); zero otherwise.
	End time.Time
	// Total is the request's end-to-end duration, when the input has one.
	Total    *Measure
	Steps    int
	Guidance *float64
	Height   int
	Width    int
	Frames   int
	// Extra are the keys this package does not map, as attributes.
	Extra  []attribute.KeyValue
	Stages []Stage
	// Source names the form the request was read from: "jsonl", "summary",
	// "log" or "events"; the forms merged, joined by "+", for a request
	// read from several (see [MergeForms]).
	Source string
	// Run is what tells this request apart from another with the same ID
	// in another run of the engine (see [Request.Key]): in vLLM-Omni's
	// forms, which of the requests with that ID of its input it is ("#1"
	// for the first), which every form of one run tells alike; in a
	// JSON-lines record, its arrival time. RunName is the user's name for
	// the run (-run), empty by default.
	Run, RunName string
	// Digest is a digest of the input read for this request: it tells two
	// identical forms of a request (see [MergeForms]), and enters the key
	// of a JSON-lines record.
	Digest uint64
	// Line is the input line of its first record, for what is reported
	// of it; 0 when unknown.
	Line int
}

// Measure is a duration and how exact it is.
type Measure struct {
	D time.Duration
	Quality
}

// Quality says how exact a duration read from an input is.
type Quality struct {
	// Resolution is the step of the value as written: 1 ms for the
	// int()-truncated milliseconds of a summary's diffusion values, 10 ms
	// for an [OmniTiming] line's seconds with two decimals; 0 when the
	// value was written at full precision.
	Resolution time.Duration
	// Summed: the writer added this value over a request's outputs or a
	// transfer's chunks; the parts cannot be told apart.
	Summed bool
}

// Stage is one stage of a request.
type Stage struct {
	ID   int
	Name string
	Type string
	// Submit is when the stage started; zero when the input has no time
	// for it, and it is then placed.
	Submit time.Time
	// GenTime is stage_gen_time; nil when missing.
	GenTime *Measure
	// Durations holds each phase measured, by phase; a phase that is not a
	// key is not measured. The hand-over into this stage is here too
	// (transfer.tx, transfer.in_flight, transfer.rx_decode).
	Durations map[spans.Phase]time.Duration
	// Quality holds the quality of the durations that are not exact.
	Quality     map[spans.Phase]Quality
	Preemptions *int
	// RxFrom is the stage the hand-over came from, when the input names
	// it; otherwise the previous stage.
	RxFrom *int
	// RxBytes is the hand-over's size; RxBytesSummed when added over
	// chunks.
	RxBytes       *int64
	RxBytesSummed bool
	// RxExtra are the hand-over keys as attributes, for a stage with no
	// previous stage.
	RxExtra []attribute.KeyValue
	Extra   []attribute.KeyValue
	// Unmeasured names the fields whose 0 was read as "not measured": the
	// writer puts 0 there when it measured nothing.
	Unmeasured []string
}

// set records a measured phase.
func (s *Stage) set(p spans.Phase, d time.Duration, q Quality) {
	if s.Durations == nil {
		s.Durations = map[spans.Phase]time.Duration{}
	}
	s.Durations[p] = d
	if q != (Quality{}) {
		if s.Quality == nil {
			s.Quality = map[spans.Phase]Quality{}
		}
		s.Quality[p] = q
	}
}

// Bad input reasons.
var (
	ErrNotJSON       = errors.New("not a JSON object")
	ErrNoRequestID   = errors.New("missing request_id")
	ErrNoTime        = errors.New("missing time")
	ErrNotNumber     = errors.New("duration is not a number")
	ErrNonFinite     = errors.New("duration is not finite")
	ErrNegative      = errors.New("negative duration")
	ErrUnitsDisagree = errors.New("the _ms and _s forms of a key disagree beyond rounding")
	ErrPartsExceed   = errors.New("the parts inside exec last longer than exec")
	ErrBadField      = errors.New("malformed field")
	ErrNoStages      = errors.New("no stages")
	// ErrLeftOut reports a field of a request that could not be read (a
	// negative or non-finite duration, a malformed edge): the field is
	// left out, and the request is imported without it.
	ErrLeftOut        = errors.New("left out")
	ErrDuplicateStage = errors.New("duplicate stage_id")
	ErrDuplicateKey   = errors.New("a key appears twice in one object")
	// ErrOutOfRange: a time or duration that places a span outside what
	// OTLP carries (1970 to 2262-04-11).
	ErrOutOfRange = spans.ErrOutOfRange
)
