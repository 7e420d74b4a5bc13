// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

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
	"vllm_queued":                plan.LLMQueue,
	"vllm_prefill":               plan.LLMPrefill,
	"vllm_decode":                plan.LLMDecode,
	"rx_decode_time":             plan.TransferRxDecode,
	"rx_in_flight_time":          plan.TransferInFlight,
}

// genTimeKey is the stage's own duration.
const genTimeKey = "stage_gen_time"

// roundingTolerance is how far the _ms and _s forms of one key may
// disagree: a value in seconds rounded to the millisecond.
const roundingTolerance = time.Millisecond

var requestKeys = map[string]bool{"request_id": true, "arrival_time": true, "model": true, "modality": true,
	"num_inference_steps": true, "height": true, "width": true, "num_frames": true, "guidance_scale": true, "stages": true}

// Parse parses one line of this project's JSON-lines record form.
func Parse(line []byte) (*Request, error) {
	top, err := literal.ParseJSON(line, literal.MaxRecordValues)
	if err != nil {
		if errors.Is(err, literal.ErrDuplicate) {
			return nil, fmt.Errorf("%w: %v", ErrDuplicateKey, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if top.Kind != literal.Object {
		return nil, fmt.Errorf("%w: a JSON %s", ErrNotJSON, top.Kind)
	}
	return FromRecord(&top)
}

func FromRecord(top *literal.Value) (*Request, error) {
	r := &Request{Source: sourceJSONL}
	idv, _ := top.Get("request_id")
	var err error
	if r.ID, err = IDOf(idv, "request_id"); err != nil {
		return nil, err
	}
	av, _ := top.Get("arrival_time")
	if r.Arrival, err = timeOf(av, "arrival_time"); err != nil {
		return nil, err
	}
	r.Run = own(av.Str)
	for _, f := range []struct {
		key string
		dst *string
	}{{"model", &r.Model}, {"modality", &r.Modality}} {
		if err := stringOf(top, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"num_inference_steps", &r.Steps}, {"height", &r.Height}, {"width", &r.Width}, {"num_frames", &r.Frames}} {
		if err := intOf(top, f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if g, ok := top.Get("guidance_scale"); ok && g.Kind != literal.Null {
		if !g.Finite() {
			return nil, fmt.Errorf("%w: guidance_scale", ErrBadField)
		}
		gs := g.Num
		r.Guidance = &gs
	}
	stages, ok := top.Get("stages")
	if !ok {
		return nil, ErrNoStages
	}
	if stages.Kind != literal.Array {
		return nil, fmt.Errorf("%w: stages is not an array", ErrBadField)
	}
	if len(stages.Items) == 0 {
		return nil, ErrNoStages
	}
	seen := map[int]bool{}
	for i := range stages.Items {
		st, err := parseStage(&stages.Items[i])
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
	r.Extra = extras(nil, top, func(k string) bool { return requestKeys[k] }, &r.DroppedKeys)
	return r, nil
}

var stageKeys = map[string]bool{"stage_id": true, "stage_name": true, "stage_type": true, "submit_time": true}

func parseStage(obj *literal.Value) (Stage, error) {
	st := Stage{Durations: map[spans.Phase]time.Duration{}}
	if obj.Kind != literal.Object {
		return st, fmt.Errorf("%w: a stage is not an object", ErrBadField)
	}
	if err := intOf(obj, "stage_id", &st.ID); err != nil {
		return st, err
	}
	if err := stringOf(obj, "stage_name", &st.Name); err != nil {
		return st, err
	}
	if err := stringOf(obj, "stage_type", &st.Type); err != nil {
		return st, err
	}
	sv, _ := obj.Get("submit_time")
	var err error
	if st.Submit, err = timeOf(sv, "submit_time"); err != nil {
		return st, err
	}
	// The stage's keys, and those of its *_metrics objects, form one key
	// space; a key given twice must agree.
	n := len(obj.Keys)
	for i, k := range obj.Keys {
		if strings.HasSuffix(k, "_metrics") {
			n += len(obj.Vals[i].Keys)
		}
	}
	flat := literal.Value{Kind: literal.Object, Keys: make([]string, 0, n), Vals: make([]literal.Value, 0, n)}
	put := func(k string, v *literal.Value) error {
		if prev, dup := flat.Get(k); dup {
			if !sameValue(prev, v) {
				return fmt.Errorf("%w: %s appears twice with different values", ErrBadField, literal.Clip(k))
			}
			return nil
		}
		flat.Keys = append(flat.Keys, k)
		flat.Vals = append(flat.Vals, *v)
		return nil
	}
	for i, k := range obj.Keys {
		v := &obj.Vals[i]
		if strings.HasSuffix(k, "_metrics") {
			if v.Kind != literal.Object {
				return st, fmt.Errorf("%w: %s is not an object", ErrBadField, literal.Clip(k))
			}
			for j, ik := range v.Keys {
				if err := put(ik, &v.Vals[j]); err != nil {
					return st, err
				}
			}
			continue
		}
		if !stageKeys[k] {
			if err := put(k, v); err != nil {
				return st, err
			}
		}
	}
	used := make(map[string]bool, len(flat.Keys))
	if err := readDurations(&st, &flat, used); err != nil {
		return st, err
	}
	if v, ok := flat.Get("vllm_num_preemptions"); ok {
		n, err := integer(v)
		if err != nil || n < 0 || n > 1<<31 {
			return st, fmt.Errorf("%w: vllm_num_preemptions", ErrBadField)
		}
		p := int(n)
		st.Preemptions = &p
		used["vllm_num_preemptions"] = true
	}
	if v, ok := flat.Get("rx_transfer_bytes"); ok {
		n, err := integer(v)
		if err != nil || n < 0 {
			return st, fmt.Errorf("%w: rx_transfer_bytes", ErrBadField)
		}
		st.RxBytes = &n
		used["rx_transfer_bytes"] = true
	}
	// The hand-over keys, kept as written too: at a first (or only) stage
	// there is no previous stage to make a transfer from, and they are then
	// recorded as omni.record.* attributes rather than dropped.
	for i, k := range flat.Keys {
		if strings.HasPrefix(k, "rx_") && used[k] {
			st.RxExtra = append(st.RxExtra, extraValue(k, &flat.Vals[i]))
		}
	}
	if err := checkExecParts(&st); err != nil {
		return st, err
	}
	st.Extra = extras(nil, &flat, func(k string) bool { return used[k] }, &st.DroppedKeys)
	return st, nil
}

// readDurations reads the duration keys of a stage (with their _ms or _s
// unit) into st, marking each key it used.
func readDurations(st *Stage, flat *literal.Value, used map[string]bool) error {
	type seen struct {
		d   time.Duration
		key string
	}
	durs := make(map[string]seen, 8)
	for i, k := range flat.Keys {
		stem, unit, ok := unitKey(k)
		if !ok {
			continue
		}
		if _, isPhase := durationKeys[stem]; !isPhase && stem != genTimeKey {
			continue
		}
		d, err := duration(&flat.Vals[i], unit)
		if err != nil {
			return fmt.Errorf("%s: %w", literal.Clip(k), err)
		}
		used[k] = true
		if prev, dup := durs[stem]; dup {
			if diff := prev.d - d; diff > roundingTolerance || diff < -roundingTolerance {
				return fmt.Errorf("%w: %s_ms and %s_s (%v and %v)", ErrUnitsDisagree, stem, stem, prev.d, d)
			}
			// Keep the millisecond form, the finer of the two.
			if strings.HasSuffix(prev.key, "_ms") {
				continue
			}
		}
		durs[stem] = seen{d, k}
	}
	for stem, s := range durs {
		if stem == genTimeKey {
			st.GenTime = &Measure{D: s.d}
			continue
		}
		st.set(durationKeys[stem], s.d, Quality{})
	}
	return nil
}

// sameValue reports whether two values read the same.
func sameValue(a, b *literal.Value) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case literal.Number:
		return a.Num == b.Num || a.Str == b.Str
	case literal.String:
		return a.Str == b.Str
	case literal.Bool:
		return a.Bool == b.Bool
	case literal.Null:
		return true
	}
	return string(appendJSON(nil, a, 1<<16)) == string(appendJSON(nil, b, 1<<16))
}

// ExecParts are the phases that lie inside exec, placed one after another.
var ExecParts = []spans.Phase{spans.QueueWait, spans.KVRecv, spans.Forward, spans.VAEDecode}

// checkExecParts refuses a stage whose parts inside exec (queue wait, KV
// receive, forward, VAE decode) cannot be placed inside it. A record has
// durations only, and the documented order places these parts one after
// another inside exec (the scheduler admits, then the worker receives the
// KV, runs the loop, decodes), so the record is consistent only if their
// end falls within exec. The sum saturates, so that four parts of 4.6e9 s
// cannot wrap around and pass inside a 1 s exec; it is a check of the
// placement, and no sum is ever exported or shown. Values that are
// truncated or summed by their writer get their resolution as slack.
func checkExecParts(st *Stage) error {
	exec, ok := st.Durations[spans.Exec]
	if !ok {
		return nil
	}
	var parts, slack time.Duration
	for _, p := range ExecParts {
		d, ok := st.Durations[p]
		if !ok {
			continue
		}
		parts = AddSat(parts, d)
		slack += st.Quality[p].Resolution
	}
	if slack < roundingTolerance {
		slack = roundingTolerance
	}
	if parts > AddSat(exec, slack+st.Quality[spans.Exec].Resolution) {
		return fmt.Errorf("%w (%v > %v)", ErrPartsExceed, parts, exec)
	}
	return nil
}

// AddSat adds two non-negative durations, saturating instead of wrapping.
func AddSat(a, b time.Duration) time.Duration {
	if a > maxDurationValue-b {
		return maxDurationValue
	}
	return a + b
}

const maxDurationValue = time.Duration(1<<63 - 1)

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
