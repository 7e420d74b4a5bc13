// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bufio"
	"context"
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

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otherChildren are the child modes of the tests of what a death leaves
// in the directory (see TestMain).
var otherChildren = map[string]func(){
	"open":  openChild,
	"churn": churnChild,
}

// childNamed makes a child prepare its journals under a name, as where the
// file system cannot make a file without one.
const childNamed = "JOURNAL_CHILD_NAMED"

func childOptions() []Option {
	opts := []Option{WithSize(minSize), WithHeartbeat(minInterval)}
	if os.Getenv(childNamed) == "1" {
		opts = append(opts, withNamedTemp())
	}
	return opts
}

// openChild opens a journal and says P once the file is allocated, before
// it is named, and waits there to be killed.
func openChild() {
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	opts := append(childOptions(), withPrepared(func(*os.File) {
		_, _ = os.Stdout.WriteString("P\n")
		select {}
	}))
	_, err := Open(os.Getenv(childDir), opts...)
	panic(err)
}

// churnChild does, over and over until it is killed, all a process does
// with journals: it opens one, recovers the dead ones beside it, journals
// spans through a batcher that confirms them, and closes it or leaves it
// open. The parent kills it at a random moment.
func churnChild() {
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	dir := os.Getenv(childDir)
	seed, _ := strconv.ParseUint(os.Getenv(childSeed), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 3))
	ctx := context.Background()
	for range 20 {
		j, err := Open(dir, childOptions()...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "Open:", err)
			os.Exit(4)
		}
		if _, err := Recover(ctx, dir, &memExporter{}); err != nil {
			fmt.Fprintln(os.Stderr, "Recover:", err)
			os.Exit(4)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()),
			sdktrace.WithBatcher(j.WrapExporter(&memExporter{}), sdktrace.WithBatchTimeout(time.Millisecond)))
		open := spans(tp.Tracer("churn"), "open", rng.IntN(50))
		endAll(spans(tp.Tracer("churn"), "ended", rng.IntN(200)))
		if rng.IntN(2) == 0 {
			endAll(open)
			_ = tp.Shutdown(ctx)
			_ = j.Close()
		}
	}
	select {}
}

// startChild starts a child of mode on dir.
func startChild(t *testing.T, mode, dir string, seed uint64, named bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childMode+"="+mode, childDir+"="+dir, childSeed+"="+strconv.FormatUint(seed, 10))
	if named {
		cmd.Env = append(cmd.Env, childNamed+"=1")
	}
	return cmd
}

// A process killed in Open, its file allocated and not yet named, leaves
// nothing where the file is made without a name, and a file the next
// Recover removes (counted in Unfinished) where it is made under a name.
func TestADeathInOpenLeavesNothingRecoveryKeeps(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			dir := t.TempDir()
			cmd := startChild(t, "open", dir, 0, named)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			if !sc.Scan() || sc.Text() != "P" {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the child did not reach its allocated file: %s", stderr.String())
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			left, _ := os.ReadDir(dir)
			if !named && len(left) != 0 {
				t.Errorf("a death in Open left %d files", len(left))
			}
			if named && (len(left) != 1 || !isTempName(left[0].Name())) {
				t.Fatalf("a death in Open left %v, want its file being prepared", left)
			}
			rep, err := Recover(context.Background(), dir, &memExporter{})
			if err != nil || rep.Unfinished != len(left) || rep.Files != 0 || rep.Unreadable != 0 {
				t.Errorf("Recover: %+v, %v", rep, err)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("%d files left after Recover", len(left))
			}
		})
	}
}

// The file a live process is preparing its journal in is left alone:
// Recover never takes a locked file.
func TestAFileBeingPreparedIsLeftAlone(t *testing.T) {
	dir := t.TempDir()
	held := make(chan struct{})
	release := make(chan struct{})
	var j *Journal
	var err error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		j, err = Open(dir, WithSize(minSize), withNamedTemp(), withPrepared(func(*os.File) {
			close(held)
			<-release
		}))
	}()
	<-held
	rep, rerr := Recover(context.Background(), dir, &memExporter{})
	if rerr != nil || rep.Live != 1 || rep.Unfinished != 0 {
		t.Errorf("Recover beside a journal being made: %+v, %v", rep, rerr)
	}
	close(release)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left after a clean Close", len(left))
	}
}

// A named file its process has created and not yet locked looks like a
// dead process's; Recover leaves it (counted live) while its process
// holds the directory's lock, and the process's Open succeeds.
func TestAFileNotYetLockedIsNotTakenForADeadOnes(t *testing.T) {
	dir := t.TempDir()
	created, release := make(chan struct{}), make(chan struct{})
	var j *Journal
	var err error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		j, err = Open(dir, WithSize(minSize), withNamedTemp(), withCreated(func() {
			close(created)
			<-release
		}))
	}()
	<-created
	rep, rerr := Recover(context.Background(), dir, &memExporter{})
	if rerr != nil || rep.Live != 1 || rep.Unfinished != 0 {
		t.Errorf("Recover beside a file created and not yet locked: %+v, %v", rep, rerr)
	}
	close(release)
	wg.Wait()
	if err != nil {
		t.Fatalf("Open, after a Recover beside it: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left after a clean Close", len(left))
	}
}

// TestKillsAtRandomPointsLeaveNothingBehind kills processes that open
// journals, write spans, recover their dead neighbours' journals and close
// their own, with SIGKILL after a random short delay, hundreds of times,
// one or several at once, with files made with and without a name: each
// kill lands in Open, in a write, in a recovery, in Close or between them.
// A last Recover then leaves the directory empty, with nothing unreadable
// or corrupt.
func TestKillsAtRandomPointsLeaveNothingBehind(t *testing.T) {
	rounds := 300
	if raceEnabled || testing.Short() {
		rounds = 60
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	dir := t.TempDir()
	for round := range rounds {
		n := 1 + rng.IntN(3) // racing processes
		cmds := make([]*exec.Cmd, n)
		var stderr []*strings.Builder
		for i := range cmds {
			cmds[i] = startChild(t, "churn", dir, rng.Uint64(), rng.IntN(2) == 0)
			b := &strings.Builder{}
			cmds[i].Stderr = b
			stderr = append(stderr, b)
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		for i, cmd := range cmds {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
				t.Fatalf("round %d: a child failed: %v\n%s", round, err, stderr[i])
			}
		}
	}
	rep, err := Recover(context.Background(), dir, &memExporter{})
	if err != nil || rep.Unreadable != 0 || rep.Corrupt != 0 || rep.Live != 0 {
		t.Errorf("the last Recover: %+v, %v", rep, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		var names []string
		for _, e := range left[:min(len(left), 10)] {
			names = append(names, e.Name())
		}
		t.Errorf("%d files left after %d rounds of kills and a recovery: %v ...", len(left), rounds, names)
	}
	t.Logf("%d rounds; the last Recover: %+v", rounds, rep)
}

// TestOpenRacesRecover: journals opened and closed (with and without a
// name while prepared) while Recover runs over the same directory in a
// loop: every Open succeeds, Recover never takes a file being made, and
// the directory ends empty.
func TestOpenRacesRecover(t *testing.T) {
	rounds := 1000
	if raceEnabled || testing.Short() {
		rounds = 200
	}
	dir := t.TempDir()
	done := make(chan struct{})
	var openErr error
	go func() {
		defer close(done)
		for i := range rounds {
			opts := []Option{WithSize(minSize)}
			if i%2 == 0 {
				opts = append(opts, withNamedTemp())
			}
			j, err := Open(dir, opts...)
			if err != nil {
				openErr = err
				return
			}
			if err := j.Close(); err != nil {
				openErr = err
				return
			}
		}
	}()
	passes := 0
	for running := true; running; passes++ {
		select {
		case <-done:
			running = false
		default:
		}
		rep, err := Recover(context.Background(), dir, &memExporter{})
		if err != nil || rep.Unreadable != 0 || rep.Unfinished != 0 || rep.Files != 0 {
			t.Fatalf("Recover beside journals being made: %+v, %v", rep, err)
		}
	}
	if openErr != nil {
		t.Fatal(openErr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left", len(left))
	}
	t.Logf("%d journals opened and closed beside %d recoveries", rounds, passes)
}

// TestHostileFilesNeverStopTheOthers: beside a dead process's journal, a
// directory holds files named like journals and like unfinished ones that
// are symbolic links (to a journal and to a file of the user's), a
// directory, FIFOs, an empty file and a sparse 100 GiB copy of a journal.
// Recover follows no link and waits on no FIFO: each is counted
// unreadable, named, and left in place; both journals are recovered and
// removed; what the links point to is untouched.
func TestHostileFilesNeverStopTheOthers(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	path := writeDead(t, dir, 5, 2)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	victim, target := filepath.Join(elsewhere, "precious"), filepath.Join(elsewhere, "a journal")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(victim, []byte("precious"), 0o600))
	must(os.WriteFile(target, img, 0o600))
	must(os.Symlink(target, filepath.Join(dir, "link"+suffix)))
	must(os.Symlink(victim, filepath.Join(dir, tempPrefix+"link"+tempSuffix)))
	must(os.Mkdir(filepath.Join(dir, "dir"+suffix), 0o700))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"+suffix), 0o600))
	must(syscall.Mkfifo(filepath.Join(dir, tempPrefix+"fifo"+tempSuffix), 0o600))
	must(os.WriteFile(filepath.Join(dir, "empty"+suffix), nil, 0o600))
	huge := filepath.Join(dir, "huge"+suffix)
	must(os.WriteFile(huge, img, 0o600))
	must(os.Truncate(huge, 100<<30))
	rep, err := Recover(context.Background(), dir, &memExporter{})
	if rep.Files != 2 || rep.Removed != 2 || rep.Ended != 10 || rep.Open != 4 || rep.Unreadable != 6 {
		t.Errorf("report %+v, want the journal and its huge copy recovered and 6 files unreadable", rep)
	}
	for _, name := range []string{"link" + suffix, tempPrefix + "link" + tempSuffix, "dir" + suffix, "fifo" + suffix, tempPrefix + "fifo" + tempSuffix, "empty" + suffix} {
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, name)) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
		if _, serr := os.Lstat(filepath.Join(dir, name)); serr != nil {
			t.Errorf("%s was not left in place: %v", name, serr)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("a link's target was written to: %q", b)
	}
	if b, _ := os.ReadFile(target); string(b) != string(img) {
		t.Error("a journal a link points to was changed")
	}
}
