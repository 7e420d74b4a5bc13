package omnirecord

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// omniTiming is one [OmniTiming] line of the orchestrator
// (OrchestratorAggregator.format_request_timing_line): seconds with two
// decimals, except the transfers' milliseconds.
type omniTiming struct {
	id                      string
	total, preprocess, eng  float64
	stages                  []labelValue
	transfers               []labelValue
	hasTotal, hasPre, hasEn bool
}

type labelValue struct {
	label string
	v     float64
}

const omniTimingTag = "[OmniTiming] "

// parseOmniTiming reads an [OmniTiming] message. A request id is
// everything between "req=" and " total=", so an id with spaces survives.
func parseOmniTiming(msg string) (*omniTiming, error) {
	i := strings.Index(msg, omniTimingTag)
	if i < 0 {
		return nil, errors.New("no [OmniTiming] tag")
	}
	rest := msg[i+len(omniTimingTag):]
	if !strings.HasPrefix(rest, "req=") {
		return nil, errors.New("no req=")
	}
	rest = rest[len("req="):]
	j := strings.Index(rest, " total=")
	if j <= 0 {
		return nil, errors.New("no total=")
	}
	t := &omniTiming{id: rest[:j]}
	for _, field := range splitFields(rest[j+1:]) {
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			continue
		}
		switch k {
		case "total", "preprocess", "engine":
			f, ok := seconds(v)
			if !ok {
				return nil, fmt.Errorf("%s=%s is not seconds", k, clip(v))
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
				at := strings.LastIndex(item, "=")
				if at <= 0 {
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
	return plainNumber(strings.TrimSuffix(v, "s"))
}

func milliseconds(v string) (float64, bool) {
	if !strings.HasSuffix(v, "ms") {
		return 0, false
	}
	return plainNumber(strings.TrimSuffix(v, "ms"))
}

// plainNumber reads a finite non-negative number, thousands separators
// allowed.
func plainNumber(s string) (float64, bool) {
	v := Value{Kind: Number}
	f, ok := parseNumber(strings.ReplaceAll(strings.TrimSpace(s), ",", ""))
	v.Num = f
	if !ok || !v.Finite() || f < 0 {
		return 0, false
	}
	return f, true
}

// omniTimingResolution: seconds with two decimals.
const omniTimingResolution = 10 * time.Millisecond

// apply reads the line onto b and closes the request: the line is
// written once the request is finished.
func (t *omniTiming) apply(b *builder) {
	q := Quality{Resolution: omniTimingResolution}
	if t.hasEn {
		if d, err := millis(t.eng * 1000); err == nil {
			b.setTotal(Measure{D: d, Quality: q})
		}
	}
	for _, e := range []struct {
		key string
		v   float64
		ok  bool
	}{{"request_wall_time_s", t.total, t.hasTotal}, {"input_preprocess_time_s", t.preprocess, t.hasPre}} {
		if e.ok {
			v := Value{Kind: Number, Num: e.v, Str: fmt.Sprint(e.v)}
			b.r.Extra = addExtra(b.r.Extra, e.key, &v)
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
		}
	}
	for _, tr := range t.transfers {
		from, to, ok := parseEdge(tr.label)
		if !ok {
			continue
		}
		st := b.stage(to)
		f := from
		st.RxFrom = &f
		// The line gives the sum of the hand-over's parts only: it is kept,
		// and makes no span, since it is no one part.
		v := Value{Kind: Number, Num: tr.v, Str: fmt.Sprint(tr.v)}
		st.Extra = addExtra(st.Extra, "transfer.total_time_ms", &v)
	}
	b.complete, b.timed = true, true
}
