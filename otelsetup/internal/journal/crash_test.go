// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The crash tests run this test binary again as a child that journals
// spans and dies: killed with SIGKILL at a point the parent picks, or of a
// fatal runtime error, or of a panic on another goroutine. The child says
// on stdout what it did, one line each, after the call returned:
//
//	S <span id>   a span started (OnStart returned)
//	E <span id>   a span ended (OnEnd returned)
//
// Its exporter, the backend, appends each batch it accepts to a file as
// "B <id> <id> ...\n" before returning, so the parent knows what reached
// the backend, and the window where a batch did but was not confirmed.
const (
	childMode = "JOURNAL_CHILD"
	childDir  = "JOURNAL_CHILD_DIR"
	childSeed = "JOURNAL_CHILD_SEED"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childMode); mode != "" {
		if f, ok := otherChildren[mode]; ok {
			f()
		} else {
			runChild(mode)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// backend writes every batch it accepts to a file. With hold set it then
// says W and never returns: the parent kills the child in the window.
type backend struct {
	f    *os.File
	hold bool
}

func (b backend) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	var line bytes.Buffer
	line.WriteString("B")
	for _, s := range ss {
		line.WriteString(" " + s.SpanContext().SpanID().String())
	}
	line.WriteString("\n")
	_, err := b.f.Write(line.Bytes())
	if b.hold {
		_, _ = os.Stdout.WriteString("W\n")
		select {}
	}
	return err
}

func (backend) Shutdown(context.Context) error { return nil }

func runChild(mode string) {
	// A child nobody kills stops by itself.
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	dir := os.Getenv(childDir)
	seed, _ := strconv.ParseUint(os.Getenv(childSeed), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 1))
	f, err := os.OpenFile(filepath.Join(dir, "backend"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		panic(err)
	}
	j, err := Open(filepath.Join(dir, "journal"), WithSize(minSize), WithHeartbeat(minInterval))
	if err != nil {
		panic(err)
	}
	journalled := sdktrace.WithSpanProcessor(j.SpanProcessor())
	queue := sdktrace.DefaultMaxQueueSize
	if mode == "after" || mode == "drop" {
		queue = 16 // the batcher drops spans
	}
	batched := sdktrace.WithBatcher(j.WrapExporter(backend{f, mode == "window"}), sdktrace.WithBatchTimeout(time.Millisecond), sdktrace.WithMaxExportBatchSize(min(64, queue)), sdktrace.WithMaxQueueSize(queue))
	opts := []sdktrace.TracerProviderOption{journalled, batched}
	if mode == "after" {
		// The journal after the batcher: a span's export may be confirmed
		// before its end reaches the journal.
		opts = []sdktrace.TracerProviderOption{batched, journalled}
	}
	tp := sdktrace.NewTracerProvider(opts...)
	tr := tp.Tracer("child", trace.WithInstrumentationVersion("v1"))
	say := func(what string, s trace.Span) {
		_, _ = os.Stdout.WriteString(what + " " + s.SpanContext().SpanID().String() + "\n")
	}
	ctx := context.Background()
	if mode == "stage" {
		// A stage of a multi-stage pipeline: its request span is another
		// process's, carried in W3C trace context.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": os.Getenv("TRACEPARENT")})
	}
	// A bounded run, then a wait for the parent's kill.
	requests := 1 + rng.IntN(40)
	for range requests {
		name, kind := "omni.request", trace.SpanKindServer
		if mode == "stage" {
			name, kind = "omni.stage", trace.SpanKindInternal
		}
		rctx, req := tr.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attribute.String("omni.request.id", fmt.Sprint("req-", rng.Uint32()))))
		say("S", req)
		for p := range 6 {
			_, ph := tr.Start(rctx, "omni.diffusion.phase", trace.WithAttributes(attribute.Int("i", p)))
			say("S", ph)
			if rng.IntN(4) != 0 {
				ph.SetStatus(codes.Ok, "")
				ph.End()
				say("E", ph)
			}
		}
		if rng.IntN(3) != 0 {
			req.End()
			say("E", req)
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Millisecond) // let the batcher export
		}
	}
	_, _ = os.Stdout.WriteString("DONE\n")
	switch mode {
	case "fatal":
		var mu sync.Mutex
		mu.Unlock() // fatal error: sync: unlock of unlocked mutex
	case "panic":
		go func() { panic("a goroutine's panic nobody recovers") }()
	}
	select {}
}

// child is one run of a child, seen by the parent.
type child struct {
	started, ended map[string]bool
	order          []string
	exit           error
	stderr         string
}

// runChildProcess runs a child in dir and kills it after it said killAt
// lines (0: let it die by itself).
func runChildProcess(t *testing.T, dir, mode string, seed uint64, killAt int, env ...string) child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childMode+"="+mode, childDir+"="+dir, childSeed+"="+strconv.FormatUint(seed, 10))
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := child{started: map[string]bool{}, ended: map[string]bool{}}
	sc := bufio.NewScanner(out)
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		lines++
		switch {
		case strings.HasPrefix(line, "S "):
			c.started[line[2:]] = true
			c.order = append(c.order, line[2:])
		case strings.HasPrefix(line, "E "):
			c.ended[line[2:]] = true
		}
		// A killed child is killed after killAt lines or once done; the
		// others die by themselves after DONE.
		if (killAt > 0 && lines >= killAt) || (line == "DONE" && (mode == "kill" || mode == "stage" || mode == "after" || mode == "drop")) || line == "W" {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	_, _ = io.Copy(io.Discard, out)
	c.exit = cmd.Wait()
	c.stderr = stderr.String()
	return c
}

// backendBatches reads what the child's backend accepted.
func backendBatches(t *testing.T, dir string) [][]string {
	b, err := os.ReadFile(filepath.Join(dir, "backend"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var batches [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "B" {
			batches = append(batches, f[1:])
		}
	}
	return batches
}

// checkRecovery checks a dead child's recovery: every span it started
// reached the backend or is recovered, once; only the backend's last
// batch may be both (the at-least-once window); a span it saw end is
// recovered as it ended, one recovered as open never said it ended; every
// recovered span ends no earlier than it starts.
func checkRecovery(t *testing.T, dir string, c child) (got tracetest.SpanStubs, window int) {
	t.Helper()
	exp := &memExporter{}
	rep, err := Recover(context.Background(), filepath.Join(dir, "journal"), exp)
	if err != nil {
		t.Fatalf("Recover: %v (%+v)", err, rep)
	}
	got = exp.stubs()
	recovered := byID(t, got)
	batches := backendBatches(t, dir)
	inBackend := map[string]int{}
	for i, b := range batches {
		for _, id := range b {
			inBackend[id] = i
		}
	}
	for id := range c.started {
		_, r := recovered[mustID(t, id)]
		if _, b := inBackend[id]; !r && !b {
			t.Errorf("span %s started and lost: neither recovered nor at the backend (report %+v)", id, rep)
		}
	}
	for id, s := range recovered {
		hexID := hex.EncodeToString(id[:])
		if i, b := inBackend[hexID]; b && i == len(batches)-1 {
			window++
		} else if b {
			t.Errorf("span %s recovered and at the backend in batch %d of %d: only the last batch may be sent twice", hexID, i+1, len(batches))
		}
		died := s.Status.Code == codes.Error && hasAttr(s.Attributes, errorTypeKey.String(ErrorProcessDied))
		if c.ended[hexID] && died {
			t.Errorf("span %s ended before the death but was recovered as open", hexID)
		}
		if s.EndTime.Before(s.StartTime) {
			t.Errorf("span %s ends before it starts", hexID)
		}
		if !hasAttr(s.Attributes, RecoveredKey.Bool(true)) {
			t.Errorf("span %s lacks omni.recovered", hexID)
		}
		if s.InstrumentationScope.Name != "child" || s.InstrumentationScope.Version != "v1" {
			t.Errorf("span %s scope %+v", hexID, s.InstrumentationScope)
		}
	}
	if rep.Corrupt != 0 {
		t.Errorf("report %+v: corrupt records", rep)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "journal")); len(left) != 0 {
		t.Errorf("%d files left after recovery", len(left))
	}
	return got, window
}

func hasAttr(kvs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, kv := range kvs {
		if kv == want {
			return true
		}
	}
	return false
}

func mustID(t *testing.T, s string) [8]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 {
		t.Fatalf("bad span id %q from the child", s)
	}
	return [8]byte(b)
}

func crashRounds() int {
	if raceEnabled || testing.Short() {
		return 20
	}
	return 100
}

// TestSpansSurviveSIGKILL kills children at random points and recovers
// what each journalled.
func TestSpansSurviveSIGKILL(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	total, windows := 0, 0
	for round := range crashRounds() {
		dir := t.TempDir()
		seed := rng.Uint64()
		// A child says at most 40 x (1 + 6 + 7) + 1 lines.
		killAt := 1 + rng.IntN(400)
		c := runChildProcess(t, dir, "kill", seed, killAt)
		if len(c.started) == 0 {
			t.Fatalf("round %d: the child started nothing (stderr: %s)", round, c.stderr)
		}
		got, window := checkRecovery(t, dir, c)
		total += len(got)
		if window > 0 {
			windows++
		}
		if t.Failed() {
			t.Fatalf("round %d (seed %d, kill after %d lines): %d started, %d recovered", round, seed, killAt, len(c.started), len(got))
		}
	}
	t.Logf("%d kills, %d spans recovered; %d kills fell between a batch's export and its confirmation", crashRounds(), total, windows)
}

// A child killed after its backend accepted a batch and before the
// journal confirmed it: that batch, and only it, is sent again.
func TestAKillInTheAtLeastOnceWindowSendsTheBatchAgain(t *testing.T) {
	for round := range 5 {
		dir := t.TempDir()
		c := runChildProcess(t, dir, "window", uint64(round), 0)
		_, window := checkRecovery(t, dir, c)
		batches := backendBatches(t, dir)
		if len(batches) != 1 || window != len(batches[0]) {
			t.Fatalf("round %d: %d batches at the backend, %d of the last sent again; want one batch, all of it", round, len(batches), window)
		}
	}
}

func TestSpansSurviveAFatalErrorAndAPanic(t *testing.T) {
	for _, mode := range []string{"fatal", "panic"} {
		t.Run(mode, func(t *testing.T) {
			for round := range 3 {
				dir := t.TempDir()
				c := runChildProcess(t, dir, mode, uint64(round), 0)
				if c.exit == nil || (mode == "fatal" && !strings.Contains(c.stderr, "fatal error")) || (mode == "panic" && !strings.Contains(c.stderr, "panic: a goroutine's panic")) {
					t.Fatalf("the child did not die as planned: %v\n%s", c.exit, c.stderr)
				}
				got, _ := checkRecovery(t, dir, c)
				if len(got) == 0 && len(c.started) > len(c.ended) {
					t.Errorf("%d open spans, none recovered", len(c.started)-len(c.ended))
				}
			}
		})
	}
}

// A stage killed mid-request: its spans are recovered into the request's
// trace, under the request span of the process that sent it there.
func TestAKilledStageJoinsTheRequestsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, req := tp.Tracer("gateway").Start(context.Background(), "omni.request", trace.WithSpanKind(trace.SpanKindServer))
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), req), carrier)
	dir := t.TempDir()
	c := runChildProcess(t, dir, "stage", 7, 0, "TRACEPARENT="+carrier["traceparent"])
	got, _ := checkRecovery(t, dir, c)
	req.End()
	if len(got) == 0 {
		t.Fatal("nothing recovered")
	}
	stages := map[trace.SpanID]bool{}
	for _, s := range got {
		if s.SpanContext.TraceID() != req.SpanContext().TraceID() {
			t.Errorf("span %s in trace %s, want the request's %s", s.Name, s.SpanContext.TraceID(), req.SpanContext().TraceID())
		}
		if s.Name == "omni.stage" {
			stages[s.SpanContext.SpanID()] = true
			if s.Parent.SpanID() != req.SpanContext().SpanID() || !s.Parent.IsRemote() {
				t.Errorf("stage span's parent %s (remote %v), want the request span %s, remote", s.Parent.SpanID(), s.Parent.IsRemote(), req.SpanContext().SpanID())
			}
		}
	}
	// Phases recovered hang under a stage span of the child (recovered, or
	// exported before the death).
	for _, s := range got {
		if s.Name == "omni.diffusion.phase" && !stages[s.Parent.SpanID()] && !c.started[s.Parent.SpanID().String()] {
			t.Errorf("phase under %s, no stage span of the child", s.Parent.SpanID())
		}
	}
}

// Two processes journal into one directory: one is killed while the
// other runs. Recover takes the dead one's spans and leaves the live
// one's file alone; once that one is killed too, its spans come back, and
// neither file was damaged by the other.
func TestTwoProcessesInOneDirectory(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childMode+"=stage", childDir+"="+dir, childSeed+"=11")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	alive := child{started: map[string]bool{}, ended: map[string]bool{}}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "DONE" {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "S" {
			alive.started[f[1]] = true
		}
	}
	dead := runChildProcess(t, dir, "kill", 12, 0)

	exp := &memExporter{}
	rep, err := Recover(context.Background(), filepath.Join(dir, "journal"), exp)
	if err != nil || rep.Live != 1 || rep.Files != 1 || rep.Torn != 0 || rep.Corrupt != 0 {
		t.Fatalf("Recover beside a live process: %+v, %v", rep, err)
	}
	for _, s := range exp.stubs() {
		if !dead.started[s.SpanContext.SpanID().String()] {
			t.Errorf("span %s recovered from the live process's journal", s.SpanContext.SpanID())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	got, _ := checkRecovery(t, dir, alive)
	if len(got) == 0 {
		t.Error("nothing recovered from the second process")
	}
	for _, s := range got {
		if !alive.started[s.SpanContext.SpanID().String()] {
			t.Errorf("span %s recovered twice or from elsewhere", s.SpanContext.SpanID())
		}
	}
}

// Children killed at random points with the journal registered after the
// batcher (a span's export may be confirmed before its end reaches the
// journal), and with a batcher whose queue is full (the spans it drops are
// never confirmed, and the confirmations after them pass them over): every
// span started is at the backend or recovered, only the last batch both;
// each recovered span carries the attributes it started with (the copy a
// kill in the window sends again among them), and nothing is left in the
// directory.
func TestSpansSurviveSIGKILLWhateverTheProcessorsOrder(t *testing.T) {
	for _, mode := range []string{"after", "drop"} {
		t.Run(mode, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
			total, windows := 0, 0
			for round := range 2 * crashRounds() {
				dir := t.TempDir()
				seed := rng.Uint64()
				killAt := 1 + rng.IntN(400)
				c := runChildProcess(t, dir, mode, seed, killAt)
				if len(c.started) == 0 {
					t.Fatalf("round %d: the child started nothing (stderr: %s)", round, c.stderr)
				}
				got, window := checkRecovery(t, dir, c)
				for _, s := range got {
					key := attribute.Key("i")
					if s.Name != "omni.diffusion.phase" {
						key = "omni.request.id"
					}
					if !slices.ContainsFunc(s.Attributes, func(kv attribute.KeyValue) bool { return kv.Key == key }) {
						t.Errorf("span %s (%s) recovered without its attribute %s: %v", s.SpanContext.SpanID(), s.Name, key, s.Attributes)
					}
				}
				total += len(got)
				if window > 0 {
					windows++
				}
				if t.Failed() {
					t.Fatalf("round %d (seed %d, kill after %d lines): %d started, %d recovered", round, seed, killAt, len(c.started), len(got))
				}
			}
			t.Logf("%d kills, %d spans recovered; %d kills fell between a batch's export and its confirmation", 2*crashRounds(), total, windows)
		})
	}
}
