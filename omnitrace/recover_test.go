// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

const (
	recoverChildEnv = "OMNITRACE_RECOVER_CHILD"
	// recoverChildRequests: how many requests the child engine makes (3
	// unless set), each of three spans.
	recoverChildRequests = "OMNITRACE_RECOVER_CHILD_REQUESTS"
)

// hung is a collector that never answers: nothing is confirmed.
type hung struct{}

func (hung) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	<-ctx.Done()
	return ctx.Err()
}
func (hung) Shutdown(context.Context) error { return nil }

// TestRecoverChildEngine is an engine, run as a child by the recover
// tests: it journals requests into the directory OMNITRACE_RECOVER_CHILD
// names, says R and waits to be killed.
func TestRecoverChildEngine(t *testing.T) {
	dir := os.Getenv(recoverChildEnv)
	if dir == "" {
		t.Skip("run by the recover tests as a child")
	}
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(),
		otelsetup.WithFallbackExporter(hung{}), otelsetup.WithJournal(dir), otelsetup.WithServiceName("killed-engine"))
	if err != nil {
		t.Fatal(err)
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	requests := 3
	if n, err := strconv.Atoi(os.Getenv(recoverChildRequests)); err == nil {
		requests = n
	}
	for i := range requests {
		_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: fmt.Sprint("r", i), Model: "m"})
		p := req.StartPhase(context.Background(), spans.Preprocess)
		p.End(nil)
		req.StartPhase(context.Background(), spans.Exec)
	}
	fmt.Println("R")
	select {}
}

// killedEngine runs TestRecoverChildEngine on dir and kills it once ready.
func killedEngine(t *testing.T, dir string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRecoverChildEngine$")
	cmd.Env = append([]string{recoverChildEnv + "=" + dir, "PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "R" {
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

func journalFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	return m
}

func TestRecoverExportsAKilledEnginesSpans(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	killedEngine(t, dir)
	if n := len(journalFiles(t, dir)); n != 1 {
		t.Fatalf("%d journal files after the kill, want 1", n)
	}
	out := filepath.Join(t.TempDir(), "recovered.json")
	code, stdout, stderr := runCmd(t, "", "recover", "-out", out, dir)
	if code != recoverOK {
		t.Fatalf("exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "recovered 9 spans to "+out+": 3 as they ended, 6 open at the death") ||
		!strings.Contains(stdout, "1 journal files read, 1 removed") || !strings.Contains(stdout, "left: 0 journals") {
		t.Errorf("output:\n%s", stdout)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, err := readSpans(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, s := range ss {
		if rec, _ := s.Bool(string(recoveredKey)); !rec || s.Service != "killed-engine" {
			t.Errorf("%s: omni.recovered %v, service %q", s.Name, rec, s.Service)
		}
		if s.Str(string(semconv.ErrorTypeKey)) == processDied {
			open++
		}
	}
	if len(ss) != 9 || open != 6 {
		t.Errorf("%d spans in the file, %d open at the death; want 9 and 6", len(ss), open)
	}
	if files := journalFiles(t, dir); len(files) != 0 {
		t.Errorf("journal files left: %v", files)
	}
	// Again: nothing left to send.
	code, stdout, _ = runCmd(t, "", "recover", "-out", filepath.Join(t.TempDir(), "again.json"), dir)
	if code != recoverOK || !strings.Contains(stdout, "recovered 0 spans") {
		t.Errorf("a second recover: exit %d\n%s", code, stdout)
	}
}

func TestRecoverLeavesLiveAndUnreadableJournals(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(),
		otelsetup.WithFallbackExporter(hung{}), otelsetup.WithJournal(dir), otelsetup.WithShutdownTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	out := filepath.Join(t.TempDir(), "out.json")
	code, stdout, _ := runCmd(t, "", "recover", "-out", out, dir)
	if code != recoverLive || !strings.Contains(stdout, "left: 1 journals of processes still running") {
		t.Errorf("with a live engine's journal: exit %d, want %d\n%s", code, recoverLive, stdout)
	}
	junk := filepath.Join(dir, "omni-1-000000000000.journal")
	if err := os.WriteFile(junk, []byte("OMNIJNL\x00 not a header"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "", "recover", "-out", out, dir)
	if code != recoverPartial || !strings.Contains(stdout, "1 unreadable files") || !strings.Contains(stderr, junk) {
		t.Errorf("with an unreadable journal: exit %d, want %d\n%s%s", code, recoverPartial, stdout, stderr)
	}
	if _, err := os.Stat(junk); err != nil {
		t.Errorf("the unreadable journal was not left in place: %v", err)
	}
}

func TestRecoverUsage(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	killedEngine(t, dir)
	file := filepath.Join(t.TempDir(), "f")
	_ = os.WriteFile(file, nil, 0o600)
	for _, args := range [][]string{{"recover"}, {"recover", dir, dir}, {"recover", file}, {"recover", "/nonexistent\xff"},
		{"recover", dir} /* no destination */} {
		code, _, stderr := runCmd(t, "", args...)
		if code != recoverUsage || !strings.Contains(stderr, "omnitrace recover:") {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, recoverUsage, stderr)
		}
	}
	if n := len(journalFiles(t, dir)); n != 1 {
		t.Errorf("a refused recover changed the journals: %d left, want 1", n)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")
	if code, _, stderr := runCmd(t, "", "recover", dir); code != recoverUsage || !strings.Contains(stderr, "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("a malformed endpoint: exit %d\n%s", code, stderr)
	}
}
