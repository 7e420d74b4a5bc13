// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

// TestMain lets a test run this package's test binary as the omnitrace
// command itself, in a child process: with its own environment (TZ,
// LC_ALL) and its own signals.
func TestMain(m *testing.M) {
	if os.Getenv("OMNITRACE_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// child returns a command running omnitrace with args, in env (and no
// OTEL_* variable of the test's), bounded by the test's own deadline.
func child(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-10*time.Second))
		t.Cleanup(cancel)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = []string{"OMNITRACE_TEST_MAIN=1", "PATH=" + os.Getenv("PATH")}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runChild runs omnitrace in a child process and returns its status and
// stderr.
func runChild(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := child(t, env, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, errb.String()
}

// runFixtures copies the forms of one run into dir, each with the same
// modification time (a log's year, a summary's start), and returns their
// paths by name.
func runFixtures(t *testing.T, dir string, names ...string) map[string]string {
	t.Helper()
	mtime := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	out := map[string]string{}
	for _, name := range names {
		b, err := os.ReadFile(fixturePath(filepath.Join("run", name)))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

// placed is a span as another import of the same run must make it: its
// trace and span id, and its times.
type placed struct {
	traceID, spanID string
	start, end      time.Time
}

// roles names each span by what it is (its name, its stage's or its
// request's id, and its parent's role, with which of the requests with
// that id it is), and fails on a request in two traces or a span id
// given twice.
func roles(t *testing.T, what string, ss []traceview.Span) map[string]placed {
	t.Helper()
	byID := map[string]*traceview.Span{}
	for i := range ss {
		s := &ss[i]
		if _, dup := byID[s.TraceID+s.SpanID]; dup {
			t.Errorf("%s: span id %s twice", what, s.SpanID)
		}
		byID[s.TraceID+s.SpanID] = s
	}
	// Which request of its id a trace holds: its trace ids, in order of
	// their request's start.
	runOf := map[string]int{}
	ends := map[string][]*traceview.Span{}
	for i := range ss {
		if s := &ss[i]; s.Name == spans.RequestSpanName {
			id := s.Str(string(attrs.RequestIDKey))
			ends[id] = append(ends[id], s)
		}
	}
	for _, rs := range ends {
		sort.Slice(rs, func(i, j int) bool {
			if !rs[i].Start.Equal(rs[j].Start) {
				return rs[i].Start.Before(rs[j].Start)
			}
			return rs[i].TraceID < rs[j].TraceID
		})
		for i, s := range rs {
			runOf[s.TraceID] = i
		}
	}
	var role func(s *traceview.Span, depth int) string
	role = func(s *traceview.Span, depth int) string {
		r := s.Name
		switch s.Name {
		case spans.RequestSpanName:
			r += fmt.Sprintf("[%s]", s.Str(string(attrs.RequestIDKey)))
		case spans.StageSpanName:
			r += fmt.Sprintf("[%s]", s.Attrs[string(attrs.StageIDKey)].String())
		}
		if p, ok := byID[s.TraceID+s.ParentID]; ok && depth < 16 {
			r = role(p, depth+1) + " > " + r
		}
		return r
	}
	out := map[string]placed{}
	for i := range ss {
		s := &ss[i]
		r := fmt.Sprintf("%s #%d", role(s, 0), runOf[s.TraceID])
		if _, dup := out[r]; dup {
			t.Errorf("%s: %s twice (a request in two traces, or a span made twice)", what, r)
		}
		out[r] = placed{s.TraceID, s.SpanID, s.Start, s.End}
	}
	return out
}

// canon is a set of spans as text, every attribute included, whatever
// the order they were written in.
func canon(t *testing.T, ss []traceview.Span) string {
	t.Helper()
	var lines []string
	for _, s := range ss {
		var b bytes.Buffer
		if err := traceview.WriteOTLPJSON(&b, []traceview.Span{s}); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, b.String())
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}

// TestAnImportIsAFunctionOfItsRun imports the forms of one run (a
// summary and a log of a newer release; a log of event dicts and the
// JSON-lines file of the same events, of an older one) as each subset and
// each order of them, in child processes under several TZ and LC_ALL
// values. Every import makes one trace per request; no span id is ever
// given two different times (a summary placed without its log's times gets
// other ids); every import that holds the run's log places each span at
// the same times; and the same forms make the same spans, every attribute
// included, in any order and under any zone.
func TestAnImportIsAFunctionOfItsRun(t *testing.T) {
	zones := []struct{ tz, lc string }{
		{"TZ=UTC", "LC_ALL=C"},
		{"TZ=Asia/Tokyo", "LC_ALL=tr_TR.UTF-8"},
		{"TZ=America/New_York", "LC_ALL=de_DE.UTF-8"},
		{"TZ=Nowhere/Garbage", "LC_ALL=ja_JP.eucJP"},
		{"TZ=", "LC_ALL="},
	}
	for _, run := range []struct {
		name          string
		timed, untime string // the form with the log's times, the one without
		requests      int
	}{
		{"summary and log", "vllm.log", "summary.json", 3},
		{"events in a log and in JSON lines", "events.log", "events.jsonl", 1},
	} {
		t.Run(run.name, func(t *testing.T) {
			dir := t.TempDir()
			files := runFixtures(t, dir, run.timed, run.untime)
			orders := [][]string{{run.timed}, {run.untime}, {run.timed, run.untime}, {run.untime, run.timed}}
			var first map[string]placed // of the first import holding the log
			times := spanTimes{}        // every span's times, by its ids
			same := map[string]string{} // each subset's spans, in full
			for i, order := range orders {
				for j, z := range zones {
					what := fmt.Sprintf("%v under %s %s", order, z.tz, z.lc)
					out := filepath.Join(dir, fmt.Sprintf("out-%d-%d.json", i, j))
					args := []string{"import", "-out", out}
					for _, name := range order {
						args = append(args, files[name])
					}
					code, stderr := runChild(t, []string{z.tz, z.lc}, args...)
					if code != 0 || !strings.Contains(stderr, "skipped 0") {
						t.Fatalf("%s: exit %d\n%s", what, code, stderr)
					}
					ss := readTraces(t, out)
					if n := len(traceview.ByTrace(ss)); n != run.requests {
						t.Errorf("%s: %d traces, want one per request, %d", what, n, run.requests)
					}
					got := roles(t, what, ss)
					times.add(t, what, ss)
					if slices.Contains(order, run.timed) {
						if first == nil {
							first = got
						}
						for r, p := range got {
							if prev, ok := first[r]; ok && (!prev.start.Equal(p.start) || !prev.end.Equal(p.end)) {
								t.Errorf("%s: %s at %s..%s, another import at %s..%s", what, r, p.start, p.end, prev.start, prev.end)
							}
						}
					}
					key := strings.Join(slices.Sorted(slices.Values(order)), " ")
					if c := canon(t, ss); same[key] == "" {
						same[key] = c
					} else if c != same[key] {
						t.Errorf("%s: not the spans another order or zone made of the same forms", what)
					}
				}
			}
		})
	}
}

// TestTheDocsExampleMakesOneTracePerRequest: `omnitrace import
// summary.json vllm.log`, the summary and the log of one run, in either
// order, makes one trace of each request, with each of its spans once:
// request 7 of the summary's first run is the log's request 7, merged;
// the summary's second run (a restarted engine reusing id 7) is another.
func TestTheDocsExampleMakesOneTracePerRequest(t *testing.T) {
	clearEnv(t)
	for _, order := range [][]string{{"summary.json", "vllm.log"}, {"vllm.log", "summary.json"}} {
		code, stderr, ss := importOut(t, fixturePath(order[0]), fixturePath(order[1]))
		// The log's last line is cut off: reported, and the rest imported.
		if code != 1 || !strings.Contains(stderr, "imported 4, skipped 1") {
			t.Errorf("%v: exit %d\n%s", order, code, stderr)
		}
		traces := map[string][]string{}
		for _, s := range ss {
			if s.Name == spans.RequestSpanName {
				id := s.Str(string(attrs.RequestIDKey))
				traces[id] = append(traces[id], s.Str(string(omnikeys.ImportSource)))
			}
		}
		for id := range traces {
			sort.Strings(traces[id])
		}
		want := map[string][]string{"7": {"summary", "summary+log"}, "chatcmpl-b19e": {"summary+log"}, "with space id": {"log"}}
		if fmt.Sprint(traces) != fmt.Sprint(want) {
			t.Errorf("%v: traces by request %v, want %v", order, traces, want)
		}
		var merged []traceview.Span
		for _, tr := range traceview.ByTrace(ss) {
			for _, s := range tr {
				if s.Name == spans.RequestSpanName && s.Str(string(omnikeys.ImportSource)) == "summary+log" && s.Str(string(attrs.RequestIDKey)) == "7" {
					merged = tr
				}
			}
		}
		got := countNames(merged)
		for name, n := range map[string]int{spans.RequestSpanName: 1, spans.StageSpanName: 2, plan.TransferSpanName: 1,
			spans.Exec.SpanName(): 1, spans.Forward.SpanName(): 1, spans.KVRecv.SpanName(): 1, spans.VAEDecode.SpanName(): 1,
			spans.Postprocess.SpanName(): 1, spans.QueueWait.SpanName(): 1, plan.TransferTx.SpanName(): 1,
			plan.TransferRxDecode.SpanName(): 1, spans.Preprocess.SpanName(): 0} {
			if got[name] != n {
				t.Errorf("%v: request 7 has %d %s spans, want %d (%v)", order, got[name], name, n, got)
			}
		}
	}
}

// TestFollowOfAPipeEndsAtAnInterrupt: import -follow of a named pipe whose
// writer stays open, and sends nothing more, ends when interrupted (SIGINT
// or SIGTERM), exporting the requests it holds, the one of a line the
// pipe left unended too (a pipe cannot be read again), and saves its
// checkpoint. Nothing bounds the wait but the test's own deadline: the
// child is waited for.
func TestFollowOfAPipeEndsAtAnInterrupt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			fifo, out, cp := filepath.Join(dir, "vllm.fifo"), filepath.Join(dir, "out.json"), filepath.Join(dir, "cp.json")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Skipf("no named pipes here: %v", err)
			}
			cmd := child(t, nil, "import", "-follow", "-out", out, "-checkpoint", cp, fifo)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// The writer opens once the child has opened the pipe (after it
			// set its signal handlers), and stays open.
			var w *os.File
			for w == nil {
				f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
				switch {
				case err == nil:
					w = f
				case !errors.Is(err, syscall.ENXIO):
					t.Fatal(err)
				}
				select {
				case err := <-exited:
					t.Fatalf("omnitrace ended before reading: %v\n%s", err, errb.String())
				case <-time.After(10 * time.Millisecond):
				}
			}
			defer w.Close()
			if _, err := w.WriteString(timingLine("a") + timingLine("b") + strings.TrimSuffix(timingLine("c"), "\n")); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; cmd.ProcessState.ExitCode() < 0 {
				// Killed: by the test's deadline, or by the signal itself.
				t.Fatalf("omnitrace did not end at %v by itself (%v)\n%s", sig, err, errb.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(errb.String(), "imported 3, skipped 0") {
				t.Errorf("exit %d:\n%s", code, errb.String())
			}
			if got := requestCounts(readTraces(t, out)); fmt.Sprint(got) != "map[a:1 b:1 c:1]" {
				t.Errorf("exported %v, want a, b and c once each", got)
			}
			var saved struct {
				Stream bool
				Done   []struct{ ID string }
			}
			b, err := os.ReadFile(cp)
			if err == nil {
				err = json.Unmarshal(b, &saved)
			}
			if err != nil || !saved.Stream || len(saved.Done) != 3 {
				t.Errorf("checkpoint %s (%v): want one of a pipe, naming the three requests exported", b, err)
			}
		})
	}
}

// TestFollowOfADeviceThatNeverEndsEndsAtAnInterrupt: a file that never
// stops giving bytes (/dev/zero, a writer that never pauses) is read up to
// the interrupt, and no further than a pipe holds after it.
func TestFollowOfADeviceThatNeverEndsEndsAtAnInterrupt(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip(err)
	}
	cmd := child(t, nil, "import", "-follow", "-out", filepath.Join(t.TempDir(), "out.json"), "/dev/zero")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Reading has begun once the first line too long is reported.
	var errb bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(errb.String(), "longer than") {
		n, err := stderr.Read(buf)
		errb.Write(buf[:n])
		if err != nil {
			t.Fatalf("%v before reading began:\n%s", err, errb.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	errb.Write(rest)
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 1 || !strings.Contains(errb.String(), "imported 0") {
		t.Errorf("exit %d (%v):\n%s", cmd.ProcessState.ExitCode(), err, errb.String())
	}
}

// TestFormsHeldBeyondMaxPendingAreCountedNotDoubled: beyond -max-pending
// requests held for their other forms, the one held longest is exported as
// it is; its form in a later input is counted and left out, never made
// into a second trace of the request.
func TestFormsHeldBeyondMaxPendingAreCountedNotDoubled(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	files := runFixtures(t, dir, "summary.json", "vllm.log")
	code, stderr, ss := importOut(t, "-max-pending", "1", files["vllm.log"], files["summary.json"])
	if code != 1 || !strings.Contains(stderr, "omnitrace import: 2 requests of a later input were left out") || !strings.Contains(stderr, "imported 3,") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
	roles(t, "held beyond -max-pending", ss) // each request in one trace
	if n := len(traceview.ByTrace(ss)); n != 3 {
		t.Errorf("%d traces, want 3", n)
	}
}

// cancelOnRead is a stdin that interrupts the import at its first read,
// and ends.
type cancelOnRead struct{ cancel context.CancelFunc }

func (c cancelOnRead) Read([]byte) (int, error) { c.cancel(); return 0, io.EOF }

// TestAnInterruptHandsOnTheRequestsHeldForTheirOtherForms: requests held
// for their other forms when an import is interrupted were read: they are
// handed on as anything read, and the import waits for them as for the
// exporter (here one that never answers: said so), never taking them for
// a read that is stuck.
func TestAnInterruptHandsOnTheRequestsHeldForTheirOtherForms(t *testing.T) {
	clearEnv(t)
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hold)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	// More spans than the export queue holds: the workers wait on the
	// collector, and the hand-off waits on them.
	const n = 12000
	var doc strings.Builder
	doc.WriteString(`{"stage_table": [`)
	for i := range n {
		if i > 0 {
			doc.WriteString(",\n")
		}
		fmt.Fprintf(&doc, `{"request_id": "r%d", "stages": [{"stage_id": 0, "stage_gen_time_ms": 5, "diffusion_engine_exec_time_ms": 4}]}`, i)
	}
	doc.WriteString("]}\n")
	summary := filepath.Join(t.TempDir(), "summary.json")
	if err := os.WriteFile(summary, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb bytes.Buffer
	code := run(ctx, []string{"import", "-max-pending", "100000", summary, "-"}, cancelOnRead{cancel}, io.Discard, &errb)
	if code != 1 || strings.Contains(errb.String(), "interrupted while reading") || !strings.Contains(errb.String(), "the exporter did not finish") {
		t.Errorf("exit %d:\n%s", code, errb.String())
	}
}
