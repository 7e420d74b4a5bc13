// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// The kill test's children: OTELSETUP_KILL_CHILD names the directory,
// OTELSETUP_KILL_MODE what the child does there until it is killed.
const (
	killChildEnv = "OTELSETUP_KILL_CHILD"
	killModeEnv  = "OTELSETUP_KILL_MODE"
)

// slowExporter accepts every batch after a moment, so that a kill often
// lands in an export.
type slowExporter struct{}

func (slowExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	time.Sleep(200 * time.Microsecond)
	return nil
}
func (slowExporter) Shutdown(context.Context) error { return nil }

// TestJournalKillChild is a child of TestKillsAtRandomPointsOfSetupLeaveNothingBehind:
// an engine that starts (Setup, which recovers its dead neighbours'
// journals), serves requests and stops, cleanly or not, over and over;
// or a recovery (otelsetup.Recover, what omnitrace recover runs) over and
// over.
func TestJournalKillChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("run by the kill test as a child")
	}
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	ctx := context.Background()
	if os.Getenv(killModeEnv) == "recover" {
		for range 1000 {
			if _, err := otelsetup.Recover(ctx, dir, slowExporter{}); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for i := range 10 {
		tel, err := otelsetup.Setup(ctx, otelsetup.WithSpanExporter(slowExporter{}), otelsetup.WithoutGlobal(),
			otelsetup.WithFallbackExporter(nil), otelsetup.WithJournal(dir),
			otelsetup.WithBatchOptions(sdktrace.WithBatchTimeout(time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
		for r := range 20 {
			_, req := in.Start(ctx, otelomni.RequestInfo{ID: fmt.Sprint(i, "-", r), Model: "m"})
			p := req.StartPhase(ctx, spans.Preprocess)
			p.End(nil)
			if r%3 != 0 {
				req.End(nil)
			}
		}
		if i%2 == 0 {
			_ = tel.Shutdown(ctx)
		}
	}
	select {}
}

// TestKillsAtRandomPointsOfSetupLeaveNothingBehind kills engines and
// recoveries with SIGKILL after a random short delay, hundreds of times,
// one to three at once on one directory: a kill lands in Setup (its
// journal being made, its recovery of the dead ones running), in a
// request's spans, in an export, in a Shutdown, or in otelsetup.Recover.
// A last Recover then leaves the directory empty, with nothing
// unreadable, corrupt or held.
func TestKillsAtRandomPointsOfSetupLeaveNothingBehind(t *testing.T) {
	clearOTelEnv(t)
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	kills := 0
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	dir := t.TempDir()
	for round := range rounds {
		cmds := make([]*exec.Cmd, 1+rng.IntN(3))
		var stderr []*strings.Builder
		for i := range cmds {
			mode := "engine"
			if rng.IntN(4) == 0 {
				mode = "recover"
			}
			size := "2" // most rounds: a small journal, so that many are made
			if rng.IntN(5) == 0 {
				size = "64"
			}
			cmd := exec.Command(os.Args[0], "-test.run", "^TestJournalKillChild$")
			cmd.Env = []string{killChildEnv + "=" + dir, killModeEnv + "=" + mode, "OTELOMNI_JOURNAL_SIZE_MIB=" + size, "PATH=" + os.Getenv("PATH")}
			b := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = b, b
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i], stderr = cmd, append(stderr, b)
		}
		time.Sleep(time.Duration(rng.IntN(60_000)) * time.Microsecond)
		kills += len(cmds)
		for i, cmd := range cmds {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
				t.Fatalf("round %d: a child failed: %v\n%s", round, err, stderr[i])
			}
		}
	}
	rep, err := otelsetup.Recover(context.Background(), dir, nilExporter{})
	if err != nil || rep.Unreadable != 0 || rep.Corrupt != 0 || rep.Live != 0 || rep.Failed != 0 {
		t.Errorf("the last Recover: %+v, %v", rep, err)
	}
	left, _ := os.ReadDir(dir)
	for _, e := range left[:min(len(left), 10)] {
		t.Errorf("left after %d rounds of kills and a recovery: %s", rounds, e.Name())
	}
	t.Logf("%d rounds, %d kills; the last Recover: %+v", rounds, kills, rep)
}
