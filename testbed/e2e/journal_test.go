// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/codes"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// killsEnv sets the number of SIGKILLs of TestKilledEnginesSpansReachJaegerOnce
// (100 unless set): OTELOMNI_E2E_KILLS=1000 is the longer run of
// docs/reliability.md.
const killsEnv = "OTELOMNI_E2E_KILLS"

// started is what an engine said it started: span id -> its trace id and
// the life (run of the engine) it started in.
type started map[string]startedSpan

type startedSpan struct {
	trace string
	life  int
}

// life is one run of the engine: what it said it started, the ids of the
// requests it took, and when it died.
type life struct {
	died    time.Time
	killed  bool
	stderr  string
	sent    map[string]string // request id -> scenario
	journal []string          // its journal files right after its death
}

// engineLife starts the diffusion engine with its crash journal in dir,
// exporting to j, and reads the span ids it reports on a pipe (the
// example's OTELOMNI_EXAMPLE_SPAN_FD hook). kill, when set, is called once
// the engine has reported its first span and returns when to kill it with
// SIGKILL; without it the engine runs to its end, or to the death its
// extra environment asks for.
func engineLife(t *testing.T, ctx context.Context, j *jaeger.Jaeger, dir, service string, n int, got started,
	args []string, kill func() time.Duration, extra ...string) *life {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
	proto := []string{"grpc", "http/protobuf"}[n%2]
	cmd := exec.CommandContext(ctx, bin["diffusion"], append([]string{"-quiet", "-seed", strconv.Itoa(1000 + n), "-manifest", manifest}, args...)...)
	cmd.Env = cleanEnv(append([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPEndpoint(proto), "OTEL_EXPORTER_OTLP_PROTOCOL=" + proto,
		"OTEL_SERVICE_NAME=" + service, "OTELOMNI_JOURNAL_DIR=" + dir, "OTELOMNI_JOURNAL_SIZE_MIB=4",
		"OTELOMNI_EXAMPLE_SPAN_FD=3"}, extra...)...)
	cmd.ExtraFiles = []*os.File{w}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close() // the child's copy is the writer now: EOF when it dies
	first := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		once := sync.Once{}
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "S" {
				continue // a line cut by the death
			}
			got[f[2]] = startedSpan{trace: f[1], life: n}
			once.Do(func() { close(first) })
		}
	}()
	l := &life{}
	if kill != nil {
		select {
		case <-first:
		case <-done:
		}
		time.Sleep(kill())
		_ = cmd.Process.Signal(syscall.SIGKILL)
		l.killed = true
	}
	err = cmd.Wait()
	l.died = time.Now()
	<-done
	l.stderr = stderr.String()
	var ee *exec.ExitError
	switch {
	case kill != nil && !(errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL):
		t.Fatalf("life %d: the engine was to be killed: %v\n%s", n, err, l.stderr)
	case kill == nil && len(extra) == 0 && err != nil:
		t.Fatalf("life %d: %v\n%s", n, err, l.stderr)
	}
	l.sent = readSentIDs(manifest)
	l.journal, _ = filepath.Glob(filepath.Join(dir, fmt.Sprintf("omni-%d-*.journal", cmd.Process.Pid)))
	return l
}

// readSentIDs reads a manifest as a death leaves it: a last line may be cut.
func readSentIDs(path string) map[string]string {
	out := map[string]string{}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		var m struct{ ID, Scenario string }
		if json.Unmarshal([]byte(line), &m) == nil && m.ID != "" {
			out[m.ID] = m.Scenario
		}
	}
	return out
}

// fetchAll reads from Jaeger every trace that holds a started span, until
// each started span is there or within passes.
func fetchAll(t *testing.T, ctx context.Context, j *jaeger.Jaeger, got started, within time.Duration) map[string][]traceview.Span {
	t.Helper()
	want := map[string]map[string]bool{}
	for sid, s := range got {
		if want[s.trace] == nil {
			want[s.trace] = map[string]bool{}
		}
		want[s.trace][sid] = true
	}
	traces := map[string][]traceview.Span{}
	deadline := time.Now().Add(within)
	for {
		missing := 0
		for tid, ids := range want {
			if hasAll(traces[tid], ids) {
				continue
			}
			tr, err := j.Client().Trace(ctx, tid)
			if err != nil {
				t.Fatal(err)
			}
			traces[tid] = tr
			if !hasAll(tr, ids) {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return traces
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func hasAll(tr []traceview.Span, ids map[string]bool) bool {
	if tr == nil {
		return false
	}
	have := map[string]bool{}
	for _, s := range tr {
		have[s.SpanID] = true
	}
	for id := range ids {
		if !have[id] {
			return false
		}
	}
	return true
}

// checkRecovered checks every trace against what the engines said they
// started and when they died: every started span there once (the
// at-least-once window, a span exported and then recovered with the same
// ids and times, is counted and returned), every span open at a death
// ending after its start and no later than the death, every request's
// trace one tree under its request span, Error when the death cut it
// short, and every request that completed whole as its scenario says.
func checkRecovered(t *testing.T, traces map[string][]traceview.Span, got started, lives []*life, service string) (window, recoveredOpen, completed int) {
	t.Helper()
	sent := map[string]string{}
	for _, l := range lives {
		for id, sc := range l.sent {
			sent[id] = sc
		}
	}
	for tid, tr := range traces {
		byID := map[string][]traceview.Span{}
		for _, s := range tr {
			byID[s.SpanID] = append(byID[s.SpanID], s)
		}
		var dedup []traceview.Span
		for id, copies := range byID {
			if len(copies) > 1 {
				if len(copies) == 2 && sameButRecovered(copies[0], copies[1]) {
					window++
				} else {
					t.Errorf("trace %s: span %s (%s) is there %d times", tid, id, copies[0].Name, len(copies))
				}
			}
			keep := copies[0]
			for _, c := range copies {
				if !isRecovered(c) {
					keep = c
				}
			}
			dedup = append(dedup, keep)
		}
		for _, s := range dedup {
			st, ok := got[s.SpanID]
			if !ok {
				continue // started just before a death, not yet reported
			}
			if s.Str(string(semconv.ErrorTypeKey)) == processDied && isRecovered(s) {
				recoveredOpen++
				died := lives[st.life].died
				if s.End.Before(s.Start) || s.End.After(died) {
					t.Errorf("%s %s: recovered open, ends at %v, outside [its start %v, the death %v]", s.Name, s.SpanID, s.End, s.Start, died)
				}
				if s.StatusCode != codes.Error {
					t.Errorf("%s %s: open at the death, status %v, want Error", s.Name, s.SpanID, s.StatusCode)
				}
			}
		}
		roots, _ := traceview.Trees(dedup)
		hasRequest := false
		for _, s := range dedup {
			hasRequest = hasRequest || s.Name == spans.RequestSpanName
		}
		if !hasRequest {
			continue // the engine's own traces: its start, its batches
		}
		if len(roots) != 1 || roots[0].Span.Name != spans.RequestSpanName {
			names := []string{}
			for _, r := range roots {
				names = append(names, r.Span.Name)
			}
			t.Errorf("trace %s: %d roots %v, want one omni.request", tid, len(roots), names)
			continue
		}
		root := roots[0].Span
		cut := false
		for _, s := range dedup {
			cut = cut || s.Str(string(semconv.ErrorTypeKey)) == processDied
		}
		if cut {
			if root.StatusCode != codes.Error {
				t.Errorf("trace %s: a request the death cut short has status %v, want Error", tid, root.StatusCode)
			}
			continue
		}
		completed++
		checkSingleStageTrace(t, dedup, sent, service)
	}
	for sid, st := range got {
		if !hasAll(traces[st.trace], map[string]bool{sid: true}) {
			t.Errorf("span %s of trace %s, started in life %d, is not in Jaeger", sid, st.trace, st.life)
		}
	}
	return window, recoveredOpen, completed
}

func isRecovered(s traceview.Span) bool {
	v, _ := s.Bool(string(recoveredKey))
	return v
}

// sameButRecovered reports whether a and b are one span, exported live
// and recovered: the at-least-once window.
func sameButRecovered(a, b traceview.Span) bool {
	return isRecovered(a) != isRecovered(b) && a.Name == b.Name && a.Start.Equal(b.Start) && a.End.Equal(b.End) &&
		a.StatusCode == b.StatusCode && a.ParentID == b.ParentID
}

// TestKilledEnginesSpansReachJaegerOnce: the demo's engine, a real child
// process with its crash journal on, exporting to a real Jaeger, is
// killed with SIGKILL at a random moment mid-traffic, again and again; each
// restart on the same directory recovers what the last one left. In
// Jaeger: every span an engine said it started is there once; every span
// open at a death ends after it starts and no later than the death, status
// Error; every request's trace is one tree with its request span, Error if
// the death cut it short; every request that completed is whole.
func TestKilledEnginesSpansReachJaegerOnce(t *testing.T) {
	kills := 100
	if v := os.Getenv(killsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			t.Fatalf("%s=%q: want 1 to 100000", killsEnv, v)
		}
		kills = n
	}
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	service := "e2e-journal-kill"
	got := started{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var lives []*life
	args := []string{"-requests", "1000000", "-concurrency", "2", "-scale", "0.1"}
	for n := range kills {
		lives = append(lives, engineLife(t, ctx, j, dir, service, n, got, args,
			func() time.Duration { return time.Duration(rng.IntN(250)) * time.Millisecond }))
		if t.Failed() {
			return
		}
	}
	// A last life that ends cleanly recovers the last death's spans and
	// leaves no journal behind.
	lives = append(lives, engineLife(t, ctx, j, dir, service, kills, got, []string{"-requests", "10", "-concurrency", "2", "-scale", "0.1"}, nil))
	if left, _ := filepath.Glob(filepath.Join(dir, "*.journal")); len(left) != 0 {
		t.Errorf("journal files left after the last, clean, life: %v", left)
	}
	traces := fetchAll(t, ctx, j, got, time.Minute)
	window, open, completed := checkRecovered(t, traces, got, lives, service)
	t.Logf("%d kills: %d spans started in %d traces, %d recovered open at a death, %d requests completed whole; %d spans sent twice in the at-least-once window",
		kills, len(got), len(traces), open, completed, window)
	if open == 0 || completed == 0 {
		t.Errorf("%d spans recovered open, %d requests completed: the kills did not land mid-traffic", open, completed)
	}
}

// TestFatalErrorsLoseNoSpan: the engine dies of an unrecovered panic on
// another goroutine, and of `fatal error: concurrent map writes`, mid-request,
// without running its deferred shutdown (its journal stays); the next
// start exports every span it started, once.
func TestFatalErrorsLoseNoSpan(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, how := range []struct{ name, says string }{{"panic", "panic: simulated engine fault"}, {"fatal", "fatal error: concurrent map writes"}} {
		t.Run(how.name, func(t *testing.T) {
			dir := t.TempDir()
			service := "e2e-journal-" + how.name
			got := started{}
			args := []string{"-requests", "1000000", "-concurrency", "2", "-scale", "0.1"}
			dead := engineLife(t, ctx, j, dir, service, 0, got, args, nil, "OTELOMNI_EXAMPLE_DIE="+how.name+":3")
			if !strings.Contains(dead.stderr, how.says) {
				t.Fatalf("the engine did not die of %q:\n%s", how.says, dead.stderr)
			}
			if len(dead.journal) != 1 {
				t.Fatalf("the dead engine's journal files: %v, want one (no deferred shutdown ran)", dead.journal)
			}
			next := engineLife(t, ctx, j, dir, service, 1, got, []string{"-requests", "4", "-concurrency", "2", "-scale", "0.1"}, nil)
			traces := fetchAll(t, ctx, j, got, time.Minute)
			_, open, _ := checkRecovered(t, traces, got, []*life{dead, next}, service)
			if open == 0 {
				t.Error("no span was open at the death")
			}
		})
	}
}

// TestAKilledStageJoinsItsRequestsTrace: the multi-stage example's
// diffusion stage process kills itself with SIGKILL in the middle of its
// first denoising loop; the gateway ends the request with a stage error;
// `omnitrace recover` exports the dead stage's journal: in Jaeger the
// request is one trace, its stage spans under the gateway's request span
// beside the other process's, the dead stage's open ones ended at its death.
func TestAKilledStageJoinsItsRequestsTrace(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	service := "e2e-journal-stage"
	manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
	gw := exec.CommandContext(ctx, bin["omni"], "-requests", "2", "-concurrency", "1", "-manifest", manifest)
	gw.Env = cleanEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint("grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME="+service, "OTELOMNI_JOURNAL_DIR="+dir, "OTELOMNI_EXAMPLE_DIE_STAGE=dit")
	out, err := gw.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "stage dit") {
		t.Fatalf("the gateway should report the dit stage's death: %v\n%s", err, out)
	}
	died := time.Now()
	left, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	if len(left) != 1 {
		t.Fatalf("journal files after the run: %v, want the dead stage's only", left)
	}
	rec := exec.CommandContext(ctx, bin["omnitrace"], "recover", dir)
	rec.Env = cleanEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint("http/protobuf"), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	rout, err := rec.CombinedOutput()
	if err != nil || !strings.Contains(string(rout), "1 journal files read, 1 removed") {
		t.Fatalf("omnitrace recover: %v\n%s", err, rout)
	}
	var imageID string
	for id, p := range readPipelines(manifest) {
		if p == "image" {
			imageID = id
		}
	}
	traces, err := j.WaitTraces(ctx, service, died.Add(-time.Minute), time.Now().Add(time.Minute), 2, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var tr []traceview.Span
	for _, x := range traces {
		for _, s := range x {
			if s.Name == spans.RequestSpanName && s.Str(string(attrs.RequestIDKey)) == imageID {
				tr = x
			}
		}
	}
	// The dead stage's spans may arrive a moment after the gateway's.
	deadline := time.Now().Add(30 * time.Second)
	for !hasService(tr, service+"-dit") && time.Now().Before(deadline) && tr != nil {
		time.Sleep(250 * time.Millisecond)
		tr, _ = j.Client().Trace(ctx, tr[0].TraceID)
	}
	if tr == nil {
		t.Fatalf("no trace of the image request %q in Jaeger", imageID)
	}
	roots, _ := traceview.Trees(tr)
	if len(roots) != 1 || roots[0].Span.Name != spans.RequestSpanName || roots[0].Span.StatusCode != codes.Error {
		t.Fatalf("the request's trace has %d roots, want one omni.request with status Error", len(roots))
	}
	byID := map[string]traceview.Span{}
	for _, s := range tr {
		byID[s.SpanID] = s
	}
	var ditStage, open int
	for _, s := range tr {
		if s.Service != service+"-dit" {
			continue
		}
		if !isRecovered(s) {
			t.Errorf("%s of the dead stage is not marked omni.recovered", s.Name)
		}
		if s.Name == spans.StageSpanName {
			ditStage++
			if p := byID[s.ParentID]; p.Name != spans.RequestSpanName {
				t.Errorf("the dead stage's omni.stage hangs under %q, want omni.request", p.Name)
			}
		}
		if s.Str(string(semconv.ErrorTypeKey)) == processDied {
			open++
			if s.End.Before(s.Start) || s.End.After(died) || s.StatusCode != codes.Error {
				t.Errorf("%s: open at the death, ends %v (start %v, death %v), status %v", s.Name, s.End, s.Start, died, s.StatusCode)
			}
		}
	}
	if ditStage != 1 || open < 3 { // the stage, its exec and its forward
		t.Errorf("the dead stage's spans in the trace: %d omni.stage, %d open at the death; want 1 and at least 3", ditStage, open)
	}
	if !hasService(tr, service+"-ar") {
		t.Error("the living stage's spans are not in the trace")
	}
}

func hasService(tr []traceview.Span, service string) bool {
	for _, s := range tr {
		if s.Service == service {
			return true
		}
	}
	return false
}

func readPipelines(path string) map[string]string {
	out := map[string]string{}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		var m struct{ ID, Pipeline string }
		if json.Unmarshal([]byte(line), &m) == nil && m.ID != "" {
			out[m.ID] = m.Pipeline
		}
	}
	return out
}
