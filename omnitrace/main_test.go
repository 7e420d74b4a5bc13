// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	goodLine  = `{"request_id": "chatcmpl-ac59cea85b422f04", "model": "Qwen/Qwen-Image", "arrival_time": 1796000000.125, "modality": "image", "num_inference_steps": 50, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": 1796000000.127, "stage_gen_time_ms": 2310.5, "diffusion_metrics": {"scheduler_queue_wait_ms": 0, "diffusion_engine_exec_time_ms": 2100.0, "postprocess_time_ms": 45.2}}]}`
	twoStages = `{"request_id": "0_501f96ba-7c1d", "arrival_time": 1796000001.0, "stages": [{"stage_id": 0, "stage_name": "thinker", "stage_type": "llm", "submit_time": 1796000001.001, "vllm_prefill_ms": 20, "vllm_decode_ms": 80}, {"stage_id": 1, "stage_name": "talker", "stage_type": "llm", "submit_time": 1796000001.110, "rx_decode_time_ms": 2.5, "vllm_decode_ms": 70}]}`
)

func runCmd(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func TestImportReportsBadLinesAndKeepsGoodOnes(t *testing.T) {
	clearEnv(t)
	out := filepath.Join(t.TempDir(), "traces.json")
	in := strings.Join([]string{
		goodLine,
		`not json at all`,
		``,
		strings.Replace(goodLine, `"postprocess_time_ms": 45.2`, `"postprocess_time_ms": -1`, 1),
		twoStages,
		strings.Replace(goodLine, `"request_id": "chatcmpl-ac59cea85b422f04", `, ``, 1),
		strings.Replace(goodLine, `"postprocess_time_ms": 45.2`, `"postprocess_time_ms": NaN`, 1),
		strings.Replace(goodLine, `"postprocess_time_ms": 45.2`, `"postprocess_time_ms": "45"`, 1),
		strings.Replace(goodLine, `"scheduler_queue_wait_ms": 0`, `"scheduler_queue_wait_ms": 2000, "forward_time_ms": 500`, 1),
	}, "\n")
	code, _, stderr := runCmd(t, in, "import", "-out", out)
	if code != 1 {
		t.Errorf("exit status %d, want 1 when lines were skipped", code)
	}
	for _, want := range []string{
		"stdin:2: not a JSON object", "stdin:4: stage 0: postprocess_time_ms: negative duration",
		"stdin:6: missing request_id", "stdin:7: stage 0: postprocess_time_ms: duration is not finite",
		"stdin:8: stage 0: postprocess_time_ms: duration is not a number",
		"stdin:9: stage 0: the parts inside exec last longer than exec",
		"imported 2, skipped 6",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	code, table, _ := runCmd(t, "", "table", "-file", out, "-request", "chatcmpl-ac59cea85b422f04")
	if code != 0 {
		t.Fatalf("table exit %d", code)
	}
	// Measured 0 shows 0.000; not measured rows are hidden; cells never sum.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  queue_wait\s+0\.000$`),
		regexp.MustCompile(`(?m)^  exec\s+2100\.000$`),
		regexp.MustCompile(`(?m)^  postprocess\s+45\.200$`),
	} {
		if !want.MatchString(table) {
			t.Errorf("table lacks %v:\n%s", want, table)
		}
	}
	for _, absent := range []string{"preprocess", "forward", "vae_decode", "kv_recv", "output_ready_wait"} {
		if strings.Contains(table, absent) {
			t.Errorf("%s was not in the record: its row must be hidden:\n%s", absent, table)
		}
	}
	code, table, _ = runCmd(t, "", "table", "-file", out, "-request", "0_501f96ba-7c1d")
	if code != 0 {
		t.Fatalf("table exit %d", code)
	}
	// The thinker has no queue: its llm.queue cell is blank, and the talker
	// has no prefill: blank too, while the row stays (the thinker has one).
	if !regexp.MustCompile(`(?m)^  llm\.prefill\s+20\.000$`).MatchString(table) ||
		!regexp.MustCompile(`(?m)^  llm\.decode\s+80\.000\s+70\.000$`).MatchString(table) ||
		strings.Contains(table, "llm.queue") {
		t.Errorf("multi-stage table:\n%s", table)
	}
	if !strings.Contains(table, "0 thinker") || !strings.Contains(table, "1 talker") || !strings.Contains(table, "0->1") {
		t.Errorf("columns are stages and hand-overs:\n%s", table)
	}

	code, sum, _ := runCmd(t, "", "summary", "-file", out)
	if code != 0 || !strings.Contains(sum, "2 requests") || !regexp.MustCompile(`(?m)^queue_wait\s+1/2\s+1\s+0\.000`).MatchString(sum) {
		t.Errorf("summary (exit %d):\n%s", code, sum)
	}
}

func TestImportAllGoodExitsZero(t *testing.T) {
	clearEnv(t)
	out := filepath.Join(t.TempDir(), "t.json")
	code, _, stderr := runCmd(t, goodLine+"\n"+twoStages+"\n", "import", "-out", out)
	if code != 0 || !strings.Contains(stderr, "imported 2, skipped 0") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestImportWithoutEnvironmentPrintsToTheConsole: with no OTEL_*, the
// spans are written to stdout as OTLP/JSON lines, which table -file -
// reads back.
func TestImportWithoutEnvironmentPrintsToTheConsole(t *testing.T) {
	clearEnv(t)
	code, stdout, stderr := runCmd(t, goodLine+"\n", "import")
	if code != 0 || !strings.Contains(stderr, "imported 1") {
		t.Fatalf("exit %d\nstdout:\n%.400s\nstderr:\n%s", code, stdout, stderr)
	}
	ss, err := readSpans(strings.NewReader(stdout))
	if err != nil {
		t.Fatal(err)
	}
	names := countNames(ss)
	if names["omni.request"] != 1 || names["omni.diffusion.exec"] != 1 {
		t.Errorf("spans on stdout: %v", names)
	}
	for _, s := range ss {
		if v, _ := s.Bool("omni.timing.reconstructed"); !v {
			t.Errorf("%s lacks omni.timing.reconstructed", s.Name)
		}
	}
	code, table, stderr := runCmd(t, stdout, "table", "-file", "-")
	if code != 0 || !strings.Contains(table, "exec") {
		t.Errorf("table -file - of the console's output: exit %d\n%s%s", code, table, stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"bogus"}, {"table"}, {"table", "-jaeger", "http://127.0.0.1:1", "-file", "x"}, {"summary", "-jaeger", "http://127.0.0.1:1"},
		{"import", "-follow", "-poll", "0", "x.log"}, {"import", "-follow", "-idle", "-1s", "x.log"},
		{"import", "-start", "0001-01-01T00:00:00Z"}, {"import", "-start", "1969-12-31T23:59:59.999999999Z"}, {"import", "-start", "2262-04-11T23:47:16.854775808Z"}} {
		if code, _, _ := runCmd(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestImportOfNothingRecognisableFailsAndSaysSo(t *testing.T) {
	clearEnv(t)
	out := filepath.Join(t.TempDir(), "t.json")
	code, _, stderr := runCmd(t, "this is not a record\nnor is this: [NaN, NaN, NaN]\n", "import", "-out", out)
	if code != 1 || !strings.Contains(stderr, "no request found") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestTableOfATraceWithoutARequestFails: a trace that holds no
// omni.request span prints no table and exits 1 saying so; one whose
// request hangs under a gateway's span gets its table.
func TestTableOfATraceWithoutARequestFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, spans ...string) string {
		p := filepath.Join(dir, name)
		doc := `{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{"name":"x"},"spans":[` + strings.Join(spans, ",") + `]}]}]}`
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const tid = `"traceId":"0af7651916cd43dd8448eb211c80319c"`
	gateway := `{` + tid + `,"spanId":"3333333333333333","name":"POST /v1/images","startTimeUnixNano":"1796000000000000000","endTimeUnixNano":"1796000001100000000"}`
	request := `{` + tid + `,"spanId":"1111111111111111","parentSpanId":"3333333333333333","name":"omni.request","startTimeUnixNano":"1796000000000000000","endTimeUnixNano":"1796000001000000000","attributes":[{"key":"omni.request.id","value":{"stringValue":"r1"}}]}`

	code, stdout, stderr := runCmd(t, "", "table", "-file", write("none.json", gateway))
	if code != 1 || !strings.Contains(stderr, "no omni.request span") || stdout != "" {
		t.Errorf("no request: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd(t, "", "table", "-file", write("gw.json", gateway, request))
	if code != 0 || !strings.Contains(stdout, `request "r1"`) {
		t.Errorf("under a gateway: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestABackendsErrorPageCannotDriveTheTerminal: an error page is other
// people's text; what is printed of it is one bounded line without
// control characters.
func TestABackendsErrorPageCannotDriveTheTerminal(t *testing.T) {
	page := "\x1b[2J\x1b]0;owned\x07 query failed\nERROR a forged second line\r" + strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, page, http.StatusInternalServerError)
	}))
	defer srv.Close()
	code, _, stderr := runCmd(t, "", "table", "-jaeger", srv.URL, "0123456789abcdef0123456789abcdef")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if strings.ContainsAny(stderr, "\x1b\x07\r") || strings.Count(stderr, "\n") != 1 || len(stderr) > 2048 {
		t.Errorf("printed %d bytes, %d lines: %.200q", len(stderr), strings.Count(stderr, "\n"), stderr)
	}
}

// TestTableOfAFileCutShortShowsWhatItHolds: an -out file of an import that
// was killed ends inside a document; what it holds is shown, and the cut
// is said.
func TestTableOfAFileCutShortShowsWhatItHolds(t *testing.T) {
	clearEnv(t)
	out := filepath.Join(t.TempDir(), "t.json")
	if code, _, stderr := runCmd(t, goodLine+"\n", "import", "-out", out); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	whole, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.json")
	if err := os.WriteFile(cut, append(whole, whole[:len(whole)/2]...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "", "table", "-file", cut, "-request", "chatcmpl-ac59cea85b422f04")
	if code != 0 || !strings.Contains(stdout, `request "chatcmpl-ac59cea85b422f04"`) || !strings.Contains(stderr, "document 2") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestASamplerThatKeepsNothingIsSaid: an import whose environment samples
// every span out ends with an empty destination; it says so and fails.
func TestASamplerThatKeepsNothingIsSaid(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	out := filepath.Join(t.TempDir(), "t.json")
	code, _, stderr := runCmd(t, goodLine+"\n", "import", "-out", out)
	if code != 1 || !strings.Contains(stderr, "sampler") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestAProblemNamesTheInputItCameFrom: the workers emit a request after
// the next input may have begun; what they report names the request's own
// input.
func TestAProblemNamesTheInputItCameFrom(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.log")
	var doc strings.Builder
	for i := range 50 {
		fmt.Fprintf(&doc, `{"e2e_table": [{"request_id": "in-a-%d", "e2e_total_ms": 5}]}`+"\n", i)
	}
	if err := os.WriteFile(a, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=in-b total=1.00s engine=1.00s stages=[0:1.00s]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A start whose requests end after what a span can carry: every one is
	// refused by a worker.
	code, _, stderr := runCmd(t, "", "import", "-out", filepath.Join(dir, "t.json"), "-start", "2262-04-11T23:47:16.85Z", a, b)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, `"in-a-`) && !strings.HasPrefix(line, a) || strings.Contains(line, `"in-b"`) && !strings.HasPrefix(line, b) {
			t.Errorf("a problem under the wrong input: %s", line)
		}
	}
}

// TestLinesAfterALongLineKeepTheirNumbers: a line too long to keep is
// counted, so that a problem after it names its own line.
func TestLinesAfterALongLineKeepTheirNumbers(t *testing.T) {
	clearEnv(t)
	in := goodLine + "\n" + strings.Repeat("x", maxLine+10) + "\nbad line\n"
	_, _, stderr := runCmd(t, in, "import", "-out", filepath.Join(t.TempDir(), "t.json"))
	if !strings.Contains(stderr, "stdin:2: line longer") || !strings.Contains(stderr, "stdin:3: not a JSON object") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestEveryFieldLeftOutIsCounted: beyond the eight fields reported one by
// one, the rest are reported together and still each counted.
func TestEveryFieldLeftOutIsCounted(t *testing.T) {
	clearEnv(t)
	var edges []string
	for i := range 12 {
		edges = append(edges, fmt.Sprintf(`{"edge": "bad%d", "tx_time_ms": 1}`, i))
	}
	doc := `{"trans_table": [{"request_id": "r", "transfers": [` + strings.Join(edges, ", ") + `]}], "e2e_table": [{"request_id": "r", "e2e_total_ms": 5}]}` + "\n"
	code, _, stderr := runCmd(t, doc, "import", "-out", filepath.Join(t.TempDir(), "t.json"))
	if code != 1 || !strings.Contains(stderr, "4 more fields") || !strings.Contains(stderr, "12 fields left out") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

// TestAnInterruptEndsAnImportStuckOnItsInputOrItsCollector: an import
// reading a stdin that never ends, or exporting to a collector that never
// answers, ends when interrupted, and says what it did not do. (The bound
// below only catches a hang; the import ends within a few seconds.)
func TestAnInterruptEndsAnImportStuckOnItsInputOrItsCollector(t *testing.T) {
	clearEnv(t)
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hold) // before the server closes: it waits for its handlers
	var many strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&many, `{"request_id": "r%d", "arrival_time": %d.5, "stages": [{"stage_id": 0, "submit_time": %d.6, "forward_time_ms": 1}]}`+"\n", i, 1796000000+i, 1796000000+i)
	}
	for _, c := range []struct {
		name  string
		env   []string
		stdin io.Reader
	}{
		{"a stdin that never ends", nil, func() io.Reader { r, _ := io.Pipe(); return r }()},
		{"a collector that never answers", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}, strings.NewReader(many.String())},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, kv := range c.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			var errb bytes.Buffer
			go func() {
				args := []string{"import", "-out", filepath.Join(t.TempDir(), "t.json")}
				if len(c.env) > 0 {
					args = args[:1] // to the collector
				}
				done <- run(ctx, args, c.stdin, io.Discard, &errb)
			}()
			time.Sleep(100 * time.Millisecond) // let it start; the interrupt may come at any point
			cancel()
			select {
			case code := <-done:
				if code != 1 || !strings.Contains(errb.String(), "interrupted") {
					t.Errorf("exit %d:\n%s", code, errb.String())
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("the interrupted import did not end")
			}
		})
	}
}

// TestOutIsNeverAnInput: -out naming an input would empty it before it is
// read, and -checkpoint naming the file followed (or -out) would replace it:
// a usage error, and the input is left whole.
func TestOutIsNeverAnInput(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "records.jsonl")
	if err := os.WriteFile(path, []byte(goodLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "", "import", "-out", path, path)
	if b, _ := os.ReadFile(path); code != 2 || string(b) != goodLine+"\n" {
		t.Errorf("exit %d (%s), input now %d bytes", code, stderr, len(b))
	}
	// Nor may -checkpoint, which -follow writes before reading.
	out := filepath.Join(t.TempDir(), "out.json")
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cp := range []string{path, out} {
		code, _, stderr = runCmd(t, "", "import", "-follow", "-out", out, "-checkpoint", cp, path)
		if b, _ := os.ReadFile(path); code != 2 || string(b) != goodLine+"\n" {
			t.Errorf("-checkpoint %s: exit %d (%s), input now %d bytes", cp, code, stderr, len(b))
		}
	}
}

// TestTableAndSummaryRefuseAJaegerThatIsNotAURL: -jaeger is the query
// API's http:// or https:// URL with a host; anything else is a usage error
// (exit 2) before any request is made, named on stderr as a terminal shows
// it.
func TestTableAndSummaryRefuseAJaegerThatIsNotAURL(t *testing.T) {
	for _, url := range []string{"notaurl", "127.0.0.1:16686", "ftp://127.0.0.1:16686", "http://", "http://user:pw@127.0.0.1:16686", " http://127.0.0.1:16686", "http://\x1b[2J"} {
		for _, args := range [][]string{{"table", "-jaeger", url, "0102030405060708090a0b0c0d0e0f10"}, {"summary", "-jaeger", url, "-service", "s"}} {
			code, _, stderr := runCmd(t, "", args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != 2 || !strings.Contains(first, "-jaeger") || !strings.Contains(first, "URL") {
				t.Errorf("%s -jaeger %q: exit %d, want 2 with an error naming -jaeger:\n%s", args[0], url, code, stderr)
			}
			if strings.ContainsAny(stderr, "\x1b") {
				t.Errorf("%s -jaeger %q: a control character reached stderr: %q", args[0], url, stderr)
			}
		}
	}
}
