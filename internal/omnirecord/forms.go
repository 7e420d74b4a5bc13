package omnirecord

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/otelomni/otelomni/spans"
)

// The forms vLLM-Omni writes per request, mapped onto builders. Field
// names are facts of its code (vllm_omni/metrics/stats.py and, in older
// releases, vllm_omni/entrypoints/log_utils.py); how each 0 is read is in
// rows.go.

// summaryRequest is one request's rows in a summary dict.
type summaryRequest struct {
	id                string
	stages, transfers []Value
	e2e               *Value
}

// ErrNotSummary: a document that is not a summary dict.
var ErrNotSummary = errors.New("not a summary dict (no stage_table, trans_table or e2e_table)")

// summaryRows groups a summary dict's tables by request, in the order
// requests first appear, and returns the run it describes: a digest of
// its overall_summary and final_stage_id, figures of that run alone.
func summaryRows(doc *Value) ([]summaryRequest, string, error) {
	if doc.Kind != Object {
		return nil, "", ErrNotSummary
	}
	byID := map[string]int{}
	var out []summaryRequest
	get := func(id string) *summaryRequest {
		i, ok := byID[id]
		if !ok {
			i = len(out)
			byID[id] = i
			out = append(out, summaryRequest{id: id})
		}
		return &out[i]
	}
	found := false
	for _, t := range []struct{ table, rows string }{{"stage_table", "stages"}, {"trans_table", "transfers"}, {"e2e_table", ""}} {
		tv, ok := doc.Get(t.table)
		if !ok {
			continue
		}
		found = true
		if tv.Kind != Array {
			return nil, "", fmt.Errorf("%w: %s is not a list", ErrBadField, t.table)
		}
		for i := range tv.Items {
			entry := &tv.Items[i]
			if entry.Kind != Object {
				continue
			}
			idv, _ := entry.Get("request_id")
			id, err := idOf(idv, "request_id")
			if err != nil {
				continue
			}
			sr := get(id)
			if t.rows == "" {
				sr.e2e = entry
				continue
			}
			rows, ok := entry.Get(t.rows)
			if !ok || rows.Kind != Array {
				continue
			}
			if t.rows == "stages" {
				sr.stages = append(sr.stages, rows.Items...)
			} else {
				sr.transfers = append(sr.transfers, rows.Items...)
			}
		}
	}
	if !found {
		return nil, "", ErrNotSummary
	}
	h := newBuilder("", "", "")
	for _, k := range []string{"overall_summary", "final_stage_id"} {
		if v, ok := doc.Get(k); ok {
			h.mix(k)
			h.mix(string(appendJSON(nil, v, 1<<20)))
		}
	}
	return out, fmt.Sprintf("summary:%016x", h.digest), nil
}

// build makes the request of one summary entry.
func (sr *summaryRequest) build(source, run string) *builder {
	b := newBuilder(sr.id, source, run)
	sr.applyTo(b)
	return b
}

// applyTo reads the entry onto b.
func (sr *summaryRequest) applyTo(b *builder) {
	for _, rows := range [][]Value{sr.stages, sr.transfers} {
		for i := range rows {
			b.mix(string(appendJSON(nil, &rows[i], 1<<16)))
		}
	}
	if sr.e2e != nil {
		b.mix(string(appendJSON(nil, sr.e2e, 1<<16)))
	}
	applySummaryRows(b, sr.stages, sr.transfers, sr.e2e)
}

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
	b.complete = true
}

// Event types of the older event dicts (and of their JSON-lines form).
const (
	evTransferTx     = "transfer_stats"
	evTransferRx     = "transfer_rx_stats"
	evTransferTotal  = "transfer_total_stats"
	evStage          = "Request_stage_stats"
	evStageJSONL     = "stage_request_stats"
	evRequest        = "request_level_metrics"
	evRequestJSONL   = "orchestrator_request_e2e"
	evRunningAverage = "Stage_running_avg"
)

// eventRequestID returns the request an event is about, or "" for an
// event of the whole run.
func eventRequestID(ev *Value) (string, string) {
	tv, ok := ev.Get("type")
	if !ok || tv.Kind != String {
		return "", ""
	}
	switch tv.Str {
	case evTransferTx, evTransferRx, evTransferTotal, evStage, evStageJSONL, evRequest, evRequestJSONL:
	default:
		return "", tv.Str
	}
	idv, _ := ev.Get("request_id")
	id, err := idOf(idv, "request_id")
	if err != nil {
		return "", tv.Str
	}
	return id, tv.Str
}

// applyEvent reads one event dict onto b.
func (b *builder) applyEvent(kind string, ev *Value) {
	switch kind {
	case evTransferTx, evTransferRx, evTransferTotal:
		from, to := -1, -1
		if v, ok := ev.Get("from_stage"); ok {
			if n, err := integer(v); err == nil {
				from = int(n)
			}
		}
		if v, ok := ev.Get("to_stage"); ok {
			if n, err := integer(v); err == nil {
				to = int(n)
			}
		}
		if from < 0 || to < 0 || from > 1<<20 || to > 1<<20 {
			return
		}
		if kind == evTransferTx {
			b.addTx(from, to, ev)
			return
		}
		sizeKey := "rx_bytes"
		if kind == evTransferTotal {
			sizeKey = "size_bytes"
			// The total repeats the parts, with the last chunk's send time
			// only: it fills what the other events did not say.
			if s := b.stages[to]; s != nil {
				if _, ok := s.Durations[spans.TransferTx]; ok {
					ev = without(ev, "tx_time_ms")
				}
			}
		}
		b.applyTransfer(from, to, ev, Quality{}, sizeKey, 1)
	case evStage, evStageJSONL:
		row := without(ev, "type", "request_id", "rx_transfer_bytes", "rx_decode_time_ms", "rx_in_flight_time_ms", "rx_mbps")
		b.applyStageRow(row, rowSource{})
		if v, ok := ev.Get("stage_id"); ok {
			if n, err := integer(v); err == nil && n > 0 && n < 1<<20 {
				// The receive side of the hand-over into this stage; at the
				// first stage these are defaults, and are left out.
				rx := without(ev, "type", "request_id", "stage_id", "batch_size", "num_tokens_out", "stage_gen_time_ms", "tokens_per_s", "rx_mbps")
				rx = renamed(rx, map[string]string{"rx_decode_time_ms": "rx_decode_time_ms", "rx_in_flight_time_ms": "in_flight_time_ms"})
				b.applyTransfer(int(n)-1, int(n), rx, Quality{}, "rx_transfer_bytes", 1)
			}
		}
	case evRequest, evRequestJSONL:
		if stages, ok := ev.Get("stages"); ok && stages.Kind == Object {
			for i, k := range stages.Keys {
				id, _, ok := parseLabel(k)
				row := &stages.Vals[i]
				if !ok || row.Kind != Object {
					continue
				}
				r := *row
				r.Keys = append([]string{"stage_id"}, r.Keys...)
				r.Vals = append([]Value{{Kind: Number, Num: float64(id), Str: k}}, r.Vals...)
				b.applyStageRow(&r, rowSource{})
			}
		}
		b.applyE2ERow(ev, rowSource{})
	}
}

// addTx adds one chunk's send time and size: the older log writes one
// event per chunk sent.
func (b *builder) addTx(from, to int, ev *Value) {
	s := b.stage(to)
	f := from
	s.RxFrom = &f
	n, ok := number(func() *Value { v, _ := ev.Get("tx_time_ms"); return v }())
	if ok && n > 0 {
		if d, err := millis(n); err == nil {
			if old, had := s.Durations[spans.TransferTx]; had {
				s.set(spans.TransferTx, addSat(old, d), Quality{Summed: true})
			} else {
				s.set(spans.TransferTx, d, Quality{})
			}
		}
	}
	if v, ok := ev.Get("size_bytes"); ok {
		if n, ok := number(v); ok && n > 0 && n < 1<<62 {
			bytes := int64(n)
			if s.RxBytes != nil {
				bytes += *s.RxBytes
				s.RxBytesSummed = true
			}
			s.RxBytes = &bytes
		}
	}
}

// without returns obj less the keys named.
func without(obj *Value, keys ...string) *Value {
	out := &Value{Kind: Object}
	for i, k := range obj.Keys {
		skip := false
		for _, x := range keys {
			if k == x {
				skip = true
				break
			}
		}
		if !skip {
			out.Keys = append(out.Keys, k)
			out.Vals = append(out.Vals, obj.Vals[i])
		}
	}
	return out
}

// renamed returns obj with keys renamed.
func renamed(obj *Value, names map[string]string) *Value {
	out := &Value{Kind: Object, Vals: obj.Vals, Keys: make([]string, len(obj.Keys))}
	for i, k := range obj.Keys {
		if n, ok := names[k]; ok {
			k = n
		}
		out.Keys[i] = k
	}
	return out
}
