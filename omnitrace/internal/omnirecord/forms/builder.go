// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

// Builder gathers what the records of one request say, from one or more
// forms (an [OmniTiming] line, per-request tables, a summary, event dicts),
// into one [Request]. When two records give one figure, the finer one
// (by its resolution) is kept, so that the result does not depend on
// which record came first.
type Builder struct {
	R        Request
	stages   map[int]*Stage
	totalSet bool
	digest   uint64
	// Complete: a record that closes the request was read (its
	// [OmniTiming] line, its end-to-end record); Timed: its [OmniTiming]
	// line, written once per request.
	Complete, Timed bool
	// Notes are the problems of fields left out, moreNotes those beyond
	// maxNotes.
	Notes         []string
	MoreNotes     int
	tooManyStages bool
	// Line is the input Line of its first record, for what is reported
	// of it; 0 when unknown.
	Line int
	// Bytes are what its kept keys and values take (see addExtra).
	Bytes        int
	tooManyBytes bool
}

// NewBuilder returns the builder of request id, read from a form of source
// (see [Request.Source]) in run.
func NewBuilder(id, source, run string) *Builder {
	// The id is copied: a string read from an input shares the memory of
	// the record it was read from, which a request held must not keep.
	return &Builder{R: Request{ID: strings.Clone(id), Source: source, Run: run}, stages: map[int]*Stage{}, digest: fnvOffset}
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Mix adds the text of a record to the request's digest.
func (b *Builder) Mix(text string) {
	h := b.digest
	for i := 0; i < len(text); i++ {
		h ^= uint64(text[i])
		h *= fnvPrime
	}
	b.digest = h
}

// handOverInto returns the stage a hand-over from stage from arrives at,
// or nil when that stage already receives from another: a stage's span
// carries one hand-over into it, and a second edge into it (a stage fed by
// two) is reported and left out rather than mixed with the first.
func (b *Builder) handOverInto(from, to int) *Stage {
	s := b.stage(to)
	if s.RxFrom != nil && *s.RxFrom != from {
		b.note("edge %d->%d: stage %d already receives from stage %d, and one hand-over into a stage is kept", from, to, to, *s.RxFrom)
		return nil
	}
	f := from
	s.RxFrom = &f
	return s
}

// stageBytes is what a stage is counted as of a request's bytes, beside
// its attributes.
const stageBytes = 512

// MaxStages bounds the stages of one request read from a summary, a log
// or events; a stage beyond is reported and left out. A record line is
// bounded by its values instead.
const MaxStages = 1024

func (b *Builder) stage(id int) *Stage {
	s := b.stages[id]
	if s == nil {
		s = &Stage{ID: id}
		b.Bytes += stageBytes
		if len(b.stages) >= MaxStages {
			// Filled and dropped: memory stays bounded whatever the input.
			if !b.tooManyStages {
				b.tooManyStages = true
				b.note("more than %d stages", MaxStages)
			}
			return s
		}
		b.stages[id] = s
	}
	return s
}

// finer reports whether a value of resolution res replaces one of old
// (set or not).
func finer(res time.Duration, old Quality, set bool) bool {
	return !set || res < old.Resolution
}

func (b *Builder) setPhase(s *Stage, p spans.Phase, d time.Duration, q Quality) {
	_, set := s.Durations[p]
	if finer(q.Resolution, s.Quality[p], set) {
		s.set(p, d, q)
		if q == (Quality{}) && s.Quality != nil {
			delete(s.Quality, p)
		}
	}
}

func (b *Builder) setGen(s *Stage, m Measure) {
	if s.GenTime == nil || m.Resolution < s.GenTime.Resolution {
		s.GenTime = &m
	}
}

func (b *Builder) setTotal(m Measure) {
	if !b.totalSet || m.Resolution < b.R.Total.Resolution {
		b.R.Total = &m
		b.totalSet = true
	}
}

// unmeasured notes a field whose 0 was read as "not measured".
func unmeasured(s *Stage, field string) {
	for _, f := range s.Unmeasured {
		if f == field {
			return
		}
	}
	s.Unmeasured = append(s.Unmeasured, strings.Clone(field))
}

// unmeasuredPhase notes a field of phase p whose 0 was read as "not
// measured", unless another record of the request measured p.
func unmeasuredPhase(s *Stage, p spans.Phase, field string) {
	if _, set := s.Durations[p]; !set {
		unmeasured(s, field)
	}
}

// measured takes back a field noted as not measured once another record
// of the request gave it a value, in either unit ("x_ms" and "x_s" are one
// field).
func measured(s *Stage, field string) {
	stem, _, _ := unitKey(field)
	s.Unmeasured = slices.DeleteFunc(s.Unmeasured, func(f string) bool {
		fs, _, _ := unitKey(f)
		return f == field || (stem != "" && fs == stem)
	})
}

// OnceEach returns row with each field written once: a field a table
// writes twice keeps one value when both agree; when they differ, both are
// reported and left out (there is no telling which is right). The two
// units of one phase ("x_ms", "x_s") are two fields, checked by the rows.
func (b *Builder) OnceEach(row *literal.Value) literal.Value {
	seen := make(map[string]int, len(row.Keys))
	bad := map[string]bool{}
	out := literal.Value{Kind: row.Kind}
	for i, k := range row.Keys {
		if j, ok := seen[k]; ok {
			if !sameValue(&out.Vals[j], &row.Vals[i]) && !bad[k] {
				bad[k] = true
				b.note("%s written twice (%s and %s)", literal.Clip(k), literal.Clip(out.Vals[j].Str), literal.Clip(row.Vals[i].Str))
			}
			continue
		}
		seen[k] = len(out.Keys)
		out.Keys = append(out.Keys, k)
		out.Vals = append(out.Vals, row.Vals[i])
	}
	if len(bad) == 0 {
		return out
	}
	kept := literal.Value{Kind: row.Kind}
	for i, k := range out.Keys {
		if !bad[k] {
			kept.Keys = append(kept.Keys, k)
			kept.Vals = append(kept.Vals, out.Vals[i])
		}
	}
	return kept
}

// MaxRequestBytes bounds the bytes of the input's keys and values one
// request of a summary, a log or events keeps as attributes, over all its
// stages; beyond, a key is reported and left out. With -max-pending it
// bounds what a log's held requests take.
const MaxRequestBytes = 256 << 10

// AddExtra keeps an input key as an attribute of dst once: at most
// MaxExtras of them, within MaxRequestBytes of the request's; a key not
// kept is counted in dropped.
func (b *Builder) AddExtra(dst []attribute.KeyValue, dropped *int, k string, v *literal.Value) []attribute.KeyValue {
	key := extraKey(k)
	for _, kv := range dst {
		if kv.Key == key {
			return dst
		}
	}
	if len(dst) >= MaxExtras || k == droppedKeys {
		*dropped++
		return dst
	}
	kv := extraValue(k, v)
	n := len(kv.Key) + len(kv.Value.String())
	if b.Bytes+n > MaxRequestBytes {
		if !b.tooManyBytes {
			b.tooManyBytes = true
			b.note("keys beyond %d KiB of attributes", MaxRequestBytes>>10)
		}
		*dropped++
		return dst
	}
	b.Bytes += n
	return append(dst, kv)
}

// Request returns the Request built so far, its stages in stage order,
// each checked as a record line's stage is.
func (b *Builder) Request() (*Request, error) {
	r := b.R
	r.Digest = b.digest
	ids := make([]int, 0, len(b.stages))
	for id := range b.stages {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	r.Stages = make([]Stage, 0, len(ids))
	for _, id := range ids {
		s := b.stages[id]
		if err := checkExecParts(s); err != nil {
			return nil, fmt.Errorf("stage %d: %w", id, err)
		}
		r.Stages = append(r.Stages, *s)
	}
	if len(r.Stages) == 0 && r.Total == nil {
		// Nothing measured: no span to make. A request with its end-to-end
		// time alone still makes its request span.
		return nil, ErrNoStages
	}
	return &r, nil
}

// maxNotes bounds the problems kept per request; the rest are counted.
const maxNotes = 8

// note keeps a problem of one of the request's fields, reported with the
// request when it is handed on: the field is left out, and nothing else of
// the request is lost.
func (b *Builder) note(format string, a ...any) {
	if len(b.Notes) < maxNotes {
		b.Notes = append(b.Notes, fmt.Sprintf(format, a...))
	} else {
		b.MoreNotes++
	}
}

// durationOf reads v, a duration of key in unit. A missing value or a
// null is no measurement and no problem; anything else that is not a
// finite non-negative number within what a span can carry is noted.
func (b *Builder) durationOf(key string, v *literal.Value, unit time.Duration) (time.Duration, bool) {
	if v == nil || v.Kind == literal.Null {
		return 0, false
	}
	if v.Kind != literal.Number || !v.Finite() || v.Num < 0 {
		b.note("%s: %s is not a duration", literal.Clip(key), literal.Clip(v.Str))
		return 0, false
	}
	d, err := millis(v.Num * float64(unit) / float64(time.Millisecond))
	if err != nil {
		b.note("%s: %s is %v", literal.Clip(key), literal.Clip(v.Str), err)
		return 0, false
	}
	return d, true
}

// number returns v as a finite non-negative number.
func number(v *literal.Value) (float64, bool) {
	if v == nil || !v.Finite() || v.Num < 0 {
		return 0, false
	}
	return v.Num, true
}

// millis converts a number of ms, refusing what no clock measures.
func millis(f float64) (time.Duration, error) {
	ns := f * float64(time.Millisecond)
	if ns > float64(maxDuration) {
		return 0, ErrOutOfRange
	}
	return time.Duration(ns + 0.5), nil
}

// parseLabel reads a stage label, "0:thinker" or "0", as an id and a name.
func parseLabel(label string) (int, string, bool) {
	idText, name, _ := strings.Cut(label, ":")
	id, err := strconv.Atoi(strings.TrimSpace(idText))
	if err != nil || id < 0 || id > 1<<20 {
		return 0, "", false
	}
	return id, strings.Clone(sanitize.String(strings.TrimSpace(name), MaxIDBytes)), true
}

// parseEdge reads an edge, "0->1".
func parseEdge(edge string) (int, int, bool) {
	a, b, ok := strings.Cut(edge, "->")
	if !ok {
		return 0, 0, false
	}
	from, err1 := strconv.Atoi(strings.TrimSpace(a))
	to, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || from < 0 || to < 0 || from > 1<<20 || to > 1<<20 {
		return 0, 0, false
	}
	return from, to, true
}
