// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package keep tells whether the collector tier of deploy/collector.yaml
// keeps a trace, so that a histogram's exemplar only ever names a trace the
// backend will hold. The tier keeps a trace when a span of it failed, when
// its request span lasted longer than its modality's threshold, when a
// queue wait passed the budget, or when the trace id falls in the baseline
// share. The engine reads the same OMNI_* variables the collector's file
// reads, with the same defaults, and computes the baseline with the
// tail-sampling processor's own rule: FNV-1a (64 bits) of the salt then the
// 16 bytes of the trace id, kept when at most MaxUint64 times the share.
package keep

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// A Var is one variable both sides read, with its default (the one
// deploy/collector.yaml writes after ":-").
type Var struct {
	Name, Default string
}

// Vars are the variables of the policy, in the order of the collector's
// file.
var Vars = [...]Var{
	{"OMNI_SLOW_IMAGE_MS", "20000"},
	{"OMNI_SLOW_VIDEO_MS", "300000"},
	{"OMNI_SLOW_AUDIO_MS", "15000"},
	{"OMNI_SLOW_OTHER_MS", "10000"},
	{"OMNI_QUEUE_BUDGET_MS", "2000"},
	{"OMNI_SAMPLE_PERCENT", "10"},
	{"OMNI_SAMPLE_SALT", defaultSalt},
}

// The names of the spans the tier's policies look at, as
// deploy/collector.yaml writes them.
const (
	RequestSpan        = "omni.request"
	DiffusionQueueSpan = "omni.diffusion.queue_wait"
	LLMQueueSpan       = "omni.llm.queue"
	// ModalityKey is the attribute the slow policies tell modalities by.
	ModalityKey = "omni.output.modality"
)

// defaultSalt is the tail-sampling processor's salt when none is set.
const defaultSalt = "default-hash-seed"

// MaxMillis bounds a threshold: a day. The collector multiplies it by a
// million in int64 nanoseconds, far from overflowing.
const MaxMillis = 24 * 60 * 60 * 1000

// maxSalt bounds the salt's length.
const maxSalt = 256

// A Policy is the tier's rule for one fleet.
type Policy struct {
	image, video, audio, other time.Duration
	queue                      time.Duration
	threshold                  uint64
	none                       bool // a share of 0 keeps no baseline trace
	salt                       string
}

// ignored says, for each variable, what an ignored value leaves.
var ignored = map[string]string{
	"OMNI_SLOW_IMAGE_MS":   "no image request is vouched for by its length",
	"OMNI_SLOW_VIDEO_MS":   "no video request is vouched for by its length",
	"OMNI_SLOW_AUDIO_MS":   "no audio request is vouched for by its length",
	"OMNI_SLOW_OTHER_MS":   "no request of another modality, or of none, is vouched for by its length",
	"OMNI_QUEUE_BUDGET_MS": "no queue wait vouches for its trace",
	"OMNI_SAMPLE_PERCENT":  "no trace is vouched for by the baseline share",
	"OMNI_SAMPLE_SALT":     "no trace is vouched for by the baseline share",
}

// FromEnv reads the policy from getenv (os.Getenv): an unset or empty
// variable takes its default. A value that is not valid (see [Check]) is
// ignored, with one warning that names the variable, the value and what is
// used instead: its rule then vouches for no trace. Neither the default
// nor any reading of the engine's would be safe there, since the collector
// reads such a value in its own way (a share of -5 or 1e-300 keeps no
// trace there, a share of 500 every one, a threshold of 5.0 compares as no
// integer does). The other variables still hold.
func FromEnv(getenv func(string) string) (Policy, []error) {
	var warnings []error
	val := func(v Var) (string, bool) {
		s := getenv(v.Name)
		if s == "" {
			return v.Default, true
		}
		if err := Check(v.Name, s); err != nil {
			warnings = append(warnings, fmt.Errorf("%s=%s: %w; ignored: %s (the collector reads such a value its own way)",
				v.Name, strconv.QuoteToASCII(sanitize.String(s, 64)), err, ignored[v.Name]))
			return "", false
		}
		return s, true
	}
	ms := func(v Var) time.Duration {
		s, ok := val(v)
		if !ok {
			return never
		}
		n, _ := strconv.ParseInt(s, 10, 64)
		return time.Duration(n) * time.Millisecond
	}
	var p Policy
	p.image, p.video, p.audio, p.other = ms(Vars[0]), ms(Vars[1]), ms(Vars[2]), ms(Vars[3])
	p.queue = ms(Vars[4])
	share, okShare := val(Vars[5])
	f, _ := strconv.ParseFloat(share, 64)
	p.threshold, p.none = threshold(f/100), f == 0
	salt, okSalt := val(Vars[6])
	p.salt = salt
	if !okShare || !okSalt {
		p.threshold, p.none = 0, true
	}
	return p, warnings
}

// never is the threshold of an ignored variable: no duration is longer.
const never = time.Duration(math.MaxInt64)

// Check checks one value of a variable of [Vars]: a threshold is a number
// of milliseconds in decimal digits, 0 to a day; the share a decimal
// percentage from 0 to 100; the salt a letter then letters, digits, '.',
// '_' or '-', at most 256 bytes, and not a word YAML reads as a boolean or
// null.
func Check(name, s string) error {
	switch name {
	case "OMNI_SAMPLE_PERCENT":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !decimal(s) || f < 0 || f > 100 {
			return fmt.Errorf("want a percentage, 0 to 100, in decimal digits")
		}
	case "OMNI_SAMPLE_SALT":
		// The collector reads the value as YAML: a salt YAML would read as
		// a number, a boolean or null would not be the engine's.
		if len(s) > maxSalt || !saltChars(s) || yamlWord[strings.ToLower(s)] {
			return fmt.Errorf("want a letter then letters, digits, '.', '_' or '-', at most %d bytes, and not true, false or null", maxSalt)
		}
	default:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || !digits(s) || n > MaxMillis || len(s) > 1 && s[0] == '0' {
			return fmt.Errorf("want milliseconds, 0 to %d, in decimal digits", MaxMillis)
		}
	}
	return nil
}

// decimal says s is digits with at most one point inside them.
func decimal(s string) bool {
	whole, frac, point := strings.Cut(s, ".")
	return digits(whole) && (len(whole) == 1 || whole[0] != '0') && (!point || digits(frac))
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

var yamlWord = map[string]bool{"true": true, "false": true, "null": true}

func saltChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter || !letter && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return s != ""
}

// threshold is MaxUint64 times ratio, as the processor computes it.
func threshold(ratio float64) uint64 {
	boundary := new(big.Float).SetInt(new(big.Int).SetUint64(math.MaxUint64))
	t, _ := boundary.Mul(boundary, big.NewFloat(ratio)).Uint64()
	return t
}

// Baseline says the trace id falls in the baseline share.
func (p Policy) Baseline(id trace.TraceID) bool {
	if p.none {
		// The processor keeps a trace whose hash is at most the
		// threshold: 0 for a share of 0, which a hash of 0 would meet.
		// The engine vouches for no trace there.
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(p.salt))
	h.Write(id[:])
	return h.Sum64() <= p.threshold
}

// Span is what the tier's policies read of one span, as the collector
// receives it.
type Span struct {
	// Name is the span's name.
	Name string
	// Error says its status is Error.
	Error bool
	// Duration is its end time less its start time, in nanoseconds since
	// the epoch as OTLP carries them.
	Duration time.Duration
	// Modality is its omni.output.modality when that is a string, else
	// "".
	Modality string
}

// Keeps says the tier keeps the trace of a span that reaches it as s,
// whatever the trace's other spans and its trace id: s failed (the error
// policy), s is a request span longer than its modality's threshold (slow-
// image, -video, -audio, -other), or s is a queue wait longer than the
// budget (saturated).
func (p Policy) Keeps(s Span) bool {
	switch {
	case s.Error:
		return true
	case s.Name == RequestSpan:
		return p.Slow(s.Modality, s.Duration)
	case s.Name == DiffusionQueueSpan || s.Name == LLMQueueSpan:
		return p.Saturated(s.Duration)
	}
	return false
}

// Slow says a request of the modality lasting d is kept as slow: longer
// than its threshold. The modality is compared as the collector's
// conditions compare it, byte for byte.
func (p Policy) Slow(modality string, d time.Duration) bool {
	t := p.other
	switch modality {
	case "image":
		t = p.image
	case "video":
		t = p.video
	case "audio":
		t = p.audio
	}
	return d > t
}

// Saturated says a queue wait of d keeps its trace: longer than the budget.
func (p Policy) Saturated(d time.Duration) bool { return d > p.queue }
