// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"
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
	// Extra are the keys this package does not map, as attributes;
	// DroppedKeys counts those not kept (see [MaxExtras]).
	Extra       []attribute.KeyValue
	DroppedKeys int
	Stages      []Stage
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
	// DroppedKeys counts the keys of the stage not kept in Extra.
	DroppedKeys int
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

// idVersion changes the ids of every import when the way they are derived
// changes, so that a new derivation never collides with an old one.
const idVersion = "omnitrace-ids/2"

// Key returns the request's identity, from which its trace and span ids
// are derived: the user's -run name, the request's id and its run, as its
// input tells it (see [Request.Run]). For vLLM-Omni's forms (a summary, a
// log, events) the run is which of the requests with that id of its input
// it is, which every form of one run tells alike: the same request gives
// the same key whichever of its forms are imported, in whatever order,
// under whatever time zone. A JSON-lines record is whole in itself: its
// run is its arrival time, and a digest of the record enters its key too.
// The same input gives the same key, so importing a file twice, or
// resuming a followed log, gives every span the ids it had.
func (r *Request) Key() [16]byte {
	h := sha256.New()
	for _, s := range []string{idVersion, r.RunName, r.Run, r.ID} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	if r.Source == sourceJSONL {
		var d [8]byte
		binary.BigEndian.PutUint64(d[:], r.Digest)
		h.Write(d[:])
	}
	var k [16]byte
	copy(k[:], h.Sum(nil))
	if k == ([16]byte{}) {
		k[15] = 1 // an all-zero trace id is invalid
	}
	return k
}

// KeysDropped returns how many of the input's keys of r, and of its
// stages, were not kept as attributes.
func (r *Request) KeysDropped() int {
	n := r.DroppedKeys
	for i := range r.Stages {
		n += r.Stages[i].DroppedKeys
	}
	return n
}

// DroppedKeysKey is the attribute that counts the input's keys of a span's
// request or stage that the import does not map and did not keep.
var DroppedKeysKey = omnikeys.RecordKey(droppedKeys)

// droppedKeys is the input key that DroppedKeysKey would be made of: an
// input key of that name is never kept (it would be taken for the count),
// and is counted in it instead.
const droppedKeys = "dropped_keys"

// WithDroppedKeys appends to kv the count of keys dropped, when there are
// any.
func WithDroppedKeys(kv []attribute.KeyValue, n int) []attribute.KeyValue {
	if n > 0 {
		kv = append(kv, DroppedKeysKey.Int(n))
	}
	return kv
}

// sourceJSONL is the Source of this project's JSON-lines records.
const sourceJSONL = "jsonl"
