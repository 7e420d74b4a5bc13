// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

// OmniTiming is one [OmniTiming] line of the orchestrator
// (vllm_omni/metrics/stats.py, OrchestratorAggregator): seconds with two
// decimals, except the transfers' and hand-offs' milliseconds. Releases
// differ in what it holds: preprocess= may be missing, a stage item is
// "0:thinker=0.81s" or "0:0.81s", and newer ones add handoffs=[…] and
// ar2diffusion=.
type OmniTiming struct {
	ID                      string
	total, preprocess, eng  float64
	ar2diffusion            float64
	stages                  []labelValue
	transfers               []labelValue
	handoffs                []handoff
	hasTotal, hasPre, hasEn bool
	hasAR2D                 bool
	// bad are the items that could not be read, reported with the request
	// and left out.
	bad []string
}

// badItem keeps an item of the line that could not be read (bounded).
func (t *OmniTiming) badItem(format string, a ...any) {
	if len(t.bad) < maxNotes {
		t.bad = append(t.bad, "[OmniTiming] "+fmt.Sprintf(format, a...))
	}
}

// handoff is one item of handoffs=[…]: the orchestrator's hand-off from one
// stage to the next, in milliseconds, with the part of it spent turning an
// autoregressive stage's output into a diffusion stage's input.
type handoff struct {
	label            string
	ms, ar2diffusion float64
	hasAR2D          bool
}

type labelValue struct {
	label string
	v     float64
}

const OmniTimingTag = "[OmniTiming] "

// ParseOmniTiming reads an [OmniTiming] message. A request id is
// everything between "req=" and " total=", so an id with spaces survives.
func ParseOmniTiming(msg string) (*OmniTiming, error) {
	i := strings.Index(msg, OmniTimingTag)
	if i < 0 {
		return nil, errors.New("no [OmniTiming] tag")
	}
	rest := msg[i+len(OmniTimingTag):]
	if !strings.HasPrefix(rest, "req=") {
		return nil, errors.New("no req=")
	}
	rest = rest[len("req="):]
	j := strings.Index(rest, " total=")
	if j <= 0 {
		if isTurnMarker(rest) {
			return nil, ErrTurnMarker
		}
		return nil, errors.New("no total=")
	}
	t := &OmniTiming{ID: rest[:j]}
	seen := map[string]bool{}
	for _, field := range splitFields(rest[j+1:]) {
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			continue
		}
		if seen[k] {
			t.badItem("%s= a second time: the first kept", literal.Clip(k))
			continue
		}
		seen[k] = true
		switch k {
		case "ar2diffusion":
			if f, ok := seconds(v); ok {
				t.ar2diffusion, t.hasAR2D = f, true
			} else {
				t.badItem("ar2diffusion=%s is not seconds", literal.Clip(v))
			}
		case "handoffs":
			t.handoffs = parseHandoffs(v, t)
		case "total", "preprocess", "engine":
			f, ok := seconds(v)
			if !ok {
				return nil, fmt.Errorf("%s=%s is not seconds", k, literal.Clip(v))
			}
			switch k {
			case "total":
				t.total, t.hasTotal = f, true
			case "preprocess":
				t.preprocess, t.hasPre = f, true
			default:
				t.eng, t.hasEn = f, true
			}
		case "stages", "transfers":
			list := strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
			for _, item := range strings.Split(list, ",") {
				if item == "" {
					continue
				}
				// "0:thinker=0.81s", or "0:0.81s" where the stage has
				// no name.
				at := strings.LastIndex(item, "=")
				if at <= 0 && k == "stages" {
					at = strings.LastIndex(item, ":")
				}
				if at <= 0 {
					t.badItem("%s item %q is not label=value", k, literal.Clip(item))
					continue
				}
				label, val := item[:at], item[at+1:]
				var f float64
				var ok bool
				if k == "stages" {
					f, ok = seconds(val)
				} else {
					f, ok = milliseconds(val)
				}
				if !ok {
					t.badItem("%s item %q: %s is not a duration", k, literal.Clip(label), literal.Clip(val))
				}
				if ok {
					lv := labelValue{label, f}
					if k == "stages" {
						t.stages = append(t.stages, lv)
					} else {
						t.transfers = append(t.transfers, lv)
					}
				}
			}
		}
	}
	return t, nil
}

// ErrTurnMarker is a duplex turn's [OmniTiming] line ("req=… response=…
// turn=… reason=…"), which carries no timing: the tables after it do.
var ErrTurnMarker = errors.New("a duplex turn's marker, without timings")

// isTurnMarker reports whether the text after "req=" is a duplex turn's
// marker.
func isTurnMarker(rest string) bool {
	return strings.Contains(rest, " response=") && strings.Contains(rest, " turn=") && strings.Contains(rest, " reason=")
}

// parseHandoffs reads "[0->1=12.345ms(ar2diffusion=1.000ms),…]"; an item it
// cannot read is noted on t and left out.
func parseHandoffs(v string, t *OmniTiming) []handoff {
	var out []handoff
	list := strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		main, paren, _ := strings.Cut(item, "(")
		at := strings.LastIndex(main, "=")
		if at <= 0 {
			t.badItem("handoffs item %q is not edge=value", literal.Clip(item))
			continue
		}
		ms, ok := milliseconds(main[at+1:])
		if !ok {
			t.badItem("handoffs item %q: %s is not milliseconds", literal.Clip(main[:at]), literal.Clip(main[at+1:]))
			continue
		}
		h := handoff{label: main[:at], ms: ms}
		if a, ok := strings.CutPrefix(strings.TrimSuffix(paren, ")"), "ar2diffusion="); ok {
			if h.ar2diffusion, h.hasAR2D = milliseconds(a); !h.hasAR2D {
				t.badItem("handoffs item %q: ar2diffusion=%s is not milliseconds", literal.Clip(main[:at]), literal.Clip(a))
			}
		}
		out = append(out, h)
	}
	return out
}

// floatValue is a number of the line as a value whose attribute is always
// a double: 1.00s is 1.0, not the integer 1, so that one key keeps one
// type from request to request.
func floatValue(f float64) literal.Value {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return literal.Value{Kind: literal.Number, Num: f, Str: s}
}

// splitFields splits "a=1 b=[x, y] c=2" at spaces outside brackets.
func splitFields(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ' ':
			if depth == 0 {
				if i > start {
					out = append(out, s[start:i])
				}
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func seconds(v string) (float64, bool) {
	if !strings.HasSuffix(v, "s") || strings.HasSuffix(v, "ms") {
		return 0, false
	}
	return PlainNumber(strings.TrimSuffix(v, "s"))
}

func milliseconds(v string) (float64, bool) {
	if !strings.HasSuffix(v, "ms") {
		return 0, false
	}
	return PlainNumber(strings.TrimSuffix(v, "ms"))
}

// PlainNumber reads a finite non-negative number, thousands separators
// allowed.
func PlainNumber(s string) (float64, bool) {
	v := literal.Value{Kind: literal.Number}
	f, ok := literal.ParseNumber(strings.ReplaceAll(strings.TrimSpace(s), ",", ""))
	v.Num = f
	if !ok || !v.Finite() || f < 0 {
		return 0, false
	}
	return f, true
}

// omniTimingResolution: seconds with two decimals.
const omniTimingResolution = 10 * time.Millisecond

// Apply reads the line onto b and closes the request: the line is
// written once the request is finished.
func (t *OmniTiming) Apply(b *Builder) {
	for _, bad := range t.bad {
		b.note("%s", bad)
	}
	q := Quality{Resolution: omniTimingResolution}
	if t.hasEn {
		if d, err := millis(t.eng * 1000); err == nil {
			b.setTotal(Measure{D: d, Quality: q})
		} else {
			b.note("[OmniTiming] engine=%gs is %v", t.eng, err)
		}
	}
	for _, e := range []struct {
		key string
		v   float64
		ok  bool
	}{{"request_wall_time_s", t.total, t.hasTotal}, {"input_preprocess_time_s", t.preprocess, t.hasPre},
		{"ar2diffusion_time_s", t.ar2diffusion, t.hasAR2D}} {
		if e.ok {
			v := floatValue(e.v)
			b.R.Extra = b.AddExtra(b.R.Extra, &b.R.DroppedKeys, e.key, &v)
		}
	}
	for i, s := range t.stages {
		id, name, ok := parseLabel(s.label)
		if !ok {
			id = i // a label without a stage number: its position
		}
		st := b.stage(id)
		if st.Name == "" {
			st.Name = name
		}
		if d, err := millis(s.v * 1000); err == nil {
			b.setGen(st, Measure{D: d, Quality: q})
		} else {
			b.note("[OmniTiming] stage %s=%gs is %v", literal.Clip(s.label), s.v, err)
		}
	}
	for _, tr := range t.transfers {
		from, to, ok := parseEdge(tr.label)
		if !ok {
			b.note("[OmniTiming] transfers item %q is not from->to", literal.Clip(tr.label))
			continue
		}
		st := b.handOverInto(from, to)
		if st == nil {
			continue
		}
		// The line gives the sum of the hand-over's parts only: it is kept,
		// and makes no span, since it is no one part.
		v := floatValue(tr.v)
		st.Extra = b.AddExtra(st.Extra, &st.DroppedKeys, "transfer.total_time_ms", &v)
	}
	for _, h := range t.handoffs {
		from, _, ok := parseEdge(h.label)
		if !ok {
			b.note("[OmniTiming] handoffs item %q is not from->to", literal.Clip(h.label))
			continue
		}
		// The orchestrator's own hand-off, kept on the stage it leaves: it
		// is no phase of the catalogue, and makes no span.
		st := b.stages[from]
		if st == nil {
			b.note("[OmniTiming] a hand-off from stage %d, which its stages=[…] does not list", from)
			continue
		}
		v := floatValue(h.ms)
		st.Extra = b.AddExtra(st.Extra, &st.DroppedKeys, "stage_handoff_time_ms", &v)
		if h.hasAR2D {
			v := floatValue(h.ar2diffusion)
			st.Extra = b.AddExtra(st.Extra, &st.DroppedKeys, "ar2diffusion_time_ms", &v)
		}
	}
	b.Complete, b.Timed = true, true
}
