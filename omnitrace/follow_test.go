// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/input"
)

type seen struct {
	ids      []string
	problems int
}

func (s *seen) Request(r *forms.Request, _ time.Time) { s.ids = append(s.ids, r.ID) }
func (s *seen) Problem(int, error)                    { s.problems++ }

// timingLine is a vLLM log's [OmniTiming] line of request id, which
// finishes it.
func timingLine(id string) string {
	return "INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=" + id + " total=1.00s engine=1.00s stages=[0:1.00s]\n"
}

// TestFollowNeverReadsTheTailOfALongLineAsALine: a line too long to keep
// is dropped whole, however the reads cut it; what follows its end is
// read.
func TestFollowNeverReadsTheTailOfALongLineAsALine(t *testing.T) {
	for _, chunk := range []int{1000, 4096, 256 << 10, 4 << 20} {
		// The long line's tail, from where a read begins, is a whole log
		// line of its own.
		data := []byte(strings.Repeat("x", (maxLine/chunk+1)*chunk) + timingLine("INJECTED") + timingLine("after"))
		h := &seen{}
		in, err := input.NewInput(time.Now(), input.Options{}, h)
		if err != nil {
			t.Fatal(err)
		}
		longs := 0
		tl := &tail{in: in, skipFrom: -1, tooLong: func() { longs++ }}
		for rest := data; len(rest) > 0; {
			n := min(chunk, len(rest))
			tl.feed(rest[:n])
			if cp := tl.checkpoint(); cp.Next < 0 || cp.Next > tl.off {
				t.Fatalf("checkpoint at %d beyond what was read (%d)", cp.Next, tl.off)
			}
			rest = rest[n:]
		}
		in.End()
		if strings.Join(h.ids, " ") != "after" || longs != 1 || tl.off != int64(len(data)) {
			t.Errorf("reads of %d bytes: requests %q, %d long lines, offset %d of %d", chunk, h.ids, longs, tl.off, len(data))
		}
	}
}

// TestFollowTellsATruncationRefilledPastItsOffset: a file truncated and
// written again past the offset read between two looks is not the same
// file grown: its head tells, and it is read again from its start.
func TestFollowTellsATruncationRefilledPastItsOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.log")
	if err := os.WriteFile(path, []byte(timingLine("old")), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &seen{}
	in, err := input.NewInput(time.Now(), input.Options{Settle: -1}, h)
	if err != nil {
		t.Fatal(err)
	}
	tl := &tail{path: path, in: in, skipFrom: -1, tooLong: func() {}}
	if err := tl.open(); err != nil {
		t.Fatal(err)
	}
	defer tl.f.Close()
	if err := tl.drain(); err != nil {
		t.Fatal(err)
	}
	if rotated, err := tl.rotated(); err != nil || rotated {
		t.Fatalf("rotated %v, %v before any change", rotated, err)
	}
	// Copy-truncate, and the engine writes more than before, at once.
	if err := os.WriteFile(path, []byte(timingLine("new1")+timingLine("new2")), 0o600); err != nil {
		t.Fatal(err)
	}
	if rotated, err := tl.rotated(); err != nil || !rotated {
		t.Fatalf("rotated %v, %v: the truncation went unseen", rotated, err)
	}
	if err := tl.drain(); err != nil {
		t.Fatal(err)
	}
	in.End()
	if got := strings.Join(h.ids, " "); got != "old new1 new2" {
		t.Errorf("requests %q, want old, then the new file's two", got)
	}
}

// TestACheckpointIsUntrustedInput: a checkpoint file is read back as any
// input: values out of their range are refused with a clear error, never
// a panic or a huge allocation.
func TestACheckpointIsUntrustedInput(t *testing.T) {
	dir := t.TempDir()
	for _, body := range []string{
		`{"version":2,"offset":0,"next":0,"head":"x","head_len":9000000000000000000}`,
		`{"version":2,"offset":10,"next":10,"head":"x","head_len":-1}`,
		`{"version":2,"offset":10,"next":5}`,
		`{"version":2,"offset":10,"next":10,"line":-3}`,
		`{"version":3}`, ``, `{"version":2,"done":"no"}`,
	} {
		path := filepath.Join(dir, "cp.json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadCheckpoint(path); err == nil || !strings.Contains(err.Error(), "not one this version wrote") {
			t.Errorf("%s: %v, want it refused", body, err)
		}
	}
}

// TestACheckpointThatCannotBeSavedStopsBeforeReading: where the checkpoint
// cannot be written, -follow says so and reads nothing: it would export
// requests that a restart, without a checkpoint, exports again.
func TestACheckpointThatCannotBeSavedStopsBeforeReading(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	log, cp, out := filepath.Join(dir, "vllm.log"), filepath.Join(dir, "cp.json"), filepath.Join(dir, "out.json")
	appendTo(t, log, timingLine("x"))
	if err := os.Mkdir(cp+".tmp", 0o700); err != nil { // where the new checkpoint is written first
		t.Fatal(err)
	}
	f := startFollow(t, "-out", out, "-checkpoint", cp, "-settle", "0", log)
	<-f.done // it ends by itself
	if f.code != 1 || !strings.Contains(f.stderr, "cannot be saved") || !strings.Contains(f.stderr, "nothing was read") || !strings.Contains(f.stderr, "imported 0") {
		t.Errorf("exit %d:\n%s", f.code, f.stderr)
	}
	if got := requestCounts(readTraces(t, out)); len(got) != 0 {
		t.Errorf("exported %v", got)
	}
}

// TestAFailedCheckpointSaysWhatItImportedAndWhatItHeld: a checkpoint that
// cannot be saved once -follow has exported some requests, and holds
// another, ends it (exit 1), counting truthfully what it exported, what it
// held and did not export (a restart reads it again from the last
// checkpoint saved), and what it exported since that checkpoint.
func TestAFailedCheckpointSaysWhatItImportedAndWhatItHeld(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	log, cp, out := filepath.Join(dir, "vllm.log"), filepath.Join(dir, "cp.json"), filepath.Join(dir, "out.json")
	// x and y are finished; z's table came, its [OmniTiming] line not yet.
	appendTo(t, log, timingLine("x")+timingLine("y")+strings.Join([]string{
		"INFO 11-30 05:10:44 [stats.py:560] [StageRequestStats [request_id=z]]",
		"INFO 11-30 05:10:44 [stats.py:560] +-------------------+-------+",
		"INFO 11-30 05:10:44 [stats.py:560] | Field             |     0 |",
		"INFO 11-30 05:10:44 [stats.py:560] +-------------------+-------+",
		"INFO 11-30 05:10:44 [stats.py:560] | stage_gen_time_ms | 5.000 |",
		"INFO 11-30 05:10:44 [stats.py:560] +-------------------+-------+",
		""}, "\n"))
	f := startFollow(t, "-out", out, "-checkpoint", cp, "-settle", "0", "-idle", "1h", log)
	// Once a checkpoint names x and y as exported, saving fails.
	for {
		b, _ := os.ReadFile(cp)
		if strings.Contains(string(b), `"id":"x"`) && strings.Contains(string(b), `"id":"y"`) {
			break
		}
		select {
		case <-f.done:
			t.Fatalf("ended before its checkpoint named x and y:\n%s", f.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := os.Mkdir(cp+".tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	f.stop()
	if f.code != 1 || !strings.Contains(f.stderr, "cannot be saved") || !strings.Contains(f.stderr, "imported 2,") ||
		!strings.Contains(f.stderr, "requests held, not exported: 1; exported since the last checkpoint saved: 0") {
		t.Errorf("exit %d:\n%s", f.code, f.stderr)
	}
	if got := requestCounts(readTraces(t, out)); fmt.Sprint(got) != "map[x:1 y:1]" {
		t.Errorf("exported %v, want x and y", got)
	}
}
