// Package omnirecord reads the flat per-request timing records that engines
// write (the reference system keeps a dictionary of milliseconds per request
// and stage), one JSON object per line, and turns each into otelomni's
// record path: a trace whose phases are placed in the documented phase
// order. A key that is missing makes no span; a key that is 0 makes a
// zero-length span; a key the package does not know is kept as an
// omni.record.<key> attribute.
package omnirecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// Request is one parsed record line.
type Request struct {
	ID       string
	Model    string
	Modality string
	Arrival  time.Time
	Steps    int
	Guidance *float64
	Height   int
	Width    int
	Frames   int
	// Extra are the top-level keys this package does not know.
	Extra  []attribute.KeyValue
	Stages []Stage
}

// Stage is one stage of a record.
type Stage struct {
	ID     int
	Name   string
	Type   string
	Submit time.Time
	// GenTime is stage_gen_time; nil when missing.
	GenTime *time.Duration
	// Durations holds each phase measured, by phase; a phase that is not a
	// key is not measured.
	Durations   map[spans.Phase]time.Duration
	Preemptions *int
	// RxBytes, with RxDecode and RxInFlight among Durations, describe the
	// hand-over from the previous stage.
	RxBytes *int64
	// RxExtra are the hand-over keys as attributes, for a stage with no
	// previous stage.
	RxExtra []attribute.KeyValue
	Extra   []attribute.KeyValue
}

// durationKeys maps a record's duration key, without its unit suffix, to
// the phase it measures.
var durationKeys = map[string]spans.Phase{
	"preprocess_time":            spans.Preprocess,
	"diffusion_engine_exec_time": spans.Exec,
	"scheduler_queue_wait":       spans.QueueWait,
	"output_ready_wait_time":     spans.OutputReadyWait,
	"postprocess_time":           spans.Postprocess,
	"kv_recv_time":               spans.KVRecv,
	"forward_time":               spans.Forward,
	"vae_decode_time":            spans.VAEDecode,
	"vllm_queued":                spans.LLMQueue,
	"vllm_prefill":               spans.LLMPrefill,
	"vllm_decode":                spans.LLMDecode,
	"rx_decode_time":             spans.TransferRxDecode,
	"rx_in_flight_time":          spans.TransferInFlight,
}

// genTimeKey is the stage's own duration.
const genTimeKey = "stage_gen_time"

// roundingTolerance is how far the _ms and _s forms of one key may
// disagree: a value in seconds rounded to the millisecond.
const roundingTolerance = time.Millisecond

// Bad input reasons.
var (
	ErrNotJSON        = errors.New("not a JSON object")
	ErrNoRequestID    = errors.New("missing request_id")
	ErrNoTime         = errors.New("missing time")
	ErrNotNumber      = errors.New("duration is not a number")
	ErrNonFinite      = errors.New("duration is not finite")
	ErrNegative       = errors.New("negative duration")
	ErrUnitsDisagree  = errors.New("the _ms and _s forms of a key disagree beyond rounding")
	ErrPartsExceed    = errors.New("the parts inside exec last longer than exec")
	ErrBadField       = errors.New("malformed field")
	ErrNoStages       = errors.New("no stages")
	ErrDuplicateStage = errors.New("duplicate stage_id")
)

// nonFinite marks NaN and Infinity tokens, which Python's json module
// writes and JSON does not allow, so that they are reported as non-finite
// durations rather than as unreadable lines.
const nonFinite = "omnirecord:non-finite-number"

// Parse parses one record line.
func Parse(line []byte) (*Request, error) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(markNonFinite(line)))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil || top == nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, errOr(err, "null"))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrNotJSON)
	}
	r := &Request{}
	var err error
	if r.ID, err = idField(top, "request_id"); err != nil {
		return nil, err
	}
	if r.Arrival, err = timeField(top, "arrival_time"); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"model", &r.Model}, {"modality", &r.Modality}} {
		if err := stringField(top, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"num_inference_steps", &r.Steps}, {"height", &r.Height}, {"width", &r.Width}, {"num_frames", &r.Frames}} {
		if err := intField(top, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["guidance_scale"]; ok {
		g, err := number(raw)
		if err != nil || math.IsNaN(g) || math.IsInf(g, 0) {
			return nil, fmt.Errorf("%w: guidance_scale", ErrBadField)
		}
		r.Guidance = &g
	}
	rawStages, ok := top["stages"]
	if !ok {
		return nil, ErrNoStages
	}
	var stages []map[string]json.RawMessage
	if err := json.Unmarshal(rawStages, &stages); err != nil {
		return nil, fmt.Errorf("%w: stages: %v", ErrBadField, err)
	}
	if len(stages) == 0 {
		return nil, ErrNoStages
	}
	seen := map[int]bool{}
	for i, raw := range stages {
		st, err := parseStage(raw)
		if err != nil {
			return nil, fmt.Errorf("stage %d: %w", i, err)
		}
		if seen[st.ID] {
			return nil, fmt.Errorf("stage %d: %w %d", i, ErrDuplicateStage, st.ID)
		}
		seen[st.ID] = true
		r.Stages = append(r.Stages, st)
	}
	sort.SliceStable(r.Stages, func(i, j int) bool { return r.Stages[i].ID < r.Stages[j].ID })
	known := map[string]bool{"request_id": true, "arrival_time": true, "model": true, "modality": true,
		"num_inference_steps": true, "height": true, "width": true, "num_frames": true, "guidance_scale": true, "stages": true}
	r.Extra = extras(top, known)
	return r, nil
}

func parseStage(obj map[string]json.RawMessage) (Stage, error) {
	st := Stage{Durations: map[spans.Phase]time.Duration{}}
	if obj == nil {
		return st, fmt.Errorf("%w: a stage is not an object", ErrBadField)
	}
	if err := intField(obj, "stage_id", &st.ID); err != nil {
		return st, err
	}
	if err := stringField(obj, "stage_name", &st.Name); err != nil {
		return st, err
	}
	if err := stringField(obj, "stage_type", &st.Type); err != nil {
		return st, err
	}
	var err error
	if st.Submit, err = timeField(obj, "submit_time"); err != nil {
		return st, err
	}
	// The stage's keys, and those of its *_metrics objects, form one key
	// space.
	flat := map[string]json.RawMessage{}
	known := map[string]bool{"stage_id": true, "stage_name": true, "stage_type": true, "submit_time": true}
	put := func(k string, v json.RawMessage) error {
		if prev, dup := flat[k]; dup && !bytes.Equal(bytes.TrimSpace(prev), bytes.TrimSpace(v)) {
			return fmt.Errorf("%w: %s appears twice with different values", ErrBadField, k)
		}
		flat[k] = v
		return nil
	}
	// In sorted order, so that a line always parses the same way.
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		if strings.HasSuffix(k, "_metrics") {
			var inner map[string]json.RawMessage
			if err := json.Unmarshal(v, &inner); err != nil || inner == nil {
				return st, fmt.Errorf("%w: %s is not an object", ErrBadField, k)
			}
			for _, ik := range sortedKeys(inner) {
				if err := put(ik, inner[ik]); err != nil {
					return st, err
				}
			}
			continue
		}
		if !known[k] {
			if err := put(k, v); err != nil {
				return st, err
			}
		}
	}
	used := map[string]bool{}
	durs := map[string]time.Duration{}
	for _, base := range sortedKeys(flat) {
		stem, unit, ok := unitKey(base)
		if !ok {
			continue
		}
		if _, isPhase := durationKeys[stem]; !isPhase && stem != genTimeKey {
			continue
		}
		d, err := duration(flat[base], unit)
		if err != nil {
			return st, fmt.Errorf("%s: %w", base, err)
		}
		used[base] = true
		if prev, dup := durs[stem]; dup {
			if diff := prev - d; diff > roundingTolerance || diff < -roundingTolerance {
				return st, fmt.Errorf("%w: %s_ms and %s_s (%v and %v)", ErrUnitsDisagree, stem, stem, prev, d)
			}
			continue
		}
		durs[stem] = d
	}
	for stem, d := range durs {
		if stem == genTimeKey {
			d := d
			st.GenTime = &d
			continue
		}
		st.Durations[durationKeys[stem]] = d
	}
	if raw, ok := flat["vllm_num_preemptions"]; ok {
		n, err := integer(raw)
		if err != nil || n < 0 {
			return st, fmt.Errorf("%w: vllm_num_preemptions", ErrBadField)
		}
		v := int(n)
		st.Preemptions = &v
		used["vllm_num_preemptions"] = true
	}
	if raw, ok := flat["rx_transfer_bytes"]; ok {
		n, err := integer(raw)
		if err != nil || n < 0 {
			return st, fmt.Errorf("%w: rx_transfer_bytes", ErrBadField)
		}
		st.RxBytes = &n
		used["rx_transfer_bytes"] = true
	}
	// The hand-over keys, kept as written too: at a first (or only) stage
	// there is no previous stage to make a transfer from, and they are then
	// recorded as omni.record.* attributes rather than dropped.
	for _, k := range sortedKeys(flat) {
		if strings.HasPrefix(k, "rx_") && used[k] {
			st.RxExtra = append(st.RxExtra, extraValue(attrs.RecordKey(k), flat[k]))
		}
	}
	if err := checkExecParts(st.Durations); err != nil {
		return st, err
	}
	st.Extra = extras(flat, used)
	return st, nil
}

// checkExecParts refuses a stage whose parts inside exec (queue wait, KV
// receive, forward, VAE decode) cannot be placed inside it. A record has
// durations only, and the documented order places these parts one after
// another inside exec (DOMAIN.md: the scheduler admits, then the worker
// receives the KV, runs the loop, decodes), so the record is consistent
// only if their end falls within exec. This is a consistency check of the
// placement; no sum is ever exported or shown.
func checkExecParts(d map[spans.Phase]time.Duration) error {
	exec, ok := d[spans.Exec]
	if !ok {
		return nil
	}
	var parts time.Duration
	for _, p := range []spans.Phase{spans.QueueWait, spans.KVRecv, spans.Forward, spans.VAEDecode} {
		parts += d[p]
	}
	if parts > exec+roundingTolerance {
		return fmt.Errorf("%w (%v > %v)", ErrPartsExceed, parts, exec)
	}
	return nil
}

// unitKey splits "forward_time_ms" into "forward_time" and its unit.
func unitKey(k string) (string, time.Duration, bool) {
	switch {
	case strings.HasSuffix(k, "_ms"):
		return strings.TrimSuffix(k, "_ms"), time.Millisecond, true
	case strings.HasSuffix(k, "_s"):
		return strings.TrimSuffix(k, "_s"), time.Second, true
	}
	return "", 0, false
}

func duration(raw json.RawMessage, unit time.Duration) (time.Duration, error) {
	if isNonFinite(raw) {
		return 0, ErrNonFinite
	}
	f, err := number(raw)
	if err != nil {
		return 0, ErrNotNumber
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, ErrNonFinite
	}
	if f < 0 {
		return 0, fmt.Errorf("%w: %v", ErrNegative, f)
	}
	ns := f * float64(unit)
	if ns > float64(math.MaxInt64/2) {
		return 0, fmt.Errorf("%w: %v is out of range", ErrNonFinite, f)
	}
	return time.Duration(math.Round(ns)), nil
}

func number(raw json.RawMessage) (float64, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, err
	}
	if s := string(raw); len(s) > 0 && s[0] == '"' {
		return 0, errors.New("a string, not a number")
	}
	return n.Float64()
}

func integer(raw json.RawMessage) (int64, error) {
	f, err := number(raw)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("not an integer")
	}
	return int64(f), nil
}

// idField returns an id exactly as written: a string, or a number's literal
// text (never parsed: "00042" stays "00042").
func idField(obj map[string]json.RawMessage, key string) (string, error) {
	raw, ok := obj[key]
	if !ok || string(raw) == "null" {
		return "", ErrNoRequestID
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return "", ErrNoRequestID
		}
		return s, nil
	}
	if _, err := number(raw); err == nil {
		return string(bytes.TrimSpace(raw)), nil
	}
	return "", fmt.Errorf("%w: %s is neither a string nor a number", ErrBadField, key)
}

// timeField reads Unix seconds (a float) as a time.
func timeField(obj map[string]json.RawMessage, key string) (time.Time, error) {
	raw, ok := obj[key]
	if !ok || string(raw) == "null" {
		return time.Time{}, fmt.Errorf("%w: %s", ErrNoTime, key)
	}
	f, err := number(raw)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e11 {
		return time.Time{}, fmt.Errorf("%w: %s is not a Unix time in seconds", ErrBadField, key)
	}
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64(math.Round((f-sec)*1e9))).UTC(), nil
}

func stringField(obj map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := obj[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%w: %s is not a string", ErrBadField, key)
	}
	return nil
}

func intField(obj map[string]json.RawMessage, key string, dst *int) error {
	raw, ok := obj[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	n, err := integer(raw)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("%w: %s is not a non-negative integer", ErrBadField, key)
	}
	*dst = int(n)
	return nil
}

// extras keeps the keys not in known as omni.record.<key> attributes.
func extras(obj map[string]json.RawMessage, known map[string]bool) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, k := range sortedKeys(obj) {
		if known[k] {
			continue
		}
		out = append(out, extraValue(attrs.RecordKey(k), obj[k]))
	}
	return out
}

func extraValue(key attribute.Key, raw json.RawMessage) attribute.KeyValue {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if isNonFinite(raw) || d.Decode(&v) != nil {
		return key.String(strings.ReplaceAll(string(raw), nonFinite, "NaN"))
	}
	switch x := v.(type) {
	case string:
		return key.String(x)
	case bool:
		return key.Bool(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return key.Int64(i)
		}
		if f, err := x.Float64(); err == nil {
			return key.Float64(f)
		}
	}
	return key.String(string(raw)) // objects, arrays and null, as JSON text
}

func sortedKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// markNonFinite replaces the tokens NaN, Infinity and -Infinity outside
// strings with a marked string.
func markNonFinite(b []byte) []byte {
	var out []byte
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if c == '"' {
			inStr = true
		}
		for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(b[i:], []byte(tok)) {
				if out == nil {
					out = append([]byte(nil), b[:i]...)
				}
				out = append(out, strconv.Quote(nonFinite)...)
				i += len(tok) - 1
				goto next
			}
		}
		if out != nil {
			out = append(out, c)
		}
	next:
	}
	if out == nil {
		return b
	}
	return out
}

func isNonFinite(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == nonFinite
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}
