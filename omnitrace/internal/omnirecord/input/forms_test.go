// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// collected is a handler that keeps what an input hands on.
type collected struct {
	reqs     []*forms.Request
	problems []string
}

func (c *collected) Request(r *forms.Request, _ time.Time) { c.reqs = append(c.reqs, r) }
func (c *collected) Problem(line int, err error) {
	c.problems = append(c.problems, itoa(line)+": "+err.Error())
}

func (c *collected) byID(t *testing.T, id string) *forms.Request {
	t.Helper()
	for _, r := range c.reqs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no request %q among %d", id, len(c.reqs))
	return nil
}

// readAll feeds an input line by line, as the command does.
func readAll(t *testing.T, data []byte, opts Options) *collected {
	t.Helper()
	c := &collected{}
	in, err := NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), opts, c)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		in.Line(sc.Bytes(), off)
		off += int64(len(sc.Bytes())) + 1
	}
	in.End()
	return c
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// phase checks one phase of a stage: measured with d and quality q, or
// (d < 0) not measured.
func phase(t *testing.T, st *forms.Stage, p spans.Phase, d time.Duration, q forms.Quality) {
	t.Helper()
	got, ok := st.Durations[p]
	switch {
	case d < 0 && ok:
		t.Errorf("stage %d: %v = %v, want not measured", st.ID, p, got)
	case d >= 0 && !ok:
		t.Errorf("stage %d: %v not measured, want %v", st.ID, p, d)
	case d >= 0 && (got != d || st.Quality[p] != q):
		t.Errorf("stage %d: %v = %v %+v, want %v %+v", st.ID, p, got, st.Quality[p], d, q)
	}
}

func TestSummaryDict(t *testing.T) {
	c := readAll(t, fixture(t, "summary.json"), Options{})
	if len(c.problems) > 0 || len(c.reqs) != 3 {
		t.Fatalf("%d requests, problems %q", len(c.reqs), c.problems)
	}
	r := c.reqs[0]
	if r.ID != "7" || r.Source != "summary" || r.Total == nil || r.Total.D != ms(3321.75) || len(r.Stages) != 2 {
		t.Fatalf("request %+v", r)
	}
	thinker, dit := &r.Stages[0], &r.Stages[1]
	if thinker.Name != "thinker" || thinker.Type != "llm" || thinker.GenTime.D != ms(812.25) || dit.Name != "dit" || dit.Type != "diffusion" {
		t.Errorf("stages %+v / %+v", thinker, dit)
	}
	truncated := forms.Quality{Resolution: time.Millisecond, Summed: true}
	phase(t, dit, spans.Exec, ms(2301), truncated)
	phase(t, dit, spans.Forward, ms(2105), truncated)
	phase(t, dit, spans.KVRecv, ms(12), truncated)
	phase(t, dit, spans.VAEDecode, ms(150), truncated)
	phase(t, dit, spans.Postprocess, ms(41), truncated)
	// Written only when measured: a 0 is a measurement under a millisecond.
	phase(t, dit, spans.QueueWait, 0, truncated)
	// Written as 0 when there is nothing to measure: not measured.
	phase(t, dit, spans.Preprocess, -1, forms.Quality{})
	phase(t, dit, spans.OutputReadyWait, -1, forms.Quality{})
	// The hand-over: send time summed over chunks; an in-flight 0 is the
	// dataclass's default.
	phase(t, dit, plan.TransferTx, ms(3.25), forms.Quality{Summed: true})
	phase(t, dit, plan.TransferRxDecode, ms(1.5), forms.Quality{})
	phase(t, dit, plan.TransferInFlight, -1, forms.Quality{})
	if dit.RxBytes == nil || *dit.RxBytes != 2048*1024+512 || !dit.RxBytesSummed || dit.RxFrom == nil || *dit.RxFrom != 0 {
		t.Errorf("hand-over bytes %v from %v", dit.RxBytes, dit.RxFrom)
	}
	for _, f := range []string{"preprocess_time_ms", "output_ready_wait_time_ms", "in_flight_time_ms"} {
		if !strings.Contains(strings.Join(dit.Unmeasured, ","), f) {
			t.Errorf("%s missing from the unmeasured zeros %v", f, dit.Unmeasured)
		}
	}
	// The same request id in a second summary is another run: another key.
	if c.reqs[2].ID != "7" || c.reqs[2].Key() == r.Key() {
		t.Error("two runs that reuse a request id must get different ids")
	}
	// Reading the same input again gives the same keys.
	again := readAll(t, fixture(t, "summary.json"), Options{})
	for i := range again.reqs {
		if again.reqs[i].Key() != c.reqs[i].Key() {
			t.Errorf("request %d: a second read gives another key", i)
		}
	}
	named := readAll(t, fixture(t, "summary.json"), Options{RunName: "canary"})
	if named.reqs[0].Key() == r.Key() {
		t.Error("-run must change the ids")
	}
}

func TestVLLMLog(t *testing.T) {
	c := readAll(t, fixture(t, "vllm.log"), Options{})
	if len(c.reqs) != 3 {
		t.Fatalf("%d requests, problems %q", len(c.reqs), c.problems)
	}
	// The truncated last line is reported, the unrelated lines are not.
	if len(c.problems) != 1 || !strings.Contains(c.problems[0], "[OmniTiming]") {
		t.Errorf("problems %q, want the truncated last line only", c.problems)
	}
	r := c.byID(t, "7")
	if r.Total == nil || r.Total.D != ms(3321.75) || r.Total.Resolution != time.Microsecond {
		t.Errorf("total %+v: the table's is finer than the [OmniTiming] line's", r.Total)
	}
	want := time.Date(2026, 11, 30, 5, 10, 44, 0, time.UTC)
	if !r.End.Equal(want) {
		t.Errorf("end %v, want the line's time %v", r.End, want)
	}
	dit := &r.Stages[1]
	phase(t, dit, spans.Exec, ms(2301), forms.Quality{Resolution: time.Millisecond, Summed: true})
	// Hidden rows (zero in every column) are not measured.
	phase(t, dit, spans.QueueWait, -1, forms.Quality{})
	phase(t, dit, spans.Preprocess, -1, forms.Quality{})
	phase(t, dit, plan.TransferTx, ms(3.25), forms.Quality{Resolution: time.Microsecond, Summed: true})
	if dit.GenTime.D != ms(2410.5) {
		t.Errorf("gen time %v (thousands separator)", dit.GenTime.D)
	}
	b19e := c.byID(t, "chatcmpl-b19e")
	if len(b19e.Stages) != 1 || b19e.Stages[0].GenTime.D != ms(1500) || b19e.Stages[0].GenTime.Resolution != 10*time.Millisecond {
		t.Errorf("an [OmniTiming] line alone: %+v", b19e.Stages)
	}
	if sp := c.byID(t, "with space id"); sp.Stages[0].GenTime.D != 0 {
		t.Errorf("a 0.00s stage is a measured 0: %+v", sp.Stages[0].GenTime)
	}
}

func TestEventLog(t *testing.T) {
	c := readAll(t, fixture(t, "events.log"), Options{})
	if len(c.problems) > 0 || len(c.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(c.reqs), c.problems)
	}
	r := c.reqs[0]
	if r.ID != "0_501f96ba-7c1d" || r.Total == nil || r.Total.D != ms(1745.25) || len(r.Stages) != 2 {
		t.Fatalf("request %+v", r)
	}
	talker := &r.Stages[1]
	phase(t, talker, plan.TransferTx, ms(2), forms.Quality{Summed: true})
	phase(t, talker, plan.TransferRxDecode, ms(2.5), forms.Quality{})
	phase(t, talker, plan.TransferInFlight, -1, forms.Quality{})
	if talker.GenTime.D != ms(1310) || talker.RxBytes == nil || *talker.RxBytes != 98304 {
		t.Errorf("talker %+v bytes %v", talker.GenTime, talker.RxBytes)
	}
	if first := &r.Stages[0]; len(first.Durations) != 0 {
		t.Errorf("the first stage's receive fields are defaults: %v", first.Durations)
	}
}

func TestFormatIsToldByContent(t *testing.T) {
	cases := []struct{ name, first, want string }{
		{"a record line", oneLine(good), FormatJSONL},
		{"a summary on one line", `{"stage_table": []}`, FormatSummary},
		{"a pretty-printed document", `{`, FormatSummary},
		{"a vLLM log", `INFO 11-30 05:10:40 [api_server.py:1] x`, FormatLog},
		{"an event line", `{"type": "transfer_stats", "request_id": "a"}`, FormatJSONL},
		{"a truncated record line", `{"request_id": "a", "stages": [{"stage_id": 0`, FormatJSONL},
		{"a record line with a key twice", `{"request_id": "a", "request_id": "b"}`, FormatJSONL},
		{"a record whose value is a summary's key", `{"request_id": "a", "note": "final_stage_id"}`, FormatJSONL},
		{"a summary's first line", `{"final_stage_id": {"*": 1},`, FormatSummary},
		{"a log whose first line is a Python dict", `{'engine_args': {'model': 'm'}}`, FormatLog},
	}
	for _, c := range cases {
		if got := detect([]byte(c.first)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestARequestWithItsEndToEndTimeAloneMakesItsSpan(t *testing.T) {
	doc := `{"stage_table": [], "e2e_table": [{"request_id": "lonely", "e2e_total_ms": 12.5}]}`
	c := readAll(t, []byte(doc), Options{})
	if len(c.problems) > 0 || len(c.reqs) != 1 || c.reqs[0].Total.D != ms(12.5) || len(c.reqs[0].Stages) != 0 {
		t.Fatalf("%+v %q", c.reqs, c.problems)
	}
}

// TestSummaryLineOfALog: a [Summary] line holding a summary dict, as
// pformat spreads it over lines (a long id split into adjacent literals in
// parentheses, integer keys, True), is read as a summary.
func TestSummaryLineOfALog(t *testing.T) {
	log := strings.Join([]string{
		"INFO 11-30 05:30:00 [omni.py:402] [Summary] {'final_stage_id': {'*': 0},",
		"INFO 11-30 05:30:00 [omni.py:402]  'overall_summary': {'e2e_requests': 1, 'e2e_wall_time_ms': 10.5},",
		"INFO 11-30 05:30:00 [omni.py:402]  'stage_table': [{'request_id': ('chatcmpl-0123456789abcdef0123456789abcdef'",
		"INFO 11-30 05:30:00 [omni.py:402]                                  '0123456789'),",
		"INFO 11-30 05:30:00 [omni.py:402]                   'stages': [{'stage_id': 0,",
		"INFO 11-30 05:30:00 [omni.py:402]                               'stage': '0:thinker',",
		"INFO 11-30 05:30:00 [omni.py:402]                               'stage_gen_time_ms': 9.75,",
		"INFO 11-30 05:30:00 [omni.py:402]                               'streamed': True}]}],",
		"INFO 11-30 05:30:00 [omni.py:402]  'trans_table': [],",
		"INFO 11-30 05:30:00 [omni.py:402]  'e2e_table': [{'request_id': 'chatcmpl-0123456789abcdef0123456789abcdef0123456789',",
		"INFO 11-30 05:30:00 [omni.py:402]                 'e2e_total_ms': 10.5}]}",
	}, "\r\n")
	c := readAll(t, []byte(log), Options{})
	if len(c.problems) > 0 || len(c.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(c.reqs), c.problems)
	}
	r := c.reqs[0]
	if r.ID != "chatcmpl-0123456789abcdef0123456789abcdef0123456789" || r.Total.D != ms(10.5) || r.Stages[0].GenTime.D != ms(9.75) || r.Stages[0].Name != "thinker" {
		t.Errorf("request %+v", r)
	}
}

// TestDiffusionValuesSayTheirResolution: an integer is int()-truncated to
// its unit; a value with a fraction was not truncated.
func TestDiffusionValuesSayTheirResolution(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "r", "stages": [{"stage_id": 0, "stage": "0", ` +
		`"diffusion_engine_exec_time_s": 3, "forward_time_s": 2.105, "vae_decode_time_ms": 150}]}]}`
	c := readAll(t, []byte(doc), Options{})
	if len(c.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(c.reqs), c.problems)
	}
	st := &c.reqs[0].Stages[0]
	phase(t, st, spans.Exec, 3*time.Second, forms.Quality{Resolution: time.Second, Summed: true})
	phase(t, st, spans.Forward, ms(2105), forms.Quality{Summed: true})
	phase(t, st, spans.VAEDecode, ms(150), forms.Quality{Resolution: time.Millisecond, Summed: true})
}
