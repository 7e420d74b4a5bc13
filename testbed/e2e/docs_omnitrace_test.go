// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// docs/omnitrace.md: its commands run in the clone with the `omnitrace`
// its first block builds there, found on PATH as the page says; the
// inputs they name are written by the harness (the page's own sample
// blocks where it shows them).

const (
	omnitraceImportKey = "docs/omnitrace.md#omnitrace-import/1"
	summaryBlockKey    = "docs/omnitrace.md#the-forms-it-reads/1"
	logBlockKey        = "docs/omnitrace.md#the-forms-it-reads/2"
	eventsBlockKey     = "docs/omnitrace.md#the-forms-it-reads/3"
	jsonlBlockKey      = "docs/omnitrace.md#the-forms-it-reads/4"
	tableSampleKey     = "docs/omnitrace.md#omnitrace-table/2"
	summarySampleKey   = "docs/omnitrace.md#omnitrace-summary/2"
	badInputKey        = "docs/omnitrace.md#bad-input-and-what-is-bounded/1"
	envIgnoredKey      = "docs/omnitrace.md#the-otel_-variables/1"
)

// omnitracePath is the PATH under which the page's commands find the
// `omnitrace` built in the clone: `export PATH=$PWD/bin:$PATH`, as it says.
func omnitracePath(t *testing.T, s *docSession) string {
	t.Helper()
	if _, ok := s.state["omnitrace"]; !ok {
		t.Fatal("no omnitrace built (docs/omnitrace.md#omnitrace/1 did not run)")
	}
	return "PATH=" + filepath.Join(s.ws.clone, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
}

// otRun runs a command of the page to its end, with the built omnitrace
// on PATH.
func otRun(t *testing.T, s *docSession, c string) (stdout, stderr string) {
	t.Helper()
	return s.run(t, c, omnitracePath(t, s))
}

// otFile runs the built omnitrace with args (the harness's own use, to
// import an input the page shows), and returns its exit status and output.
func otFile(t *testing.T, s *docSession, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	omnitracePath(t, s)
	c := exec.CommandContext(s.ctx, filepath.Join(s.ws.clone, "bin", "omnitrace"), args...)
	c.Dir = s.ws.clone
	c.Env = docEnv()
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// runBuildOmnitrace: the build leaves an executable `bin/omnitrace` in
// the clone.
func runBuildOmnitrace(t *testing.T, s *docSession, c string) {
	s.run(t, c)
	st, err := os.Stat(filepath.Join(s.ws.clone, "bin", "omnitrace"))
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("%s: no executable omnitrace (%v)", c, err)
	}
	s.state["omnitrace"] = true
}

// writeBlock writes the page's block key to name in the clone.
func writeBlock(t *testing.T, s *docSession, key, name string) {
	t.Helper()
	if err := writeFile(s.ws.clone, name, blockOf(t, key).text); err != nil {
		t.Fatal(err)
	}
}

// request7 is the one omni.request span of request 7 among ss.
func request7(t *testing.T, what string, ss []traceview.Span) traceview.Span {
	t.Helper()
	var found []traceview.Span
	for _, sp := range ss {
		if sp.Name == "omni.request" && sp.Str("omni.request.id") == "7" {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d omni.request spans of request 7, want 1 (spans %v)", what, len(found), spanNames(ss))
	}
	return found[0]
}

// spanDigest is each span's ids, name and times, sorted: two imports of one
// input make the same.
func spanDigest(ss []traceview.Span) string {
	var out []string
	for _, sp := range ss {
		out = append(out, fmt.Sprintf("%s %s %s %s %d %d", sp.TraceID, sp.SpanID, sp.ParentID, sp.Name, sp.Start.UnixNano(), sp.End.UnixNano()))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// runImportConsole: `omnitrace import vllm.log` of the page's log sample,
// no OTEL_* set: request 7's spans on the console as OTLP/JSON, read from
// the log.
func runImportConsole(t *testing.T, s *docSession, c string) {
	writeBlock(t, s, summaryBlockKey, "summary.json")
	writeBlock(t, s, logBlockKey, "vllm.log")
	out, errOut := otRun(t, s, c)
	if !strings.Contains(errOut, "imported 1, skipped 0 (to the console") {
		t.Errorf("%s: %s", c, errOut)
	}
	ss, err := readOTLPJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("%s: the console output is not OTLP/JSON: %v", c, err)
	}
	if req := request7(t, c, ss); req.Str("omni.import.source") != "log" {
		t.Errorf("%s: omni.import.source %q, want log", c, req.Str("omni.import.source"))
	}
	s.state["omnitrace.console"] = ss
}

// runImportMerged: the summary and the log of one run, into Jaeger: one
// trace of request 7, both forms merged, each span once.
func runImportMerged(t *testing.T, s *docSession, c string) {
	// The log's lines have no year: it is the one that puts them at most a
	// day after the file's time (now), so within the year before.
	from := time.Now().AddDate(-1, 0, -2)
	_, errOut := otRun(t, s, c)
	if !strings.Contains(errOut, "imported 1, skipped 0 (to otlp to ") {
		t.Errorf("%s: %s", c, errOut)
	}
	traces := s.requestTraces(t, "omnitrace", from, 1)
	for id, tr := range traces {
		req := request7(t, c, tr)
		if src := req.Str("omni.import.source"); src != "summary+log" {
			t.Errorf("%s: omni.import.source %q, want summary+log", c, src)
		}
		seen := map[string]bool{}
		for _, sp := range tr {
			if seen[sp.SpanID] {
				t.Errorf("%s: span %s (%s) twice", c, sp.SpanID, sp.Name)
			}
			seen[sp.SpanID] = true
		}
		s.state["omnitrace.trace7"] = id
		s.spans[s.key] = tr
	}
}

// runImportTokyo: the same log read in Tokyo time: request 7 ends at
// 05:10:44 Tokyo time, nine hours before the UTC import's end.
func runImportTokyo(t *testing.T, s *docSession, c string) {
	out, errOut := otRun(t, s, c)
	if !strings.Contains(errOut, "imported 1, skipped 0") {
		t.Errorf("%s: %s", c, errOut)
	}
	ss, err := readOTLPJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	utcSpans, _ := s.state["omnitrace.console"].([]traceview.Span)
	tokyo, utc := request7(t, c, ss), request7(t, "the UTC import", utcSpans)
	if d := utc.End.Sub(tokyo.End); d != 9*time.Hour {
		t.Errorf("%s: request 7 ends %v before the UTC import's, want 9h", c, d)
	}
	tz, err := time.LoadLocation("Asia/Tokyo")
	if err == nil {
		if got := tokyo.End.In(tz).Format("01-02 15:04:05"); got != "11-30 05:10:44" {
			t.Errorf("%s: request 7 ends at %s Tokyo time, want the log's 11-30 05:10:44", c, got)
		}
	}
}

// runImportOut: to an OTLP/JSON file, nothing on stdout; the file holds
// the spans the console import printed, the same ids and times.
func runImportOut(t *testing.T, s *docSession, c string) {
	path := filepath.Join(s.ws.clone, flagIn(c, "-out"))
	out, errOut := otRun(t, s, c)
	if out != "" || !strings.Contains(errOut, "imported 1, skipped 0 (to traces.json)") {
		t.Errorf("%s:\nstdout:\n%s\nstderr:\n%s", c, tail(out), errOut)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := readOTLPJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	utcSpans, _ := s.state["omnitrace.console"].([]traceview.Span)
	request7(t, c, ss)
	if got, want := spanDigest(ss), spanDigest(utcSpans); got != want {
		t.Errorf("%s: the file holds\n%s\nthe console import printed\n%s", c, got, want)
	}
}

// runImportFollow: `-follow` on a log the harness appends to as an engine
// would: the request it finishes reaches Jaeger while the import runs; an
// interrupt ends it with status 0, `imported 1`, and the checkpoint saved
// with the request among those exported.
func runImportFollow(t *testing.T, s *docSession, c string) {
	log := filepath.Join(s.ws.clone, "vllm.log")
	cp := filepath.Join(s.ws.clone, flagIn(c, "-checkpoint"))
	if err := os.WriteFile(log, nil, 0o644); err != nil { // the engine's new log
		t.Fatal(err)
	}
	from := time.Now().Add(-time.Minute)
	p := s.start(t, "", c, omnitracePath(t, s))
	line := "INFO " + time.Now().UTC().Format("01-02 15:04:05") +
		" [omni.py:310] [OmniTiming] req=8 total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]\n"
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(line)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Exported once no record of it came for -idle (10 s): read back,
	// waiting as long as the test runs (its context guards against a hang).
	traces, err := s.jaeger.WaitTraces(s.ctx, "omnitrace", from, time.Now().Add(time.Minute), 1, 24*time.Hour)
	if err != nil || len(traces) != 1 {
		t.Fatalf("%s: %d request traces read back (%v), want request 8's", c, len(traces), err)
	}
	for _, tr := range traces {
		if r := find(tr, "omni.request"); r == nil || r.Str("omni.request.id") != "8" {
			t.Errorf("%s: the trace read back is not request 8's: %v", c, spanNames(tr))
		}
	}
	p.signal(interrupt)
	if err := p.wait(s.ctx); err != nil {
		t.Errorf("%s: after SIGINT: %v\n%s", c, err, p.errOut())
	}
	if !strings.Contains(p.errOut(), "imported 1, skipped 0") {
		t.Errorf("%s: %s", c, p.errOut())
	}
	b, err := os.ReadFile(cp)
	if err != nil {
		t.Fatalf("%s: no checkpoint: %v", c, err)
	}
	var saved struct {
		Done []struct {
			ID string `json:"id"`
		} `json:"done"`
	}
	if err := json.Unmarshal(b, &saved); err != nil || len(saved.Done) != 1 || saved.Done[0].ID != "8" {
		t.Errorf("%s: the checkpoint does not hold request 8 as exported (%v):\n%s", c, err, b)
	}
}

// ms is a duration in milliseconds.
func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// lastsMS reports whether span sp, read back from Jaeger, lasts v ms:
// Jaeger stores a zero-length span as 1 ns.
func lastsMS(sp *traceview.Span, v float64) bool {
	if v == 0 {
		return sp.Duration() <= time.Nanosecond
	}
	return sp.Duration() == ms(v)
}

// checkSummaryBlock: the summary the page shows, imported with its log
// (runImportMerged): each figure of its tables is the length of its span,
// a 0 the writer puts for "nothing" makes no span, one it measured a
// zero-length span.
func checkSummaryBlock(t *testing.T, _ *docSession, b docBlock, ss []traceview.Span) {
	var doc struct {
		StageTable []struct {
			RequestID string           `json:"request_id"`
			Stages    []map[string]any `json:"stages"`
		} `json:"stage_table"`
		TransTable []struct {
			Transfers []map[string]any `json:"transfers"`
		} `json:"trans_table"`
		E2E []struct {
			Total float64 `json:"e2e_total_ms"`
		} `json:"e2e_table"`
	}
	if err := json.Unmarshal([]byte(b.text), &doc); err != nil {
		t.Fatalf("the summary block is not JSON: %v", err)
	}
	if len(doc.StageTable) != 1 || doc.StageTable[0].RequestID != "7" || len(doc.E2E) != 1 || len(doc.TransTable) != 1 {
		t.Fatalf("the summary block is no longer one request 7")
	}
	req := request7(t, b.key, ss)
	if req.Duration() != ms(doc.E2E[0].Total) {
		t.Errorf("request 7 lasts %v, the summary's e2e_total_ms %v ms", req.Duration(), doc.E2E[0].Total)
	}
	phases := map[string]string{
		"preprocess_time_ms": "preprocess", "diffusion_engine_exec_time_ms": "exec", "scheduler_queue_wait_ms": "queue_wait",
		"kv_recv_time_ms": "kv_recv", "forward_time_ms": "forward", "vae_decode_time_ms": "vae_decode",
		"output_ready_wait_time_ms": "output_ready_wait", "postprocess_time_ms": "postprocess",
	}
	zeroIsDefault := map[string]bool{"preprocess_time_ms": true, "output_ready_wait_time_ms": true}
	for _, st := range doc.StageTable[0].Stages {
		id := fmt.Sprint(st["stage_id"])
		var stage *traceview.Span
		for i := range ss {
			if v, ok := ss[i].Int("omni.stage.id"); ok && ss[i].Name == "omni.stage" && fmt.Sprint(v) == id {
				stage = &ss[i]
			}
		}
		if stage == nil || stage.Duration() != ms(st["stage_gen_time_ms"].(float64)) {
			t.Errorf("stage %s: span %v, want one of stage_gen_time_ms %v", id, stage, st["stage_gen_time_ms"])
		}
		for key, phase := range phases {
			v, ok := st[key].(float64)
			if !ok {
				continue
			}
			sp := find(ss, "omni.diffusion."+phase)
			switch {
			case v == 0 && zeroIsDefault[key]:
				if sp != nil {
					t.Errorf("%s = 0 is its writer's default, yet a %s span", key, sp.Name)
				}
			case sp == nil:
				t.Errorf("%s = %v: no omni.diffusion.%s span", key, v, phase)
			case !lastsMS(sp, v):
				t.Errorf("%s = %v: the span lasts %v", key, v, sp.Duration())
			}
		}
	}
	for _, tr := range doc.TransTable[0].Transfers {
		for key, span := range map[string]string{"tx_time_ms": "omni.transfer.tx", "rx_decode_time_ms": "omni.transfer.rx_decode", "in_flight_time_ms": "omni.transfer.in_flight"} {
			v := tr[key].(float64)
			sp := find(ss, span)
			if v == 0 && sp != nil || v != 0 && (sp == nil || !lastsMS(sp, v)) {
				t.Errorf("%s = %v: span %v", key, v, sp)
			}
		}
		transfer := find(ss, "omni.transfer")
		if n, _ := transfer.Int("omni.transfer.bytes"); transfer == nil || float64(n) != tr["size_kbytes"].(float64)*1024 {
			t.Errorf("the transfer of %v KiB: omni.transfer.bytes %d", tr["size_kbytes"], n)
		}
	}
}

var logLineRe = regexp.MustCompile(`(?m)^\w+ (\d\d-\d\d \d\d:\d\d:\d\d) \[`)

// checkLogBlock: request 7 of the log the page shows (imported with its
// summary) ends at the time of its last line, in UTC, and its thinker's
// stage_gen_time_ms from the box table is its stage's length.
func checkLogBlock(t *testing.T, _ *docSession, b docBlock, ss []traceview.Span) {
	times := logLineRe.FindAllStringSubmatch(b.text, -1)
	if len(times) == 0 {
		t.Fatal("the log block has no dated line")
	}
	req := request7(t, b.key, ss)
	if got, want := req.End.UTC().Format("01-02 15:04:05"), times[len(times)-1][1]; got != want {
		t.Errorf("request 7 ends at %s UTC, its last line is of %s", got, want)
	}
	if !strings.Contains(b.text, "812.250") {
		t.Fatal("the log block no longer shows the thinker's 812.250 ms")
	}
	for _, sp := range ss {
		if id, ok := sp.Int("omni.stage.id"); ok && sp.Name == "omni.stage" && id == 0 && sp.Duration() != ms(812.25) {
			t.Errorf("the thinker's stage lasts %v, its table 812.250 ms", sp.Duration())
		}
	}
}

// importBlock imports a block the page shows as an input, alone, with the
// built omnitrace, and returns its spans.
func importBlock(t *testing.T, s *docSession, b docBlock, name string) []traceview.Span {
	t.Helper()
	if err := writeFile(s.ws.clone, name, b.text); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := otFile(t, s, "import", name)
	if code != 0 || !strings.Contains(errOut, "imported 1, skipped 0") {
		t.Fatalf("omnitrace import %s: exit %d\n%s", name, code, errOut)
	}
	ss, err := readOTLPJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// checkEventsBlock: the older event log's transfer_stats event is read as
// the hand-over from stage 0 to 1 of its request: its bytes, its send time.
func checkEventsBlock(t *testing.T, s *docSession, b docBlock, _ []traceview.Span) {
	ss := importBlock(t, s, b, "events.log")
	req, tr, tx := find(ss, "omni.request"), find(ss, "omni.transfer"), find(ss, "omni.transfer.tx")
	if req == nil || tr == nil || tx == nil {
		t.Fatalf("spans %v, want a request, its transfer and the send", spanNames(ss))
	}
	from, _ := tr.Int("omni.transfer.from_stage")
	to, _ := tr.Int("omni.transfer.to_stage")
	n, _ := tr.Int("omni.transfer.bytes")
	if req.Str("omni.request.id") != "0_501f96ba-7c1d" || req.Str("omni.import.source") != "events" || from != 0 || to != 1 || n != 65536 || tx.Duration() != ms(1.25) {
		t.Errorf("request %q (%s), transfer %d->%d of %d bytes, send %v; the event says 0_501f96ba-7c1d, 0->1, 65536, 1.25 ms",
			req.Str("omni.request.id"), req.Str("omni.import.source"), from, to, n, tx.Duration())
	}
}

// checkJSONLBlock: the page's JSON-lines record is one request: its
// arrival time, its diffusion phases' lengths, its model and steps.
func checkJSONLBlock(t *testing.T, s *docSession, b docBlock, _ []traceview.Span) {
	ss := importBlock(t, s, b, "record.jsonl")
	var rec struct {
		ID      string  `json:"request_id"`
		Model   string  `json:"model"`
		Arrival float64 `json:"arrival_time"`
		Steps   int64   `json:"num_inference_steps"`
		Stages  []struct {
			Metrics map[string]float64 `json:"diffusion_metrics"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(b.text), &rec); err != nil || len(rec.Stages) != 1 {
		t.Fatalf("the JSON-lines block is not one record of one stage: %v", err)
	}
	req := find(ss, "omni.request")
	if req == nil {
		t.Fatalf("no request span: %v", spanNames(ss))
	}
	steps, _ := req.Int("omni.diffusion.num_inference_steps")
	if req.Str("omni.request.id") != rec.ID || req.Str("gen_ai.request.model") != rec.Model || steps != rec.Steps ||
		req.Str("omni.import.source") != "jsonl" || req.Start.UnixMilli() != int64(rec.Arrival*1000+0.5) {
		t.Errorf("request %q model %q steps %d source %q start %v; the record: %q %q %d, arrival %v",
			req.Str("omni.request.id"), req.Str("gen_ai.request.model"), steps, req.Str("omni.import.source"), req.Start, rec.ID, rec.Model, rec.Steps, rec.Arrival)
	}
	for key, v := range rec.Stages[0].Metrics {
		phase := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(key, "_ms"), "_time"), "_time")
		phase = strings.TrimPrefix(strings.TrimPrefix(phase, "diffusion_engine_"), "scheduler_")
		sp := find(ss, "omni.diffusion."+phase)
		if sp == nil || sp.Duration() != ms(v) {
			t.Errorf("%s = %v: span omni.diffusion.%s %v", key, v, phase, sp)
		}
	}
}

// sampleOutput is what a console block shows command i (from 0) printing.
func sampleOutput(b docBlock, i int) string {
	var out []string
	n := -1
	for _, l := range strings.Split(strings.TrimRight(b.text, "\n"), "\n") {
		if strings.HasPrefix(l, "$ ") {
			n++
			continue
		}
		if n == i {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// badLog is a vLLM log of three requests and, at line 48, an [OmniTiming]
// line whose total is not seconds.
func badLog() string {
	var b strings.Builder
	for i := 1; i <= 14; i++ {
		fmt.Fprintf(&b, "INFO 11-30 05:10:%02d [api_server.py:100] unrelated line %d\n", 30+i, i)
	}
	for r := 1; r <= 3; r++ {
		fmt.Fprintf(&b, "INFO 11-30 05:11:%02d [omni.py:310] [OmniTiming] req=%d total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]\n", r, r)
		for i := 0; i < 10; i++ {
			fmt.Fprintf(&b, "INFO 11-30 05:11:%02d [api_server.py:100] unrelated\n", r)
		}
	}
	b.WriteString("INFO 11-30 05:12:00 [omni.py:310] [OmniTiming] req=4 total=1.2 preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]\n")
	return b.String()
}

// runBadInput: an import to an endpoint nothing listens on prints what the
// page shows, line for line, and exits 1, the status `echo $?` shows.
func runBadInput(t *testing.T, s *docSession, c string) {
	if err := writeFile(s.ws.clone, "vllm.log", badLog()); err != nil {
		t.Fatal(err)
	}
	b := blockOf(t, badInputKey)
	p := s.start(t, "", c, omnitracePath(t, s))
	err := p.wait(s.ctx)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || fmt.Sprint(exit.ExitCode())+"\n" != sampleOutput(b, 1) {
		t.Errorf("%s: exit %v; the page shows `echo $?` printing %q", c, err, sampleOutput(b, 1))
	}
	// The exporter's error is said once per batch that failed: how the
	// spans fell into batches depends on timing.
	if got, want := collapseRepeats(p.out()+p.errOut()), sampleOutput(b, 0); got != want {
		t.Errorf("%s printed\n%s\nthe page shows\n%s", c, got, want)
	}
}

// runEnvIgnored: an endpoint with credentials is warned about, without
// the password, and ignored: the import of the page's log sample to -out
// prints what the page shows, exits 0, and the file holds request 7.
func runEnvIgnored(t *testing.T, s *docSession, c string) {
	writeBlock(t, s, logBlockKey, "vllm.log")
	out, errOut := otRun(t, s, c)
	if want := sampleOutput(blockOf(t, envIgnoredKey), 0); out+errOut != want {
		t.Errorf("%s printed\n%s%s\nthe page shows\n%s", c, out, errOut, want)
	}
	f, err := os.Open(filepath.Join(s.ws.clone, "traces.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := readOTLPJSON(f)
	if err != nil {
		t.Fatalf("%s: traces.json is not OTLP/JSON: %v", c, err)
	}
	request7(t, c, ss)
}

// collapseRepeats drops each line that repeats the line before it.
func collapseRepeats(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if len(out) == 0 || l != out[len(out)-1] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// tJSON is what `omnitrace table -file t.json` reads: a two-stage LLM
// request, imported with -out.
const tJSON = `{"request_id": "0_501f96ba-7c1d", "arrival_time": 1796000001.0, "stages": [{"stage_id": 0, "stage_name": "thinker", "stage_type": "llm", "submit_time": 1796000001.001, "stage_gen_time_ms": 103, "vllm_queued_ms": 3, "vllm_prefill_ms": 20, "vllm_decode_ms": 80}, {"stage_id": 1, "stage_name": "talker", "stage_type": "llm", "submit_time": 1796000001.110, "stage_gen_time_ms": 70, "rx_decode_time_ms": 2.5, "rx_in_flight_time_ms": 1.0, "vllm_decode_ms": 70}]}` + "\n"

// writeTJSON writes t.json once, by `omnitrace import -out t.json`.
func writeTJSON(t *testing.T, s *docSession) {
	t.Helper()
	if _, ok := s.state["omnitrace.t.json"]; ok {
		return
	}
	if err := writeFile(s.ws.clone, "t.jsonl", tJSON); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := otFile(t, s, "import", "-out", "t.json", "t.jsonl"); code != 0 {
		t.Fatalf("omnitrace import -out t.json: exit %d\n%s", code, errOut)
	}
	s.state["omnitrace.t.json"] = true
}

// runTableJaeger: the table of request 7's trace, read from Jaeger: the
// summary's figures, the log's end.
func runTableJaeger(t *testing.T, s *docSession, c string) {
	id, _ := s.state["omnitrace.trace7"].(string)
	if id == "" || !strings.Contains(c, id) {
		t.Fatalf("%s: not the trace id of request 7 the import made (%q)", c, id)
	}
	out, _ := otRun(t, s, c)
	for _, want := range []string{
		`^request "7"  trace ` + id + `  3321\.750 ms$`,
		`^  phase \(ms\) +0 thinker +0->1 +1 dit$`,
		`^  stage +812\.250 +2410\.500$`,
		`^  forward +2105\.000$`,
		`^  queue_wait +0\.000$`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out) {
			t.Errorf("%s: no line %s:\n%s", c, want, out)
		}
	}
	if strings.Contains(out, "preprocess") {
		t.Errorf("%s: a preprocess row, for a 0 that is its writer's default:\n%s", c, out)
	}
}

// runTableFile: the table the page shows, exactly.
func runTableFile(t *testing.T, s *docSession, c string) {
	writeTJSON(t, s)
	out, _ := otRun(t, s, c)
	if want := blockOf(t, tableSampleKey).text; strings.TrimRight(out, "\n") != strings.TrimRight(want, "\n") {
		t.Errorf("%s printed\n%s\nthe page shows\n%s", c, out, want)
	}
}

// summaryRows are the phase names of a summary's rows, in order, and its
// first two lines.
func summaryRows(text string) (head []string, rows []string) {
	ls := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(ls) < 2 {
		return ls, nil
	}
	for _, l := range ls[2:] {
		m := regexp.MustCompile(`^(.*?) +(\d+/\d+) +\d+ `).FindStringSubmatch(l)
		if m == nil {
			rows = append(rows, "unreadable: "+l)
			continue
		}
		rows = append(rows, m[1])
	}
	return ls[:2], rows
}

var summaryCountRe = regexp.MustCompile(`^(\d+) requests?\n`)

// runSummaryJaeger: the summary of the diffusion demo's traces the docs'
// commands sent to Jaeger in the last hour: one request each, the page's
// header and rows.
func runSummaryJaeger(t *testing.T, s *docSession, c string) {
	from := time.Now().Add(-time.Hour)
	held := jaeger.RequestTraces(traceview.ByTrace(s.allSpans(t, "omni-diffusion-demo", from)))
	if len(held) == 0 {
		t.Fatal("no omni-diffusion-demo traces in Jaeger: the docs' demo did not send them")
	}
	out, _ := otRun(t, s, c)
	m := summaryCountRe.FindStringSubmatch(out)
	if m == nil || atoi(t, m[1]) != len(held) {
		t.Errorf("%s: %v requests; Jaeger holds %d request traces:\n%s", c, m, len(held), out)
	}
	sample := blockOf(t, summarySampleKey).text
	gotHead, gotRows := summaryRows(out)
	wantHead, wantRows := summaryRows(sample)
	if len(gotHead) != 2 || gotHead[1] != wantHead[1] || strings.Join(gotRows, ",") != strings.Join(wantRows, ",") {
		t.Errorf("%s printed\n%s\nthe page shows\n%s", c, out, sample)
	}
	for _, d := range regexp.MustCompile(`(?m) \d+/(\d+) `).FindAllStringSubmatch(out, -1) {
		if m != nil && d[1] != m[1] {
			t.Errorf("%s: a row out of %s requests, not all %s", c, d[1], m[1])
		}
	}
}

// runSummaryFile: the summary of t.json: its one request, per stage.
func runSummaryFile(t *testing.T, s *docSession, c string) {
	writeTJSON(t, s)
	out, _ := otRun(t, s, c)
	for _, want := range []string{`^1 request$`, `^thinker llm\.queue +1/1 +1 +3\.000 `, `^thinker llm\.prefill +1/1 +1 +20\.000 `,
		`^talker llm\.decode +1/1 +1 +70\.000 `, `^transfer 0->1 transfer\.in_flight +1/1 +1 +1\.000 `} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out) {
			t.Errorf("%s: no line %s:\n%s", c, want, out)
		}
	}
}
