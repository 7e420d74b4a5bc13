// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

// One run of vLLM-Omni can be given in several forms at once: its
// summary, its log, its older event dicts, from several inputs. Each
// input is read on its own, into requests; the requests of one key (see
// [Request.Key]: the same id, -run and run, whichever form they come
// from) are then merged into one, with rules that depend on what the
// forms say, never on the order they were given in:
//
//   - the parts are put in a fixed order first: summary, log, events,
//     and within a form by a digest of what was read; a part identical
//     to another (the same file given twice) is the same part;
//   - a figure given by several parts is the finest one (by its
//     resolution: a summary's float before a table's three decimals
//     before an [OmniTiming] line's two); two that differ beyond their
//     resolutions are reported, and the first in that order is kept;
//   - a request's end is the latest its parts give (the time of its
//     log's last line); a part without times (a summary) takes the
//     times of a part with them;
//   - stages, phases and attributes are the union of the parts'; a name
//     or attribute two parts give differently is reported, and the first
//     kept.

// FormRank orders the forms of one request for a merge.
func FormRank(source string) int {
	switch source {
	case "summary":
		return 0
	case "log":
		return 1
	case "events":
		return 2
	}
	return 3
}

// MergeForms merges the parts of one request, each read from another
// input (see above). It returns the request and the disagreements, each
// one field left out. Parts are changed; parts[i] must not be used after.
func MergeForms(parts []*Request) (*Request, []string) {
	ps := slices.Clone(parts)
	sort.SliceStable(ps, func(i, j int) bool {
		if a, b := FormRank(ps[i].Source), FormRank(ps[j].Source); a != b {
			return a < b
		}
		return ps[i].Digest < ps[j].Digest
	})
	ps = slices.CompactFunc(ps, func(a, b *Request) bool { return a.Source == b.Source && a.Digest == b.Digest })
	m := &merger{r: ps[0]}
	sources := []string{ps[0].Source}
	// The merged request's digest is of every part's, in their order: a
	// request read from one input keeps its own.
	digest := ps[0].Digest
	for _, p := range ps[1:] {
		m.merge(p)
		if !slices.Contains(sources, p.Source) {
			sources = append(sources, p.Source)
		}
		for _, x := range [...]uint64{uint64(FormRank(p.Source)), p.Digest} {
			for range 8 {
				digest ^= x & 0xff
				digest *= fnvPrime
				x >>= 8
			}
		}
	}
	m.r.Source = strings.Join(sources, "+")
	m.r.Digest = digest
	for i := range m.r.Stages {
		settleUnmeasured(&m.r.Stages[i])
	}
	return m.r, m.notes
}

type merger struct {
	r     *Request
	notes []string
}

func (m *merger) note(p *Request, format string, a ...any) {
	if len(m.notes) < maxNotes {
		m.notes = append(m.notes, fmt.Sprintf("its %s and %s disagree: ", m.r.Source, p.Source)+fmt.Sprintf(format, a...)+", the first is kept")
	}
}

func (m *merger) merge(p *Request) {
	r := m.r // its Line stays the first part's: the input it is reported by
	m.text(p, "model", &r.Model, p.Model)
	m.text(p, "modality", &r.Modality, p.Modality)
	if !p.Arrival.IsZero() && (r.Arrival.IsZero() || p.Arrival.Before(r.Arrival)) {
		r.Arrival = p.Arrival
	}
	if p.End.After(r.End) {
		r.End = p.End
	}
	r.Total = m.measure(p, "the end-to-end time", r.Total, p.Total)
	for _, f := range []struct{ dst, src *int }{{&r.Steps, &p.Steps}, {&r.Height, &p.Height}, {&r.Width, &p.Width}, {&r.Frames, &p.Frames}} {
		if *f.dst == 0 {
			*f.dst = *f.src
		}
	}
	if r.Guidance == nil {
		r.Guidance = p.Guidance
	}
	r.DroppedKeys = max(r.DroppedKeys, p.DroppedKeys)
	r.Extra = m.attrs(p, "", r.Extra, p.Extra, &r.DroppedKeys)
	for i := range p.Stages {
		ps := &p.Stages[i]
		j, found := slices.BinarySearchFunc(r.Stages, ps.ID, func(s Stage, id int) int { return s.ID - id })
		if !found {
			r.Stages = slices.Insert(r.Stages, j, *ps)
			continue
		}
		m.stage(p, &r.Stages[j], ps)
	}
}

// text merges a string field: one part's when the other has none.
func (m *merger) text(p *Request, what string, dst *string, v string) {
	switch {
	case v == "" || v == *dst:
	case *dst == "":
		*dst = v
	default:
		m.note(p, "%s %q and %q", what, literal.Clip(*dst), literal.Clip(v))
	}
}

// measure merges one figure: the finer, and a disagreement beyond both
// resolutions reported.
func (m *merger) measure(p *Request, what string, a, b *Measure) *Measure {
	switch {
	case b == nil:
		return a
	case a == nil:
		return b
	}
	if !agree(a.D, b.D, a.Resolution, b.Resolution) {
		m.note(p, "%s %v and %v", what, a.D, b.D)
		return a
	}
	if b.Resolution < a.Resolution {
		return b
	}
	return a
}

// agree reports whether two readings of one figure, of resolutions ra and
// rb, can be the same.
func agree(a, b, ra, rb time.Duration) bool {
	diff := a - b
	if diff < 0 {
		diff = -diff
	}
	return diff <= max(ra, rb)
}

func (m *merger) stage(p *Request, s, o *Stage) {
	where := fmt.Sprintf("stage %d: ", s.ID)
	m.text(p, where+"name", &s.Name, o.Name)
	m.text(p, where+"type", &s.Type, o.Type)
	if s.Submit.IsZero() || (!o.Submit.IsZero() && o.Submit.Before(s.Submit)) {
		s.Submit = o.Submit
	}
	s.GenTime = m.measure(p, where+genTimeKey, s.GenTime, o.GenTime)
	sameEdge := true
	switch {
	case o.RxFrom == nil:
	case s.RxFrom == nil:
		s.RxFrom = o.RxFrom
	case *s.RxFrom != *o.RxFrom:
		sameEdge = false
		m.note(p, "%sthe hand-over into it from stage %d and from stage %d", where, *s.RxFrom, *o.RxFrom)
	}
	phases := make([]spans.Phase, 0, len(o.Durations))
	for ph := range o.Durations {
		phases = append(phases, ph)
	}
	slices.Sort(phases) // the notes, in one order
	for _, ph := range phases {
		if isTransferPart(ph) && !sameEdge {
			continue
		}
		d, q := o.Durations[ph], o.Quality[ph]
		old, had := s.Durations[ph]
		switch {
		case !had:
			s.set(ph, d, q)
		case !agree(old, d, s.Quality[ph].Resolution, q.Resolution):
			m.note(p, "%s%s %v and %v", where, ph.String(), old, d)
		case q.Resolution < s.Quality[ph].Resolution:
			s.set(ph, d, q)
			if q == (Quality{}) {
				delete(s.Quality, ph)
			}
		}
	}
	if o.Preemptions != nil {
		switch {
		case s.Preemptions == nil:
			s.Preemptions = o.Preemptions
		case *s.Preemptions != *o.Preemptions:
			m.note(p, "%spreemptions %d and %d", where, *s.Preemptions, *o.Preemptions)
		}
	}
	if o.RxBytes != nil && sameEdge {
		switch {
		case s.RxBytes == nil:
			s.RxBytes, s.RxBytesSummed = o.RxBytes, o.RxBytesSummed
		case *s.RxBytes != *o.RxBytes:
			m.note(p, "%sthe hand-over's bytes %d and %d", where, *s.RxBytes, *o.RxBytes)
		}
	}
	s.RxExtra = m.attrs(p, where, s.RxExtra, o.RxExtra, nil)
	s.DroppedKeys = max(s.DroppedKeys, o.DroppedKeys)
	s.Extra = m.attrs(p, where, s.Extra, o.Extra, &s.DroppedKeys)
	for _, f := range o.Unmeasured {
		unmeasured(s, f)
	}
}

func isTransferPart(ph spans.Phase) bool {
	return ph == plan.TransferTx || ph == plan.TransferInFlight || ph == plan.TransferRxDecode
}

// attrs merges two parts' attributes: the union, by key, of at most
// MaxExtras when dropped counts those beyond.
func (m *merger) attrs(p *Request, where string, dst, src []attribute.KeyValue, dropped *int) []attribute.KeyValue {
	for _, kv := range src {
		i := slices.IndexFunc(dst, func(d attribute.KeyValue) bool { return d.Key == kv.Key })
		switch {
		case i < 0 && dropped != nil && len(dst) >= MaxExtras:
			*dropped++
		case i < 0:
			dst = append(dst, kv)
		case !sameAttr(dst[i].Value, kv.Value):
			m.note(p, "%s%s %s and %s", where, kv.Key, literal.Clip(dst[i].Value.String()), literal.Clip(kv.Value.String()))
		}
	}
	return dst
}

// sameAttr reports whether two attribute values say the same: numbers by
// their value (a summary's 3 is a table's 3.000).
func sameAttr(a, b attribute.Value) bool {
	num := func(v attribute.Value) (float64, bool) {
		switch v.Type() {
		case attribute.INT64:
			return float64(v.AsInt64()), true
		case attribute.FLOAT64:
			return v.AsFloat64(), true
		}
		return 0, false
	}
	if x, ok := num(a); ok {
		if y, ok := num(b); ok {
			return x == y || (math.IsNaN(x) && math.IsNaN(y))
		}
	}
	return a.Type() == b.Type() && a.String() == b.String()
}

// settleUnmeasured drops from a merged stage's "not measured" list the
// fields whose phase another part measured.
func settleUnmeasured(s *Stage) {
	s.Unmeasured = slices.DeleteFunc(s.Unmeasured, func(f string) bool {
		ph, ok := phaseOfField(f)
		if !ok {
			return false
		}
		_, measured := s.Durations[ph]
		return measured
	})
}

// phaseOfField returns the phase an input field measures.
func phaseOfField(f string) (spans.Phase, bool) {
	if tf, ok := transferFields[f]; ok {
		return tf.phase, true
	}
	if f == "rx_in_flight_time_ms" {
		return plan.TransferInFlight, true
	}
	stem, _, ok := unitKey(f)
	if !ok || stem == "postprocess_time" {
		// A non-diffusion row's postprocess_time_ms is no phase.
		return 0, false
	}
	if df, ok := diffusionFields[stem]; ok {
		return df.phase, true
	}
	return 0, false
}

// Joins reports whether r is merged with its other forms: a request of
// vLLM-Omni's forms is, a JSON-lines record (whole in itself) is not.
func Joins(r *Request) bool { return r.Source != sourceJSONL }
