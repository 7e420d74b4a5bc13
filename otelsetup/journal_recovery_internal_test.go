// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

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

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/otelsetup/internal/journal"
)

// countingExporter counts the spans it accepts.
type countingExporter struct {
	mu    sync.Mutex
	spans int
}

func (e *countingExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans += len(ss)
	return nil
}

func (*countingExporter) Shutdown(context.Context) error { return nil }

func (e *countingExporter) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.spans
}

// clearEnv unsets the variables Setup reads, for this test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "OTELOMNI_") {
			t.Setenv(k, "")
			_ = os.Unsetenv(k)
		}
	}
}

// engineChild starts TestJournalChild (journal_test.go) in mode kill on
// dir and reads its lines until it is ready: it then waits, its journal
// locked, to be killed. It returns the process and the number of spans it
// started after its last confirmed export.
func engineChild(t *testing.T, dir string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestJournalChild$")
	cmd.Env = []string{"OTELSETUP_JOURNAL_CHILD=kill", "OTELOMNI_JOURNAL_DIR=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	inFlight, after := 0, false
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "R" {
		switch line := sc.Text(); {
		case line == "F":
			after = true
		case after && strings.HasPrefix(line, "S "):
			inFlight++
		}
	}
	if inFlight == 0 {
		t.Fatal("the child engine started nothing after its last confirmed export")
	}
	return cmd, inFlight
}

// kill kills the child and waits until it is gone, its locks released.
func kill(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// logged collects what is logged through otel.Handle during the test.
func logged(t *testing.T) func() []string {
	var mu sync.Mutex
	var msgs []string
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, err.Error())
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), msgs...)
	}
}

// TestARestartWhoseJournalCannotOpenStillRecovers: the restart's own
// journal cannot be made (the disk is full: the dead engine's journal
// took it); it is off, said once, and the dead engine's spans are
// recovered all the same.
func TestARestartWhoseJournalCannotOpenStillRecovers(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	child, inFlight := engineChild(t, dir)
	kill(child)
	prev := journalOpen
	journalOpen = func(dir string, _ ...journal.Option) (*journal.Journal, error) {
		return nil, fmt.Errorf("journal: cannot allocate 67112960 bytes for a journal in %s: %w", dir, syscall.ENOSPC)
	}
	t.Cleanup(func() { journalOpen = prev })
	msgs := logged(t)
	exp := &countingExporter{}
	tel, err := Setup(context.Background(), WithSpanExporter(exp), WithoutGlobal(), WithFallbackExporter(nil), WithJournal(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "this process's own")
	s.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := tel.ExportStats(); st.Recovered != uint64(inFlight) || st.Exported != 1 || exp.count() != inFlight+1 {
		t.Errorf("ExportStats %+v, %d spans exported; want the dead engine's %d recovered and this process's own", st, exp.count(), inFlight)
	}
	if m := msgs(); len(m) != 1 || !strings.Contains(m[0], "the crash journal is off") {
		t.Errorf("logged %q, want the journal's being off, once", m)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left in the journal directory", len(left))
	}
}

// TestAnUnreadableJournalStopsNoOtherRecovery: beside a journal this
// build cannot read, the journal of an engine that is still running when
// the restart starts, and dies after the first pass, is recovered at the
// next pass. The waits between passes are the test's: no test waits for
// seconds.
func TestAnUnreadableJournalStopsNoOtherRecovery(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "omni-1-000000000000.journal")
	if err := os.WriteFile(junk, []byte("OMNIJNL\x00 not a header"), 0o600); err != nil {
		t.Fatal(err)
	}
	child, inFlight := engineChild(t, dir)
	waits, released := make(chan time.Duration, len(recoverRetries)+1), make(chan time.Time)
	prev := recoverWait
	recoverWait = func(d time.Duration) <-chan time.Time {
		waits <- d
		return released
	}
	t.Cleanup(func() { recoverWait = prev })
	msgs := logged(t)
	exp := &countingExporter{}
	tel, err := Setup(context.Background(), WithSpanExporter(exp), WithoutGlobal(), WithFallbackExporter(nil), WithJournal(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	select {
	case <-waits:
	case <-tel.journal.done:
		t.Fatal("the recovery ended after its first pass, with a live engine's journal left to look at again")
	}
	if st := tel.ExportStats(); st.Recovered != 0 {
		t.Fatalf("%d spans recovered from the journal of a live engine", st.Recovered)
	}
	kill(child)
	close(released)
	<-tel.journal.done
	if st := tel.ExportStats(); st.Recovered != uint64(inFlight) || exp.count() != inFlight {
		t.Errorf("ExportStats %+v, %d spans exported; want the %d the engine left when it died", st, exp.count(), inFlight)
	}
	if _, err := os.Stat(junk); err != nil {
		t.Errorf("the unreadable journal was not left in place: %v", err)
	}
	found := false
	for _, m := range msgs() {
		found = found || strings.Contains(m, junk)
	}
	if !found {
		t.Errorf("logged %q, nothing naming the unreadable journal", msgs())
	}
}

// rejectingExporter takes every batch and rejects one span of each, as a
// collector's partial success answers (read into the export's answer, as
// the transports of the exporters Setup builds read it).
type rejectingExporter struct{}

func (rejectingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	if a := answerFrom(ctx); a != nil {
		a.accepted.Store(true)
		a.rejected.Store(1)
	}
	return fmt.Errorf("traces export: %w", errors.New("OTLP partial success: too old (1 spans rejected)"))
}
func (rejectingExporter) Shutdown(context.Context) error { return nil }

// TestRecoveryCountsAddUpWhileRead: ExportStats reads the recovery's
// counts while batches are exported, accepted, rejected in part, refused
// or failed: every read adds up to at most what was given, and never goes
// down; at the end they add up exactly. 100 000 batches.
func TestRecoveryCountsAddUpWhileRead(t *testing.T) {
	rounds := 100_000
	if testing.Short() {
		rounds = 10_000
	}
	exps := []sdktrace.SpanExporter{&countingExporter{}, rejectingExporter{}, &failingExporter{}}
	r := newRecoveryExporter(&rotating{exps: exps}, 64)
	good := tracetest.SpanStub{StartTime: time.Unix(100, 0), EndTime: time.Unix(101, 0)}.Snapshot()
	bad := tracetest.SpanStub{StartTime: time.Unix(100, 0), EndTime: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}.Snapshot()
	batch := []sdktrace.ReadOnlySpan{good, good, bad}
	done := make(chan struct{})
	var given atomic.Uint64
	go func() {
		defer close(done)
		for range rounds {
			given.Add(uint64(len(batch)))
			_ = r.ExportSpans(context.Background(), batch)
		}
	}()
	var last uint64
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		c := r.counts()
		sum := c.exported + c.rejected + c.refused + c.failed
		if sum < last || sum > given.Load() {
			t.Fatalf("counts %+v add up to %d: the last read %d, %d given", c, sum, last, given.Load())
		}
		last = sum
	}
	c := r.counts()
	if c.exported+c.rejected+c.refused+c.failed != uint64(3*rounds) || c.refused == 0 || c.rejected == 0 || c.failed == 0 {
		t.Errorf("counts %+v, want %d spans in all, some of each", c, 3*rounds)
	}
}

// failingExporter fails every batch.
type failingExporter struct{}

func (*failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("connection refused")
}
func (*failingExporter) Shutdown(context.Context) error { return nil }

// rotating sends each batch to the next of its exporters in turn.
type rotating struct {
	exps []sdktrace.SpanExporter
	i    int
}

func (r *rotating) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	r.i++
	return r.exps[r.i%len(r.exps)].ExportSpans(ctx, ss)
}
func (*rotating) Shutdown(context.Context) error { return nil }
