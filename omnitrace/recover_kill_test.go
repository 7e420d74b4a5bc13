// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// recoverKillChildEnv names the arguments of a child that runs
// `omnitrace recover`, separated by newlines.
const recoverKillChildEnv = "OMNITRACE_RECOVER_KILL_CHILD"

// TestRecoverKillChild runs `omnitrace recover` as a child of
// TestKillsAtRandomPointsOfRecoverLeaveNothingBehind.
func TestRecoverKillChild(t *testing.T) {
	args := os.Getenv(recoverKillChildEnv)
	if args == "" {
		t.Skip("run by the kill test as a child")
	}
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	var out, errb bytes.Buffer
	run(context.Background(), strings.Split(args, "\n"), strings.NewReader(""), &out, &errb)
}

// TestKillsAtRandomPointsOfRecoverLeaveNothingBehind kills `omnitrace
// recover` with SIGKILL after a random short delay, over and over, as it
// reads a dead engine's journal of thousands of spans and sends them to a
// collector or writes them to a file. A last recover then leaves the
// directory empty, and every span the engine journalled arrived somewhere
// at least once.
func TestKillsAtRandomPointsOfRecoverLeaveNothingBehind(t *testing.T) {
	clearEnv(t)
	rounds := 200
	if testing.Short() {
		rounds = 15
	}
	const requests = 1000 // of three spans each
	dir := t.TempDir()
	c := newFakeCollector(t, 0)
	outs := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 6))
	engines, cut := 0, 0
	for round := range rounds {
		if left, _ := os.ReadDir(dir); len(left) == 0 {
			// The last recover finished: another engine dies.
			killedEngine(t, dir, recoverChildRequests+"=1000")
			engines++
		} else if round > 0 {
			cut++
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRecoverKillChild$")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var args []string
		if rng.IntN(2) == 0 {
			args = []string{"recover", "-out", filepath.Join(outs, fmt.Sprint(round, ".json")), dir}
		} else {
			protocol := []string{"http/protobuf", "grpc"}[rng.IntN(2)]
			cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.endpoint(protocol), "OTEL_EXPORTER_OTLP_PROTOCOL="+protocol)
			args = []string{"recover", dir}
		}
		cmd.Env = append(cmd.Env, recoverKillChildEnv+"="+strings.Join(args, "\n"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(80_000)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
			t.Fatalf("round %d: the recover failed: %v\n%s", round, err, stderr.String())
		}
	}
	last := filepath.Join(outs, "last.json")
	if code, stdout, stderr := runCmd(t, "", "recover", "-out", last, dir); code != recoverOK {
		t.Errorf("the last recover: exit %d\n%s%s", code, stdout, stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left in the journal directory after %d killed recovers and one that finished", len(left), rounds)
	}
	seen := map[pcommon.SpanID]bool{}
	add := func(tds []ptrace.Traces) {
		for _, td := range tds {
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						seen[s.SpanID()] = true
					}
				}
			}
		}
	}
	add(c.received())
	files, _ := filepath.Glob(filepath.Join(outs, "*.json"))
	for _, f := range files {
		add(readKilledOut(t, f))
	}
	if len(seen) != 3*requests*engines {
		t.Errorf("%d distinct spans arrived, want the %d the %d engines journalled", len(seen), 3*requests*engines, engines)
	}
	t.Logf("%d kills of recover, %d of them left the journal for the next; %d engines' journals, %d spans", rounds, cut, engines, len(seen))
}

// readKilledOut reads the -out file of a recover that may have been killed
// as it wrote: every line is OTLP/JSON but the last, which the kill may
// have cut short (that batch was not marked in the journal: it is sent
// again).
func readKilledOut(t *testing.T, path string) []ptrace.Traces {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	var out []ptrace.Traces
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			if i != len(lines)-1 || bytes.HasSuffix(line, []byte("\n")) {
				t.Errorf("%s: line %d of %d is not OTLP/JSON: %v", path, i+1, len(lines), err)
			}
			continue
		}
		out = append(out, td)
	}
	return out
}
