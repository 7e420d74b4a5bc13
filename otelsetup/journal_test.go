// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// The journal's tests run this test binary again as an engine that
// journals its spans and is killed: TestJournalChild, with
// OTELSETUP_JOURNAL_CHILD naming what it does. It says on stdout, one line
// each:
//
//	S <span id>  a span started (its OnStart returned: it is journalled)
//	F            every span so far was exported and confirmed
//	R            ready to be killed
const journalChildEnv = "OTELSETUP_JOURNAL_CHILD"

// startedIDs is a span processor, registered after the journal's, that
// says each span's id as it starts.
type startedIDs struct{ mu sync.Mutex }

func (p *startedIDs) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Printf("S %s\n", s.SpanContext().SpanID())
}
func (*startedIDs) OnEnd(sdktrace.ReadOnlySpan)      {}
func (*startedIDs) Shutdown(context.Context) error   { return nil }
func (*startedIDs) ForceFlush(context.Context) error { return nil }

// nilExporter accepts every batch and sends it nowhere.
type nilExporter struct{}

func (nilExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (nilExporter) Shutdown(context.Context) error                             { return nil }

// hangAfter accepts every batch until hang is set, then never returns.
type hangAfter struct{ hang atomic.Bool }

func (h *hangAfter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	if h.hang.Load() {
		select {}
	}
	return nil
}
func (*hangAfter) Shutdown(context.Context) error { return nil }

// downExporter is a collector that is down: every export fails.
type downExporter struct{ calls atomic.Int64 }

func (d *downExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	d.calls.Add(1)
	return errors.New("connection refused")
}
func (*downExporter) Shutdown(context.Context) error { return nil }

func TestJournalChild(t *testing.T) {
	mode := os.Getenv(journalChildEnv)
	if mode == "" {
		t.Skip("run by the journal's tests as a child")
	}
	// A child nobody kills stops by itself.
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	// The collector takes every batch until F, then hangs: what starts
	// after F is never confirmed.
	hang := &hangAfter{}
	var exp sdktrace.SpanExporter = hang
	if mode == "down" {
		exp = &downExporter{}
	}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(exp), otelsetup.WithoutGlobal(),
		otelsetup.WithFallbackExporter(nil), otelsetup.WithSpanProcessor(&startedIDs{}),
		otelsetup.WithServiceName("journal-child"),
		otelsetup.WithBatchOptions(sdktrace.WithBatchTimeout(time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	ctx := context.Background()
	// Requests that complete, exported and confirmed.
	for i := range 5 {
		_, req := in.Start(ctx, otelomni.RequestInfo{ID: fmt.Sprint("done-", i), Model: "m"})
		p := req.StartPhase(ctx, spans.Preprocess)
		p.End(nil)
		req.End(nil)
	}
	if err := tel.ForceFlush(ctx); err != nil && mode != "down" {
		t.Fatal(err)
	}
	hang.hang.Store(true)
	fmt.Println("F")
	if mode == "times" {
		// Four spans OTLP carries, two it cannot: from 1960, to 3000.
		tr := tel.TracerProvider().Tracer("t")
		for range 4 {
			_, s := tr.Start(ctx, "fine")
			s.End()
		}
		_, s := tr.Start(ctx, "from 1960", trace.WithTimestamp(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)))
		s.End(trace.WithTimestamp(time.Date(1960, 1, 1, 0, 0, 1, 0, time.UTC)))
		_, s = tr.Start(ctx, "to 3000")
		s.End(trace.WithTimestamp(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)))
		fmt.Println("R")
		select {}
	}
	// Requests in flight at the kill: ended phases, open ones, a request
	// that failed, an otelhttp-like server span of another scope.
	for i := range 4 {
		_, req := in.Start(ctx, otelomni.RequestInfo{ID: fmt.Sprint("killed-", i), Model: "m"})
		p := req.StartPhase(ctx, spans.Preprocess)
		p.End(nil)
		req.StartPhase(ctx, spans.Exec) // open at the kill
		if i == 3 {
			req.End(errors.New("failed before the kill"))
		}
	}
	_, srv := tel.TracerProvider().Tracer("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp").
		Start(ctx, "POST /v1/images", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("http.route", "/v1/images")))
	_ = srv
	fmt.Println("R")
	select {}
}

// child runs TestJournalChild in mode with OTELOMNI_JOURNAL_DIR=dir, reads
// its lines until R, kills it with SIGKILL, and returns the ids it said
// started before and after F, and the time of the kill.
func journalChild(t *testing.T, mode, dir string, extraEnv ...string) (confirmed, inFlight map[string]bool, killed time.Time) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestJournalChild$")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "OTELOMNI_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, journalChildEnv+"="+mode, "OTELOMNI_JOURNAL_DIR="+dir), extraEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	confirmed, inFlight = map[string]bool{}, map[string]bool{}
	cur := confirmed
	sc := bufio.NewScanner(out)
	ready := false
	for !ready && sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "S "):
			cur[line[2:]] = true
		case line == "F":
			cur = inFlight
		case line == "R":
			ready = true
		}
	}
	if !ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child ended before it was ready: %s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = time.Now()
	_ = cmd.Wait()
	if len(confirmed) == 0 || len(inFlight) == 0 {
		t.Fatalf("the child started %d spans before F and %d after", len(confirmed), len(inFlight))
	}
	return confirmed, inFlight, killed
}

// journals returns the journal files in dir.
func journals(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.journal"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recoverWith runs Setup on dir with exp and waits for the recovery.
func recoverWith(t *testing.T, dir string, exp sdktrace.SpanExporter) *otelsetup.Telemetry {
	t.Helper()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(exp), otelsetup.WithoutGlobal(),
		otelsetup.WithFallbackExporter(nil), otelsetup.WithJournal(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tel
}

func attr(kvs []attribute.KeyValue, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestJournalRecoversAKilledEngine: an engine killed with SIGKILL
// mid-request; the next Setup with its directory exports every span it
// started after its last confirmed export, once, and none it had
// confirmed: open spans ended at the death with status Error and
// error.type process_died, ended ones as they ended, each with
// omni.recovered, its own ids and its resource, otelhttp's span too.
func TestJournalRecoversAKilledEngine(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	confirmed, inFlight, killed := journalChild(t, "kill", dir)
	if n := len(journals(t, dir)); n != 1 {
		t.Fatalf("%d journal files after the kill, want 1", n)
	}
	exp := newKept()
	tel := recoverWith(t, dir, exp)
	got := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		id := s.SpanContext.SpanID().String()
		if _, dup := got[id]; dup {
			t.Errorf("span %s (%s) recovered twice", id, s.Name)
		}
		got[id] = s
	}
	for id := range confirmed {
		if _, ok := got[id]; ok {
			t.Errorf("span %s was confirmed exported before the kill and was sent again", id)
		}
	}
	open, failed, otelhttp := 0, 0, 0
	for id := range inFlight {
		s, ok := got[id]
		if !ok {
			t.Errorf("span %s started before the kill and was not recovered", id)
			continue
		}
		if v, ok := attr(s.Attributes, recoveredKey); !ok || !v.AsBool() {
			t.Errorf("%s %s: no omni.recovered = true", s.Name, id)
		}
		if v, _ := attr(s.Resource.Attributes(), "service.name"); v.AsString() != "journal-child" {
			t.Errorf("%s %s: service.name %q, want the dead process's", s.Name, id, v.AsString())
		}
		if s.EndTime.Before(s.StartTime) || s.EndTime.After(killed) {
			t.Errorf("%s %s: ends at %v, outside [its start %v, the kill %v]", s.Name, id, s.EndTime, s.StartTime, killed)
		}
		et, _ := attr(s.Attributes, semconv.ErrorTypeKey)
		switch {
		case et.AsString() == processDied:
			open++
			if s.Status.Code != codes.Error {
				t.Errorf("%s %s: open at the death, status %v, want Error", s.Name, id, s.Status.Code)
			}
		case s.Status.Code == codes.Error:
			failed++ // ended with its own error before the kill
		}
		if s.InstrumentationScope.Name == "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp" {
			otelhttp++
		}
	}
	// Three open requests with their exec and the otelhttp span; the
	// request that failed ended its exec with it.
	if open != 3+3+1 || failed < 1 || otelhttp != 1 {
		t.Errorf("%d spans recovered as open, %d as failed, %d of otelhttp; want 7, at least 1, 1", open, failed, otelhttp)
	}
	if len(got) != len(inFlight) {
		t.Errorf("%d spans recovered, want the %d started after the last confirmed export", len(got), len(inFlight))
	}
	if st := tel.ExportStats(); st.Recovered != uint64(len(got)) || st.Ended != 0 {
		t.Errorf("ExportStats %+v: want Recovered = %d and nothing of this process's own", st, len(got))
	}
	// The dead process's file is gone; this process's is there.
	if files := journals(t, dir); len(files) != 1 || strings.Contains(files[0], fmt.Sprintf("omni-%d-", os.Getpid())) == false {
		t.Errorf("journal files after the recovery: %v, want this process's only", files)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if files := journals(t, dir); len(files) != 0 {
		t.Errorf("journal files after a clean shutdown with everything exported: %v", files)
	}
}

// TestJournalKeepsWhatADownCollectorRefused: an engine whose collector is
// down is killed; its spans, exported and refused, are recovered at the
// next start once a collector is up, those of the requests that
// completed among them.
func TestJournalKeepsWhatADownCollectorRefused(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	before, after, _ := journalChild(t, "down", dir)
	exp := newKept()
	recoverWith(t, dir, exp)
	got := map[string]bool{}
	for _, s := range exp.GetSpans() {
		got[s.SpanContext.SpanID().String()] = true
	}
	for _, ids := range []map[string]bool{before, after} {
		for id := range ids {
			if !got[id] {
				t.Errorf("span %s, never exported, was not recovered", id)
			}
		}
	}
	if len(got) != len(before)+len(after) {
		t.Errorf("%d spans recovered, want %d", len(got), len(before)+len(after))
	}
}

// TestJournalSpansRefusedAreConfirmed: a span the safe exporter refuses
// (times OTLP cannot carry) is confirmed like one exported: a clean
// shutdown leaves no file, and nothing is recovered later.
func TestJournalSpansRefusedAreConfirmed(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	exp := newKept()
	tel := recoverWith(t, dir, exp)
	tr := tel.TracerProvider().Tracer("t")
	_, s := tr.Start(context.Background(), "from 1960", trace.WithTimestamp(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)))
	s.End(trace.WithTimestamp(time.Date(1960, 1, 1, 0, 0, 1, 0, time.UTC)))
	_, ok := tr.Start(context.Background(), "fine")
	ok.End()
	if err := tel.Shutdown(context.Background()); err == nil {
		t.Fatal("the refused span is not reported lost")
	}
	if st := tel.ExportStats(); st.Refused != 1 || st.Exported != 1 {
		t.Fatalf("ExportStats %+v, want one refused, one exported", st)
	}
	if files := journals(t, dir); len(files) != 0 {
		t.Errorf("journal files left after a clean shutdown: %v", files)
	}
}

// TestJournalOffCases: with OTEL_SDK_DISABLED, or nothing exported, no
// journal is made and the directory is not read; a directory the journal
// cannot be made in is logged and tracing runs without it.
func TestJournalOffCases(t *testing.T) {
	clearOTelEnv(t)
	t.Run("sdk disabled", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "j")
		t.Setenv("OTEL_SDK_DISABLED", "true")
		t.Setenv("OTELOMNI_JOURNAL_DIR", dir)
		tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(nilExporter{}), otelsetup.WithoutGlobal())
		if err != nil || tel.Enabled() {
			t.Fatalf("Setup: %v, enabled %v", err, tel.Enabled())
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the journal directory was made with the SDK disabled: %v", err)
		}
	})
	t.Run("nothing exported", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "j")
		tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(nil),
			otelsetup.WithSpanProcessor(&startedIDs{}), otelsetup.WithJournal(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer tel.Shutdown(context.Background())
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the journal directory was made with nothing exported: %v", err)
		}
	})
	for name, dir := range map[string]string{"on /proc": "/proc/otelomni-journal", "read-only /proc/self": "/proc/self"} {
		t.Run(name, func(t *testing.T) {
			var logged []error
			var mu sync.Mutex
			prev := otel.GetErrorHandler()
			otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); logged = append(logged, err); mu.Unlock() }))
			defer otel.SetErrorHandler(prev)
			t.Setenv("OTELOMNI_JOURNAL_DIR", dir)
			exp := newKept()
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(exp), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(nil))
			if err != nil {
				t.Fatalf("Setup refused %s: %v", dir, err)
			}
			_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "traced anyway")
			s.End()
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(exp.GetSpans()) != 1 {
				t.Errorf("%d spans exported without the journal, want 1", len(exp.GetSpans()))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(logged) == 0 || !strings.Contains(logged[0].Error(), "crash journal is off") {
				t.Errorf("logged %v, want the journal's error", logged)
			}
		})
	}
}

// TestJournalDirVariableIsChecked: OTELOMNI_JOURNAL_DIR is warned about
// and ignored (no journal, tracing on) when it cannot name a directory:
// relative, a file, longer than a path can be, not UTF-8, padded, under a
// file.
func TestJournalDirVariableIsChecked(t *testing.T) {
	clearOTelEnv(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"journal", "./journal", "../j", "~/j", file, filepath.Join(file, "under"),
		"/" + strings.Repeat("a", 16<<10), "/" + strings.Repeat("a/", 2048), "/tmp/\xff\xfe", " /tmp/j", "/tmp/j ", "/tmp/\n", " "} {
		t.Setenv("OTELOMNI_JOURNAL_DIR", v)
		errs := handled(t)
		tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(nilExporter{}), otelsetup.WithoutGlobal())
		if err != nil || !tel.Enabled() {
			t.Errorf("OTELOMNI_JOURNAL_DIR=%.40q: Setup gave %v, enabled %v: want tracing on", v, err, tel.Enabled())
			continue
		}
		_ = tel.Shutdown(context.Background())
		if w := warnings(errs()); len(w["OTELOMNI_JOURNAL_DIR"]) != 1 || len(w) != 1 {
			t.Errorf("OTELOMNI_JOURNAL_DIR=%.40q: warnings %v, want one", v, errs())
		}
	}
	for _, v := range []string{t.TempDir(), filepath.Join(t.TempDir(), "new", "deeper"), filepath.Join(t.TempDir(), "journal é")} {
		t.Setenv("OTELOMNI_JOURNAL_DIR", v)
		errs := handled(t)
		tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(nilExporter{}), otelsetup.WithoutGlobal())
		if err != nil {
			t.Fatal(err)
		}
		_ = tel.Shutdown(context.Background())
		if w := warnings(errs()); len(w) != 0 {
			t.Errorf("OTELOMNI_JOURNAL_DIR=%q ignored: %v", v, w)
		}
	}
}

// TestTwoEnginesShareAJournalDirectory: two engines on one directory, at
// once, each with its own file; neither's recovery reads the other's live
// file, and each removes its own at a clean shutdown.
func TestTwoEnginesShareAJournalDirectory(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	a, b := newKept(), newKept()
	ta := recoverWith(t, dir, a)
	tb := recoverWith(t, dir, b)
	if n := len(journals(t, dir)); n != 2 {
		t.Fatalf("%d journal files for two engines, want 2", n)
	}
	var wg sync.WaitGroup
	for _, tel := range []*otelsetup.Telemetry{ta, tb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
			for i := range 200 {
				_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: fmt.Sprint(i)})
				req.End(nil)
			}
		}()
	}
	wg.Wait()
	for _, tel := range []*otelsetup.Telemetry{ta, tb} {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := tel.ExportStats(); st.Recovered != 0 || st.Exported != 200 {
			t.Errorf("ExportStats %+v, want 200 exported, none recovered", st)
		}
	}
	if n := len(a.GetSpans()) + len(b.GetSpans()); n != 400 {
		t.Errorf("%d spans exported, want 400", n)
	}
	if files := journals(t, dir); len(files) != 0 {
		t.Errorf("journal files after both shut down: %v", files)
	}
}

// TestRecoveryRacesNewSpans: the recovery of a dead engine's spans runs
// while this engine makes spans of its own on several goroutines, all
// through one exporter that is not safe for concurrent use (it counts
// overlapping calls): every span arrives once, none overlaps.
func TestRecoveryRacesNewSpans(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	_, inFlight, _ := journalChild(t, "kill", dir)
	exp := &serialOnly{kept: newKept()}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(exp), otelsetup.WithoutGlobal(),
		otelsetup.WithFallbackExporter(nil), otelsetup.WithJournal(dir),
		otelsetup.WithBatchOptions(sdktrace.WithBatchTimeout(time.Millisecond), sdktrace.WithMaxExportBatchSize(8), sdktrace.WithBlocking()))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
			for i := range 500 {
				_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: fmt.Sprint(g, "-", i)})
				req.End(nil)
			}
		}()
	}
	wg.Wait()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exp.overlap.Load() != 0 {
		t.Errorf("%d exports overlapped", exp.overlap.Load())
	}
	seen := map[trace.SpanID]int{}
	for _, s := range exp.kept.GetSpans() {
		seen[s.SpanContext.SpanID()]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("span %s exported %d times", id, n)
		}
	}
	if st := tel.ExportStats(); len(seen) != 2000+len(inFlight) || st.Recovered != uint64(len(inFlight)) || st.Exported != 2000 {
		t.Errorf("%d spans exported, ExportStats %+v; want 2000 of its own and %d recovered", len(seen), st, len(inFlight))
	}
}

// serialOnly is an exporter that counts calls that overlap.
type serialOnly struct {
	kept    keptExporter
	busy    atomic.Bool
	overlap atomic.Int64
}

func (s *serialOnly) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	if s.busy.Swap(true) {
		s.overlap.Add(1)
	}
	defer s.busy.Store(false)
	time.Sleep(100 * time.Microsecond) // an export takes a while
	return s.kept.ExportSpans(ctx, ss)
}
func (*serialOnly) Shutdown(context.Context) error { return nil }

// TestRecoveryWaitsForADyingProcess: an engine restarts while the old
// process still holds its journal's lock (stopped, as one still dying
// is); its journal is left while it lives, and recovered once it has died,
// without another restart.
func TestRecoveryWaitsForADyingProcess(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestJournalChild$")
	cmd.Env = append(os.Environ(), journalChildEnv+"=kill", "OTELOMNI_JOURNAL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inFlight := map[string]bool{}
	after := false
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "R" {
		if line := sc.Text(); line == "F" {
			after = true
		} else if after && strings.HasPrefix(line, "S ") {
			inFlight[line[2:]] = true
		}
	}
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	exp := newKept()
	tel := recoverWith(t, dir, exp)
	if st := tel.ExportStats(); st.Recovered != 0 {
		t.Fatalf("%d spans recovered from a journal whose process lives", st.Recovered)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// The recovery looks again after a second; the test waits as long as
	// it takes, bounded by its own deadline.
	for tel.ExportStats().Recovered < uint64(len(inFlight)) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(exp.GetSpans()); n != len(inFlight) {
		t.Errorf("%d spans recovered, want %d", n, len(inFlight))
	}
}

// TestARestartCountsTheSpansItRefuses: of a dead engine's journal, the
// restart exports the spans OTLP carries and refuses, and counts, the
// ones whose times it cannot carry, as the live path does.
func TestARestartCountsTheSpansItRefuses(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	_, inFlight, _ := journalChild(t, "times", dir)
	exp := newKept()
	tel := recoverWith(t, dir, exp)
	st := tel.ExportStats()
	if n := len(exp.GetSpans()); n != 4 || len(inFlight) != 6 {
		t.Errorf("%d spans exported of the %d journalled, want the 4 OTLP carries", n, len(inFlight))
	}
	if st.Recovered != 4 || st.RecoveredRefused != 2 || st.RecoveredRejected != 0 || st.RecoveredFailed != 0 {
		t.Errorf("ExportStats %+v, want 4 recovered and 2 refused", st)
	}
	if files := journals(t, dir); len(files) != 1 {
		t.Errorf("journal files after the recovery: %v, want this process's only", files)
	}
}
