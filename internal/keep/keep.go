// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package keep tells, in the engine, whether the collector tier of
// deploy/collector.yaml keeps a trace, so that a histogram's exemplar only
// ever names a trace the backend will hold. The tier keeps a trace when a
// span of it failed, when its request lasted longer than its modality's
// threshold, when a queue wait passed the budget, or when the trace id
// falls in the baseline share; the engine reads the same OMNI_* variables
// the collector's file reads, with the same defaults, and computes the
// baseline with the tail-sampling processor's own rule: FNV-1a (64 bits)
// of the salt then the 16 bytes of the trace id, kept when at most
// MaxUint64 times the share.
package keep

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
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

// FromEnv reads the policy from getenv (os.Getenv): an unset or empty
// variable takes its default. A value that is not well formed is an error
// that names each bad variable (see [Check]), and its rule then vouches for
// no trace: the collector reads such a value in its own way (a share of
// -5 or 1e-300 keeps no trace there, a share of 500 every one), so neither
// the default nor any reading of the engine's would be the collector's.
// The variables that are well formed still hold.
func FromEnv(getenv func(string) string) (Policy, error) {
	var errs []error
	val := func(v Var) (string, bool) {
		s := getenv(v.Name)
		if s == "" {
			return v.Default, true
		}
		if err := Check(v.Name, s); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", v.Name, strconv.QuoteToASCII(clip(s)), err))
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
	return p, errors.Join(errs...)
}

// never is the threshold of a refused variable: no duration is longer.
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
			return errors.New("want a percentage, 0 to 100, in decimal digits")
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

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
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

// Slow says a request of the modality lasting d is kept as slow: longer
// than its threshold.
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
