// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

const good = `{"request_id": "chatcmpl-ac59cea85b422f04", "model": "Qwen/Qwen-Image",
 "arrival_time": 1796000000.125, "modality": "image", "num_inference_steps": 50,
 "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion",
   "submit_time": 1796000000.127, "stage_gen_time_ms": 2310.5,
   "diffusion_metrics": {"scheduler_queue_wait_ms": 12.0,
     "diffusion_engine_exec_time_ms": 2100.0, "postprocess_time_ms": 45.2}}]}`

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "") }

func TestParseTheIssueExample(t *testing.T) {
	r, err := forms.Parse([]byte(oneLine(good)))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "chatcmpl-ac59cea85b422f04" || r.Model != "Qwen/Qwen-Image" || r.Steps != 50 || len(r.Stages) != 1 {
		t.Fatalf("%+v", r)
	}
	if !r.Arrival.Equal(time.Unix(1796000000, 125000000)) {
		t.Errorf("arrival %v", r.Arrival)
	}
	st := r.Stages[0]
	want := map[spans.Phase]time.Duration{spans.QueueWait: 12 * time.Millisecond, spans.Exec: 2100 * time.Millisecond,
		spans.Postprocess: 45200 * time.Microsecond}
	if len(st.Durations) != len(want) {
		t.Errorf("durations %v", st.Durations)
	}
	for p, d := range want {
		if st.Durations[p] != d {
			t.Errorf("%v = %v, want %v", p, st.Durations[p], d)
		}
	}
	if _, ok := st.Durations[spans.Preprocess]; ok {
		t.Error("preprocess is missing from the record: not measured")
	}
}

func TestBadLines(t *testing.T) {
	swap := func(old, new string) string { return strings.Replace(oneLine(good2()), old, new, 1) }
	cases := []struct {
		name string
		line string
		want error
	}{
		{"not JSON", `{"request_id": `, forms.ErrNotJSON},
		{"not an object", `[1, 2]`, forms.ErrNotJSON},
		{"negative duration", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": -45.2`), forms.ErrNegative},
		{"NaN duration", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": NaN`), forms.ErrNonFinite},
		{"infinite duration", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": Infinity`), forms.ErrNonFinite},
		{"huge duration", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": 1e300`), forms.ErrNonFinite},
		{"duration is a string", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": "45.2"`), forms.ErrNotNumber},
		{"duration is null", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": null`), forms.ErrNotNumber},
		{"missing request id", swap(`"request_id": "chatcmpl-ac59cea85b422f04", `, ``), forms.ErrNoRequestID},
		{"empty request id", swap(`"request_id": "chatcmpl-ac59cea85b422f04"`, `"request_id": ""`), forms.ErrNoRequestID},
		{"missing arrival time", swap(`"arrival_time": 1796000000.125, `, ``), forms.ErrNoTime},
		{"missing submit time", swap(`"submit_time": 1796000000.127, `, ``), forms.ErrNoTime},
		{"time is a string", swap(`"arrival_time": 1796000000.125`, `"arrival_time": "yesterday"`), forms.ErrBadField},
		{"parts longer than exec", swap(`"scheduler_queue_wait_ms": 12.0`, `"scheduler_queue_wait_ms": 2000.0, "forward_time_ms": 200`), forms.ErrPartsExceed},
		{"ms and s disagree", swap(`"postprocess_time_ms": 45.2`, `"postprocess_time_ms": 45.2, "postprocess_time_s": 0.5`), forms.ErrUnitsDisagree},
		{"no stages", swap(`"stages": [`, `"nostages": [`), forms.ErrNoStages},
		{"duplicate stage", `{"request_id":"a","arrival_time":1796000000,"stages":[{"stage_id":0,"submit_time":1796000000},{"stage_id":0,"submit_time":1796000000}]}`, forms.ErrDuplicateStage},
		{"trailing data", oneLine(good2()) + ` {}`, forms.ErrNotJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := forms.Parse([]byte(tc.line))
			if !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func good2() string { return good }

func TestUnitsAgreeingWithinRoundingAreOneMeasurement(t *testing.T) {
	line := strings.Replace(oneLine(good), `"postprocess_time_ms": 45.2`, `"postprocess_time_ms": 45.2, "postprocess_time_s": 0.045`, 1)
	r, err := forms.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Stages[0].Durations[spans.Postprocess]; d != 45200*time.Microsecond && d != 45*time.Millisecond {
		t.Errorf("postprocess %v", d)
	}
	line = strings.Replace(oneLine(good), `"postprocess_time_ms": 45.2`, `"postprocess_time_s": 0.0452`, 1)
	if r, err = forms.Parse([]byte(line)); err != nil || r.Stages[0].Durations[spans.Postprocess] != 45200*time.Microsecond {
		t.Errorf("the _s form alone: %v %v", err, r)
	}
}

func TestNumericRequestIDIsKeptAsWritten(t *testing.T) {
	line := strings.Replace(oneLine(good), `"request_id": "chatcmpl-ac59cea85b422f04"`, `"request_id": 00042`, 1)
	if _, err := forms.Parse([]byte(line)); err == nil {
		t.Log("00042 is not valid JSON; must be refused")
	}
	line = strings.Replace(oneLine(good), `"request_id": "chatcmpl-ac59cea85b422f04"`, `"request_id": 12345678901234567890`, 1)
	r, err := forms.Parse([]byte(line))
	if err != nil || r.ID != "12345678901234567890" {
		t.Errorf("a numeric id must be kept exactly as written: %q %v", r.ID, err)
	}
}

func TestUnknownKeysAreKept(t *testing.T) {
	line := strings.Replace(oneLine(good), `"modality": "image"`, `"modality": "image", "cfg_parallel": 2, "tags": ["a"]`, 1)
	line = strings.Replace(line, `"postprocess_time_ms": 45.2`, `"postprocess_time_ms": 45.2, "cache_hit": true, "weird_ms": 3`, 1)
	r, err := forms.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range append(r.Extra, r.Stages[0].Extra...) {
		got[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{"omni.record.cfg_parallel": "2", "omni.record.tags": `["a"]`,
		"omni.record.cache_hit": "true", "omni.record.weird_ms": "3", "omni.record.stage_gen_time_ms": ""} {
		if v == "" {
			if _, ok := got[k]; ok {
				t.Errorf("%s is a known key and must not be kept as unknown", k)
			}
			continue
		}
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func TestParseIsDeterministicAndRefusesConflictingDuplicates(t *testing.T) {
	same := `{"request_id":"a","arrival_time":1796000000,"stages":[{"stage_id":0,"submit_time":1796000000,"forward_time_ms":10,"diffusion_metrics":{"forward_time_ms":10}}]}`
	for i := 0; i < 50; i++ {
		r, err := forms.Parse([]byte(same))
		if err != nil || r.Stages[0].Durations[spans.Forward] != 10*time.Millisecond {
			t.Fatalf("run %d: %v %v", i, err, r)
		}
	}
	conflict := `{"request_id":"a","arrival_time":1796000000,"stages":[{"stage_id":0,"submit_time":1796000000,"forward_time_ms":10,"diffusion_metrics":{"forward_time_ms":20},"x_metrics":{"forward_time_ms":30}}]}`
	for i := 0; i < 50; i++ {
		if _, err := forms.Parse([]byte(conflict)); !errors.Is(err, forms.ErrBadField) {
			t.Fatalf("run %d: a key given three values must be refused, got %v", i, err)
		}
	}
}

func TestHandOverKeysAtAnOnlyStageAreKept(t *testing.T) {
	line := `{"request_id":"a","arrival_time":1796000000,"stages":[{"stage_id":0,"submit_time":1796000000,"rx_decode_time_ms":2.5,"rx_transfer_bytes":1024}]}`
	r, err := forms.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range r.Stages[0].RxExtra {
		got[string(kv.Key)] = kv.Value.String()
	}
	if got["omni.record.rx_decode_time_ms"] != "2.5" || got["omni.record.rx_transfer_bytes"] != "1024" {
		t.Errorf("hand-over keys %v", got)
	}
}
