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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

func fixturePath(name string) string {
	return filepath.Join("internal", "omnirecord", "testdata", name)
}

// importOut imports files to a fresh OTLP/JSON file and reads it back.
func importOut(t *testing.T, args ...string) (int, string, []traceview.Span) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "traces.json")
	code, _, stderr := runCmd(t, "", append([]string{"import", "-out", out}, args...)...)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := readSpans(f)
	if err != nil {
		t.Fatalf("the output does not read back: %v", err)
	}
	return code, stderr, ss
}

// readSpans reads every span of an OTLP/JSON file.
func readSpans(r io.Reader) ([]traceview.Span, error) {
	var out []traceview.Span
	err := traceview.ReadOTLPJSON(r, func(ss []traceview.Span) error {
		out = append(out, ss...)
		return nil
	})
	return out, err
}

func countNames(tr []traceview.Span) map[string]int {
	n := map[string]int{}
	for _, s := range tr {
		n[s.Name]++
	}
	return n
}

func requestTrace(t *testing.T, ss []traceview.Span, id string) []traceview.Span {
	t.Helper()
	var found []traceview.Span
	for _, tr := range traceview.ByTrace(ss) {
		for _, s := range tr {
			if s.Name == spans.RequestSpanName && s.Str(string(attrs.RequestIDKey)) == id {
				if found != nil {
					t.Fatalf("request %q in two traces", id)
				}
				found = tr
			}
		}
	}
	if found == nil {
		t.Fatalf("no trace of request %q", id)
	}
	return found
}

func TestImportEachForm(t *testing.T) {
	clearEnv(t)
	cases := []struct {
		name, file string
		exit       int
		traces     int
		id         string
		want       map[string]int // span names in that request's trace
	}{
		{"a summary dict", "summary.json", 0, 3, "chatcmpl-b19e", map[string]int{spans.RequestSpanName: 1}},
		{"a vLLM log with a truncated last line", "vllm.log", 1, 3, "7", map[string]int{
			spans.RequestSpanName: 1, spans.StageSpanName: 2, plan.TransferSpanName: 1, spans.Exec.SpanName(): 1,
			spans.Forward.SpanName(): 1, spans.KVRecv.SpanName(): 1, spans.VAEDecode.SpanName(): 1, spans.Postprocess.SpanName(): 1,
			plan.TransferTx.SpanName(): 1, plan.TransferRxDecode.SpanName(): 1}},
		{"an event log", "events.log", 0, 1, "0_501f96ba-7c1d", map[string]int{
			spans.RequestSpanName: 1, spans.StageSpanName: 2, plan.TransferSpanName: 1,
			plan.TransferTx.SpanName(): 1, plan.TransferRxDecode.SpanName(): 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stderr, ss := importOut(t, fixturePath(c.file))
			if code != c.exit {
				t.Errorf("exit %d, want %d:\n%s", code, c.exit, stderr)
			}
			if n := len(traceview.ByTrace(ss)); n != c.traces {
				t.Errorf("%d traces, want %d", n, c.traces)
			}
			got := countNames(requestTrace(t, ss, c.id))
			for name, n := range c.want {
				if got[name] != n {
					t.Errorf("%d %s spans, want %d (all: %v)", got[name], name, n, got)
				}
			}
			for name := range got {
				if _, ok := c.want[name]; !ok {
					t.Errorf("unexpected %s spans (%d)", name, got[name])
				}
			}
		})
	}
}

// TestImportedSpansSayHowExactTheyAre: truncated and summed values are
// marked, zeros that mean "not measured" listed, and no span is made of
// them.
func TestImportedSpansSayHowExactTheyAre(t *testing.T) {
	clearEnv(t)
	_, _, ss := importOut(t, fixturePath("summary.json"))
	var tr []traceview.Span
	for _, x := range traceview.ByTrace(ss) {
		if len(x) > len(tr) {
			tr = x // request 7 of the first run, the larger one
		}
	}
	for _, s := range tr {
		switch s.Name {
		case spans.Exec.SpanName():
			if v, ok := s.Attrs[string(forms.ResolutionKey)]; !ok || v.AsFloat64() != 1 {
				t.Errorf("exec: resolution %v", v)
			}
			if b, _ := s.Bool(string(forms.SummedKey)); !b {
				t.Error("exec is summed over outputs")
			}
			if b, _ := s.Bool("omni.timing.reconstructed"); !b {
				t.Error("exec is reconstructed")
			}
		case spans.QueueWait.SpanName():
			if s.Duration() != 0 {
				t.Errorf("queue wait %v, want a measured 0", s.Duration())
			}
		case spans.Preprocess.SpanName(), spans.OutputReadyWait.SpanName(), plan.TransferInFlight.SpanName():
			t.Errorf("%s made from a 0 that means not measured", s.Name)
		case spans.StageSpanName:
			if s.Str(string(attrs.StageNameKey)) == "dit" {
				if u := s.Attrs[string(forms.UnmeasuredZeroKey)].AsStringSlice(); len(u) != 3 {
					t.Errorf("unmeasured zeros %v", u)
				}
			}
		}
	}
}

// TestReimportMakesTheSameSpans: the same input, imported twice, gives
// the same spans: ids, times and attributes (in whatever order the workers
// emitted them), so that a backend stores them once.
func TestReimportMakesTheSameSpans(t *testing.T) {
	clearEnv(t)
	for _, f := range []string{"summary.json", "vllm.log", "events.log"} {
		var sets [2]map[string]string
		for i := range sets {
			_, _, ss := importOut(t, fixturePath(f))
			sets[i] = map[string]string{}
			for _, s := range ss {
				var b bytes.Buffer
				if err := traceview.WriteOTLPJSON(&b, []traceview.Span{s}); err != nil {
					t.Fatal(err)
				}
				sets[i][s.TraceID+s.SpanID] = b.String()
			}
		}
		if len(sets[0]) < 3 || fmt.Sprint(sets[0]) != fmt.Sprint(sets[1]) {
			t.Errorf("%s: two imports differ (%d and %d spans)", f, len(sets[0]), len(sets[1]))
		}
	}
}

// TestImportReportsLostSpans: when every export fails, import says how
// many spans were lost and exits 1.
func TestImportReportsLostSpans(t *testing.T) {
	clearEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, strings.Repeat("refused ", 1<<17), http.StatusBadRequest)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	code, _, stderr := runCmd(t, goodLine+"\n"+twoStages+"\n", "import")
	if code != 1 || !strings.Contains(stderr, "spans did not reach") || !strings.Contains(stderr, "imported 2") {
		t.Errorf("exit %d:\n%.2000s", code, stderr)
	}
	if len(stderr) > 8192 {
		t.Errorf("%d bytes of stderr: the collector's error body is echoed unbounded", len(stderr))
	}
}

// follower runs import -follow in the background until stopped.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
	code   int
	stderr string
}

func startFollow(t *testing.T, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		var out, errb bytes.Buffer
		f.code = run(ctx, append([]string{"import", "-follow", "-poll", "5ms"}, args...), strings.NewReader(""), &out, &errb)
		f.stderr = errb.String()
	}()
	return f
}

func (f *follower) stop() { f.cancel(); <-f.done }

var appendMu sync.Mutex

func appendTo(t *testing.T, path, data string) {
	t.Helper()
	appendMu.Lock()
	defer appendMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// pieces cuts data into chunks that end mid-line too.
func pieces(data string, n int) []string {
	var out []string
	for len(data) > 0 {
		k := min(n, len(data))
		out = append(out, data[:k])
		data = data[k:]
	}
	return out
}

func readTraces(t *testing.T, path string) []traceview.Span {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := readSpans(f)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func requestCounts(ss []traceview.Span) map[string]int {
	n := map[string]int{}
	for _, s := range ss {
		if s.Name == spans.RequestSpanName {
			n[s.Str(string(attrs.RequestIDKey))]++
		}
	}
	return n
}

// TestFollowExportsEveryRequestOnce: a log appended in pieces that cut
// lines in two, rotated half-way, exports each request once.
func TestFollowExportsEveryRequestOnce(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	log, out := filepath.Join(dir, "vllm.log"), filepath.Join(dir, "out.json")
	data, err := os.ReadFile(fixturePath("vllm.log"))
	if err != nil {
		t.Fatal(err)
	}
	appendTo(t, log, "")
	f := startFollow(t, "-out", out, "-idle", "1h", log)
	half := strings.Index(string(data), "INFO 11-30 05:10:46")
	for _, p := range pieces(string(data[:half]), 97) {
		appendTo(t, log, p)
		time.Sleep(time.Millisecond)
	}
	// Rotation: the file is renamed, and the engine writes a new one.
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range pieces(string(data[half:]), 61) {
		appendTo(t, log, p)
		time.Sleep(time.Millisecond)
	}
	f.stop()
	got := requestCounts(readTraces(t, out))
	want := map[string]int{"7": 1, "chatcmpl-b19e": 1, "with space id": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests exported %v, want %v\n%s", got, want, f.stderr)
	}
}

// TestFollowResumesFromItsCheckpoint: stopped between a request's records
// and restarted, follow exports that request once, with all its records,
// and nothing twice.
func TestFollowResumesFromItsCheckpoint(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	log, cp := filepath.Join(dir, "vllm.log"), filepath.Join(dir, "cp.json")
	data, err := os.ReadFile(fixturePath("vllm.log"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	// Request 7's stage table first, unfinished: its [OmniTiming] line
	// comes after the restart.
	tableStart := strings.LastIndex(text[:strings.Index(text, "[StageRequestStats")], "\n") + 1
	tableEnd := strings.Index(text[tableStart:], "[TransferEdgeStats")
	tableEnd = tableStart + strings.LastIndex(text[tableStart:tableStart+tableEnd], "\n") + 1
	timing := text[strings.LastIndex(text[:strings.Index(text, "req=7 ")], "\n")+1:]
	timing = timing[:strings.Index(timing, "\n")+1]
	other := "INFO 11-30 05:10:46 [omni.py:310] [OmniTiming] req=b total=1.50s preprocess=0.00s engine=1.50s stages=[0=1.50s]\n"
	appendTo(t, log, other+text[tableStart:tableEnd])
	first := filepath.Join(dir, "first.json")
	f := startFollow(t, "-out", first, "-checkpoint", cp, log)
	f.stop()
	appendTo(t, log, timing)
	second := filepath.Join(dir, "second.json")
	// -settle 0: a finished request is exported as soon as it is read.
	f = startFollow(t, "-out", second, "-checkpoint", cp, "-settle", "0", log)
	f.stop()
	a, b := requestCounts(readTraces(t, first)), requestCounts(readTraces(t, second))
	// b is finished but not settled when the first run stops: its tables
	// could still follow its [OmniTiming] line, so it is read again too.
	if len(a) != 0 {
		t.Errorf("the first run exported %v, want nothing: every request held is read again after the restart", a)
	}
	if fmt.Sprint(b) != fmt.Sprint(map[string]int{"7": 1, "b": 1}) {
		t.Errorf("the second run exported %v, want requests 7 and b once each\n%s", b, f.stderr)
	}
	tr := requestTrace(t, readTraces(t, second), "7")
	if n := countNames(tr)[spans.Exec.SpanName()]; n != 1 {
		t.Errorf("request 7 lacks the records read before the restart: %v", countNames(tr))
	}
}

// TestFollowStoppedBetweenATimingLineAndItsTableExportsTheRequestOnce: a
// request finished by its [OmniTiming] line, but not settled, when the
// follower stops is read again after the restart, whole, with the table
// that came after the stop: one trace, never two halves.
func TestFollowStoppedBetweenATimingLineAndItsTableExportsTheRequestOnce(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	log, cp := filepath.Join(dir, "vllm.log"), filepath.Join(dir, "cp.json")
	appendTo(t, log, "INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=7 total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]\n")
	first := filepath.Join(dir, "first.json")
	f := startFollow(t, "-out", first, "-checkpoint", cp, log)
	f.stop()
	appendTo(t, log, strings.Join([]string{
		"INFO 11-30 05:10:44 [stats.py:560] [StageRequestStats [request_id=7]]",
		"INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+",
		"INFO 11-30 05:10:44 [stats.py:560] | Field                         | 0:thinker |     1:dit |",
		"INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+",
		"INFO 11-30 05:10:44 [stats.py:560] | diffusion_engine_exec_time_ms |           |     2,301 |",
		"INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+",
		"INFO 11-30 05:10:45 [omni.py:310] [OmniTiming] req=8 total=1.00s preprocess=0.00s engine=1.00s stages=[0:a=1.00s] transfers=[]",
		""}, "\n"))
	second := filepath.Join(dir, "second.json")
	f = startFollow(t, "-out", second, "-checkpoint", cp, "-settle", "1", log)
	f.stop()
	all := append(readTraces(t, first), readTraces(t, second)...)
	if got := requestCounts(all); got["7"] != 1 {
		t.Fatalf("request 7 exported %d times over the two runs, want once\n%s", got["7"], f.stderr)
	}
	if n := countNames(requestTrace(t, all, "7"))[spans.Exec.SpanName()]; n != 1 {
		t.Errorf("request 7 lacks its table's exec: %v", countNames(requestTrace(t, all, "7")))
	}
}

// TestFollowResumesWhereItStopped: a request exported before the stop is
// not exported again by the restart, which reads on from the checkpoint;
// a request appended meanwhile is exported once.
func TestFollowResumesWhereItStopped(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	log, cp := filepath.Join(dir, "vllm.log"), filepath.Join(dir, "cp.json")
	appendTo(t, log, timingLine("x"))
	first, second := filepath.Join(dir, "first.json"), filepath.Join(dir, "second.json")
	f := startFollow(t, "-out", first, "-checkpoint", cp, "-settle", "0", log)
	f.stop()
	appendTo(t, log, timingLine("y"))
	f = startFollow(t, "-out", second, "-checkpoint", cp, "-settle", "0", log)
	f.stop()
	a, b := requestCounts(readTraces(t, first)), requestCounts(readTraces(t, second))
	if fmt.Sprint(a) != "map[x:1]" || fmt.Sprint(b) != "map[y:1]" {
		t.Errorf("first run %v, second %v: want x, then y alone\n%s", a, b, f.stderr)
	}
}

// TestFollowOfAFileReplacedWhileStoppedSaysSo: a file deleted and written
// again while the import was stopped (it may even take the old inode) is
// not the one the checkpoint was saved for: it is read from its start, and
// the import says so; numbering stays the file's.
func TestFollowOfAFileReplacedWhileStoppedSaysSo(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	log, cp := filepath.Join(dir, "vllm.log"), filepath.Join(dir, "cp.json")
	appendTo(t, log, timingLine("x")+timingLine("y"))
	f := startFollow(t, "-out", filepath.Join(dir, "first.json"), "-checkpoint", cp, "-settle", "0", log)
	f.stop()
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	appendTo(t, log, timingLine("a")+timingLine("b")+"INFO 11-30 05:10:45 [omni.py:310] [OmniTiming] req=c total=1.2 engine=1.00s\n")
	second := filepath.Join(dir, "second.json")
	f = startFollow(t, "-out", second, "-checkpoint", cp, "-settle", "0", log)
	f.stop()
	if got := requestCounts(readTraces(t, second)); fmt.Sprint(got) != "map[a:1 b:1]" {
		t.Errorf("the new file's requests: %v, want a and b\n%s", got, f.stderr)
	}
	if !strings.Contains(f.stderr, "not the file the checkpoint was saved for") || !strings.Contains(f.stderr, "vllm.log:3:") {
		t.Errorf("stderr:\n%s", f.stderr)
	}
}

// TestImportSaysFileNamesAsATerminalShowsThem: the problems of a file
// whose name holds control characters name it with them shown as '?',
// never as escapes a terminal would run.
func TestImportSaysFileNamesAsATerminalShowsThem(t *testing.T) {
	b, err := os.ReadFile(fixturePath("vllm.log"))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "v\x1b[2J\x1b]0;owned\a.log")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The log has a line it skips: the import says so, naming the file.
	_, stderr, _ := importOut(t, name)
	if !strings.Contains(stderr, "v?[2J?]0;owned?.log:48: ") {
		t.Fatalf("want the file's skipped line under its name shown as a terminal shows it:\n%q", stderr)
	}
	if strings.ContainsAny(stderr, "\x1b\a") {
		t.Errorf("a control character reached stderr:\n%q", stderr)
	}
}
