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
	// A malformed endpoint is warned about and ignored: it names no
	// destination.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")
	code, _, stderr := runCmd(t, "", "recover", dir)
	if code != recoverUsage || !strings.Contains(stderr, "name where the spans go") {
		t.Errorf("a malformed endpoint alone: exit %d, want %d\n%s", code, recoverUsage, stderr)
	}
	checkWarned(t, "a malformed endpoint", recoverEnv.name, stderr, "OTEL_EXPORTER_OTLP_ENDPOINT", "", true)
	if n := len(journalFiles(t, dir)); n != 1 {
		t.Errorf("a refused recover changed the journals: %d left, want 1", n)
	}
}

// TestRecoverIgnoresWhatIsNotValid: a value recover reads that is not
// valid is warned about once and ignored, and the spans are recovered
// where the rest of the environment says: an endpoint with credentials
// and a value length limit out of range, to -out; an unknown exporter,
// as if unset.
func TestRecoverIgnoresWhatIsNotValid(t *testing.T) {
	for _, c := range []struct {
		env    map[string]string
		warned string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:s3cret@127.0.0.1:1"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "99999999999999999999999"}, "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer s3cret"}, "OTEL_EXPORTER_OTLP_HEADERS"},
	} {
		clearEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		dir := t.TempDir()
		killedEngine(t, dir)
		out := filepath.Join(t.TempDir(), "out.json")
		code, stdout, stderr := runCmd(t, "", "recover", "-out", out, dir)
		if code != recoverOK || strings.Contains(stdout, "recovered 0 spans") || len(journalFiles(t, dir)) != 0 {
			t.Errorf("%v: exit %d, want %d, every span recovered:\n%s%s", c.env, code, recoverOK, stdout, stderr)
		}
		checkWarned(t, fmt.Sprint(c.env), recoverEnv.name, stderr, c.warned, "", true)
	}
	// Every variable recover reads, not valid: warned about once, by
	// omnitrace, none left for otelsetup's exporter to warn about again.
	for _, v := range envVars {
		exporter := v.name == "OTEL_TRACES_EXPORTER" || strings.HasPrefix(v.name, "OTEL_EXPORTER_OTLP_")
		if !exporter && !strings.HasSuffix(v.name, "ATTRIBUTE_VALUE_LENGTH_LIMIT") {
			continue
		}
		for _, bad := range []string{"-1", " \t ", "99999999999999999999999"} {
			clearEnv(t)
			// To otelsetup's exporter, which reads every variable.
			args := []string{"recover", t.TempDir()}
			t.Setenv("OTEL_TRACES_EXPORTER", "console")
			if v.name == "OTEL_TRACES_EXPORTER" {
				args = []string{"recover", "-out", filepath.Join(t.TempDir(), "out.json"), t.TempDir()}
			}
			t.Setenv(v.name, bad)
			code, _, stderr := runCmd(t, "", args...)
			if code != recoverOK {
				t.Errorf("%s=%q: exit %d, want %d\n%s", v.name, bad, code, recoverOK, stderr)
			}
			checkWarned(t, fmt.Sprintf("%s=%q", v.name, bad), recoverEnv.name, stderr, v.name, "", true)
		}
	}
	// Not read by recover: not warned about.
	clearEnv(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "-1")
	dir := t.TempDir()
	killedEngine(t, dir)
	code, _, stderr := runCmd(t, "", "recover", "-out", filepath.Join(t.TempDir(), "out.json"), dir)
	if code != recoverOK || stderr != "" {
		t.Errorf("a variable recover does not read: exit %d\n%s", code, stderr)
	}
}
