// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/tracediff"
	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// diffRun runs omnitrace diff in process.
func diffRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"diff"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

const testdata = "internal/omnirecord/testdata"

// TestDiffReadsTheFormsImportReads: a log against a summary and a log of
// one run merged, as import merges them; the same request on both sides.
func TestDiffReadsTheFormsImportReads(t *testing.T) {
	code, out, errOut := diffRun(t, "", "-format", "json", filepath.Join(testdata, "vllm.log"),
		filepath.Join(testdata, "run", "summary.json")+","+filepath.Join(testdata, "run", "vllm.log"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var rep struct {
		Base struct{ Requests int } `json:"base_counts"`
		New  struct{ Requests int } `json:"new_counts"`
		Rows []struct {
			Stage, Phase string
			Base, New    struct{ Measured int }
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Base.Requests != 3 || rep.New.Requests != 3 {
		t.Errorf("requests %d and %d, want 3 and 3", rep.Base.Requests, rep.New.Requests)
	}
	found := false
	for _, r := range rep.Rows {
		if r.Stage == "diffusion 1 dit" && r.Phase == "queue_wait" {
			found = r.Base.Measured == 0 && r.New.Measured == 1
		}
	}
	if !found {
		t.Errorf("queue_wait: measured by the summary (as 0), not by the log: want 0 and 1 measured:\n%s", out)
	}
}

// TestDiffReadsStdin: one side from stdin, OTLP/JSON or a log.
func TestDiffReadsStdin(t *testing.T) {
	dir := t.TempDir()
	otlp := filepath.Join(dir, "t.json")
	if code := run(context.Background(), []string{"import", "-out", otlp, filepath.Join(testdata, "vllm.log")}, nil, &bytes.Buffer{}, &bytes.Buffer{}); code != 1 {
		t.Fatalf("import: exit %d (want 1: the log has a bad line)", code)
	}
	b, err := os.ReadFile(otlp)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(testdata, "vllm.log"))
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{"otlp": string(b), "log": string(log)} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := diffRun(t, in, "-", otlp)
			if code != 0 || !strings.Contains(out, "base: -: 3 requests in 3 traces") || !strings.Contains(out, "new:  "+otlp+": 3 requests") {
				t.Errorf("exit %d\n%s\n%s", code, out, errOut)
			}
		})
	}
}

// TestDiffOfHostileInputs: garbage, a side of one request, a file of
// requests with nothing measured: a report or a clear error, never a
// panic.
func TestDiffOfHostileInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage", "\x00\xff{{{ not anything\n"+strings.Repeat("z", 1<<20)+"\n")
	one := filepath.Join(testdata, "run", "events.jsonl")
	bare := write("bare.json", `{"resourceSpans":[{"scopeSpans":[{"spans":[`+
		`{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"omni.request","startTimeUnixNano":"1","endTimeUnixNano":"2"},`+
		`{"traceId":"0102030405060708090a0b0c0d0e0f11","spanId":"0102030405060709","name":"omni.request","startTimeUnixNano":"9","endTimeUnixNano":"3"},`+
		`{"traceId":"0102030405060708090a0b0c0d0e0f12","spanId":"010203040506070a","name":"omni.request","startTimeUnixNano":"18446744073709551615","endTimeUnixNano":"18446744073709551615"}`+
		`]}]}]}`+"\n")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		inOutput string
	}{
		{"garbage", []string{garbage, bare}, 1, "no omni.request found in BASE"},
		{"one request against requests with nothing measured", []string{one, bare}, 0, "requests in"},
		{"the same file on both sides", []string{bare, bare}, 0, "~"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := diffRun(t, "", tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.inOutput) {
				t.Errorf("exit %d, want %d with %q\n%s\n%s", code, tc.code, tc.inOutput, out, errOut)
			}
		})
	}
}

// TestDiffRefusesToWriteOverAnInputAndReadsAFileOnce: -html naming an
// input is a usage error (the input stays); a file named twice in one side
// is read once.
func TestDiffRefusesToWriteOverAnInputAndReadsAFileOnce(t *testing.T) {
	dir := t.TempDir()
	otlp := filepath.Join(dir, "t.json")
	run(context.Background(), []string{"import", "-out", otlp, filepath.Join(testdata, "vllm.log")}, nil, &bytes.Buffer{}, &bytes.Buffer{})
	before, err := os.ReadFile(otlp)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := diffRun(t, "", "-html", otlp, otlp, otlp); code != 2 || !strings.Contains(errOut, "is one of the inputs") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
	if after, _ := os.ReadFile(otlp); !bytes.Equal(before, after) {
		t.Error("the input was written over")
	}
	code, out, errOut := diffRun(t, "", otlp+","+otlp, otlp)
	if code != 0 || !strings.Contains(out, "base: "+otlp+","+otlp+": 3 requests") || !strings.Contains(errOut, "is named twice: read once") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestFailOnTakesOnlyAPercentage: -fail-on is a number of percent from 0
// to 1000000 written with its % sign, after p50: or p99: or nothing;
// anything else is a usage error, never read as something else (a bare
// 10 could be 10 % or ten times).
func TestFailOnTakesOnlyAPercentage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		p99  bool
		want float64
	}{
		{"10%", false, 0.1},
		{"0%", false, 0},
		{"p50:2.5%", false, 0.025},
		{"p99:10%", true, 0.1},
		{"1000000%", false, 10000},
		{".5%", false, 0.005},
	} {
		f, err := parseFailOn(tc.in)
		if err != nil || f.p99 != tc.p99 || f.change != tc.want {
			t.Errorf("%q: %+v, %v; want p99 %v, %v", tc.in, f, err, tc.p99, tc.want)
		}
	}
	for _, in := range []string{
		"10", "0", "0.1", // no % sign
		" 10%", "10 %", "\t10%\n", "10%%", "%", "p99:", "p99:%", // padded, doubled, empty
		"１０%", "1e309%", "1e3%", "NaN%", "inf%", "Inf%", "0x10p0%", "1_0%", "+10%", "-5%", "-0%", // not plain digits
		"1000001%", "99999999999999999999999%", // beyond the range
		"P99:10%", "p90:10%", "p50:p99:10%", ":10%",
	} {
		if f, err := parseFailOn(in); err == nil {
			t.Errorf("%q: accepted as %+v", in, f)
		}
	}
}

// TestFailOnCatchesAPhaseThatWasZero: a row significantly slower from a
// p50 of 0 is beyond any -fail-on, 1000000% included.
func TestFailOnCatchesAPhaseThatWasZero(t *testing.T) {
	rep := &tracediff.Report{Rows: []tracediff.Row{{
		Key:      tracediff.Key{Modality: "image", Stage: "diffusion", Phase: "queue_wait"},
		Base:     tracediff.Stats{P50: 0, P99: 0},
		New:      tracediff.Stats{P50: 74.5, P99: 99},
		Duration: tracediff.Test{Done: true, P: 1e-9, Adjusted: 1e-9, Significant: true},
	}}}
	for _, f := range []string{"0%", "1000000%", "p99:1000000%"} {
		fail, err := parseFailOn(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := regressions(rep, fail); len(got) != 1 || !strings.HasSuffix(got[0], "+∞% (from 0)") {
			t.Errorf("-fail-on %s: %q, want the row", f, got)
		}
	}
}

// TestDiffFlagsOutOfRange: every setting out of its documented range is
// a usage error (exit 2) that names it, before any input is read.
func TestDiffFlagsOutOfRange(t *testing.T) {
	in := filepath.Join(testdata, "vllm.log")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-by", "Model"}, "-by"},
		{[]string{"-by", "model,phase"}, "-by"},
		{[]string{"-by", "modèle"}, "-by"},
		{[]string{"-format", "JSON"}, "-format"},
		{[]string{"-format", " csv"}, "-format"},
		{[]string{"-correction", "Holm"}, "-correction"},
		{[]string{"-correction", "bonferroni"}, "-correction"},
		{[]string{"-alpha", "0"}, "-alpha"},
		{[]string{"-alpha", "1"}, "-alpha"},
		{[]string{"-alpha", "NaN"}, "-alpha"},
		{[]string{"-alpha", "-0.05"}, "-alpha"},
		{[]string{"-alpha", "1e309"}, "-alpha"},
		{[]string{"-alpha", "5%"}, "-alpha"},
		{[]string{"-samples", "1"}, "-samples"},
		{[]string{"-samples", "-1"}, "-samples"},
		{[]string{"-samples", "1048577"}, "-samples"},
		{[]string{"-samples", "99999999999999999999"}, "-samples"},
		{[]string{"-samples", "1e4"}, "-samples"},
		{[]string{"-max-rows", "0"}, "-max-rows"},
		{[]string{"-max-rows", "16385"}, "-max-rows"},
		{[]string{"-max-spans", "0"}, "-max-spans"},
		{[]string{"-limit", "0"}, "-limit"},
		{[]string{"-service", "x"}, "-service"},
		{[]string{"-jaeger", "http://127.0.0.1:1"}, "-service"},
		{[]string{"-jaeger", "notaurl", "-service", "s"}, "-jaeger"},
		{[]string{"-jaeger", "ftp://127.0.0.1:1", "-service", "s"}, "-jaeger"},
		{[]string{"-jaeger", "http://", "-service", "s"}, "-jaeger"},
		{[]string{"-jaeger", "http://[::1", "-service", "s"}, "-jaeger"},
		{[]string{"-jaeger", "127.0.0.1:16686", "-service", "s"}, "-jaeger"},
		{[]string{"-fail-on", "10"}, "-fail-on"},
		{[]string{"-fail-on", "１０%"}, "-fail-on"},
	} {
		code, out, errOut := diffRun(t, "", append(tc.args, in, in)...)
		// The first line says what is wrong; the usage after it names
		// every flag.
		if first, _, _ := strings.Cut(errOut, "\n"); code != 2 || !strings.Contains(first, tc.says) || out != "" {
			t.Errorf("%q: exit %d, want 2 naming %s\n%s", tc.args, code, tc.says, errOut)
		}
	}
	for _, w := range [][2]string{
		{"now-1h", "now"}, {"now/now-1h", "now-1h/now"}, {"now-1h/now", " now-1h/now"},
		{"now-1h/now", "now-1h/now+1h"}, {"now-1h/now", "now-99999999999h/now"},
		{"now-1h/now", "2026-01-05T10:00:00/now"}, {"now-1h/now", "２０２６-01-05T10:00:00Z/now"},
		{"now-1h/now", "now-1h/now-1h"}, {"now-1h/now", "now-36525d/now"},
	} {
		code, _, errOut := diffRun(t, "", "-jaeger", "http://127.0.0.1:1", "-service", "s", w[0], w[1])
		if first, _, _ := strings.Cut(errOut, "\n"); code != 2 || !strings.Contains(first, "window") {
			t.Errorf("windows %q: exit %d, want 2 naming the window\n%s", w, code, errOut)
		}
	}
	for _, args := range [][]string{{in}, {in, in, in}, {}} {
		if code, _, _ := diffRun(t, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestAJaegerSideKeepsTheSameSample: the same traces, answered in another
// order, make the same sample of each row (a row of more values than
// -samples keeps a seeded sample of the values in the order they are
// added).
func TestAJaegerSideKeepsTheSameSample(t *testing.T) {
	var ss []traceview.Span
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := range 300 {
		tid := fmt.Sprintf("%032x", i+1)
		start := t0.Add(time.Duration(i) * time.Second)
		ss = append(ss,
			traceview.Span{TraceID: tid, SpanID: "0000000000000001", Name: "omni.request", Start: start, End: start.Add(time.Second)},
			traceview.Span{TraceID: tid, SpanID: "0000000000000002", ParentID: "0000000000000001", Name: "omni.diffusion.exec", Start: start, End: start.Add(time.Duration(i+1) * time.Millisecond)})
	}
	set := tracediff.Settings{Samples: 10}
	for round := range 5 {
		a, b := tracediff.NewSide(set), tracediff.NewSide(set)
		addTraces(a, slices.Clone(ss))
		rev := slices.Clone(ss)
		slices.Reverse(rev)
		addTraces(b, rev)
		for _, r := range tracediff.Compare(a, b, tracediff.Options{}).Rows {
			if !slices.Equal(r.Base.Values, r.New.Values) {
				t.Fatalf("round %d: %s: samples %v and %v of the same traces", round, r.Key, r.Base.Values, r.New.Values)
			}
		}
	}
}

// TestDiffSaysRowsBeyondTheBound: rows beyond -max-rows are said on
// stderr, whatever the format: -fail-on cannot test them.
func TestDiffSaysRowsBeyondTheBound(t *testing.T) {
	in := filepath.Join(testdata, "vllm.log")
	code, _, errOut := diffRun(t, "", "-format", "json", "-max-rows", "2", in, in)
	if code != 0 || !strings.Contains(errOut, "base: ") || !strings.Contains(errOut, "beyond -max-rows 2 not kept, nor tested") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
	if _, _, errOut := diffRun(t, "", in, in); strings.Contains(errOut, "-max-rows") {
		t.Errorf("said at the default bound:\n%s", errOut)
	}
}

// TestLooksOTLP: a file is read as OTLP/JSON when its object's first key
// is resourceSpans (or Jaeger's result around one); a record of the forms
// import reads is not, whatever keys and values it holds.
func TestLooksOTLP(t *testing.T) {
	for in, want := range map[string]bool{
		`{"resourceSpans":[]}`:                                      true,
		" \n{\n  \"resource_spans\": [":                             true,
		`{"result":{"resourceSpans":[{"resource":{}`:                true,
		`{"result": "ok", "request_id": "x"}`:                       false,
		`{"type": "stage_request_stats", "result": 1}`:              false,
		`{"request_id": "resourceSpans", "x": "\"resourceSpans\""}`: false,
		`{"final_stage_id": {"*": 1}, "resourceSpans": []}`:         false,
		`INFO 11-30 05:10:44 [stats.py:560] | "resourceSpans"`:      false,
		`[{"resourceSpans":[]}]`:                                    false,
		"{}\n{}\n{\"resourceSpans\":[]}":                            true,
		"{}\n{\"request_id\": \"x\"}":                               false,
		``:                                                          false,
		`{"resourceSpans`:                                           false,
	} {
		if got := looksOTLP([]byte(in)); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

// TestDiffReadsRecordsWithAResultKey: event records that carry a
// "result" key are read as import reads them, not taken for Jaeger's
// answer.
func TestDiffReadsRecordsWithAResultKey(t *testing.T) {
	orig := filepath.Join(testdata, "run", "events.jsonl")
	b, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "{") {
			line = `{"result": "ok", ` + line[1:]
		}
		lines = append(lines, line)
	}
	withResult := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(withResult, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := diffRun(t, "", orig, withResult)
	if code != 0 || !strings.Contains(out, "new:  "+withResult+": 1 request in 1 trace") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestDiffSaysFileNamesAsATerminalShowsThem: a file name holding
// control characters reaches stderr with them shown as '?', never as
// escapes a terminal would run.
func TestDiffSaysFileNamesAsATerminalShowsThem(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata, "vllm.log"))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "v\x1b[2J\x1b]0;owned\a.log")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := diffRun(t, "", name, name)
	if code != 0 || !strings.Contains(errOut, "is not seconds; skipped") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if strings.ContainsAny(out+errOut, "\x1b\a") {
		t.Errorf("a control character reached the output:\n%q", errOut)
	}
	// An OTLP/JSON file of that name with a document that cannot be read.
	otlp := name + ".json"
	if err := os.WriteFile(otlp, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"omni.request","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`+"\n"+`{"resourceSpans":[{]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = diffRun(t, "", otlp, otlp)
	if strings.ContainsAny(out+errOut, "\x1b\a") {
		t.Errorf("exit %d: a control character reached the output:\n%q", code, out+errOut)
	}
}

// TestDiffReadsPipes: a side named by a pipe (a shell's <(zcat
// run.json.gz)), which can be read once, is read whole: the start read to
// tell its form is not lost.
func TestDiffReadsPipes(t *testing.T) {
	otlp := filepath.Join(t.TempDir(), "t.json")
	// The log holds a line import skips (exit 1); its requests are written.
	run(context.Background(), []string{"import", "-out", otlp, filepath.Join(testdata, "vllm.log")}, nil, &bytes.Buffer{}, &bytes.Buffer{})
	for _, in := range []string{otlp, filepath.Join(testdata, "vllm.log")} {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("no named pipes here: %v", err)
		}
		done := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				done <- err
				return
			}
			_, err = f.Write(b)
			f.Close()
			done <- err
		}()
		code, out, errOut := diffRun(t, "", fifo, in)
		// Should diff not have opened the pipe, open it so the writer
		// ends.
		if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-done
		if code != 0 || !strings.Contains(out, "base: "+fifo+": 3 requests in 3 traces") || !strings.Contains(out, "new:  "+in+": 3 requests in 3 traces") {
			t.Errorf("%s through a pipe: exit %d\n%s\n%s", in, code, out, errOut)
		}
	}
}
