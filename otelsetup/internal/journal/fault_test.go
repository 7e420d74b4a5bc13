// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestOpenGivesAClearErrorWhereNoJournalCanBe(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	cases := []struct {
		name, dir string
		opts      []Option
		want      string
	}{
		{"a file, not a directory", file, nil, "a-file"},
		{"under a file", filepath.Join(file, "sub"), nil, "a-file"},
		{"a file system that takes no files", "/proc", nil, "cannot create a file in /proc"},
		{"no directory", "", nil, "no directory"},
		{"a full disk", full, []Option{withAllocate(func(uintptr, int64) error { return syscall.ENOSPC })}, "no space left"},
		{"size too small", t.TempDir(), []Option{WithSize(minSize - 1)}, "size"},
		{"size too large", t.TempDir(), []Option{WithSize(maxSize + 1)}, "size"},
		{"heartbeat of 0", t.TempDir(), []Option{WithHeartbeat(0)}, "heartbeat"},
		{"negative sync", t.TempDir(), []Option{WithSyncInterval(-time.Second)}, "sync"},
		{"value limit too large", t.TempDir(), []Option{WithSize(minSize), WithValueLimit(1 << 20)}, "value limit"},
		{"value limit too small", t.TempDir(), []Option{WithValueLimit(1)}, "value limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := Open(c.dir, c.opts...)
			if err == nil {
				_ = j.Close()
				t.Fatalf("Open(%q) worked", c.dir)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
	if left, _ := os.ReadDir(full); len(left) != 0 {
		t.Errorf("a failed Open left %d files behind", len(left))
	}
	if _, err := Open(full, withAllocate(func(uintptr, int64) error { return syscall.ENOSPC })); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("error %v does not wrap ENOSPC", err)
	}
}

// Two processes given one directory have a file each; Recover leaves a
// live one alone, the caller's own included.
func TestTwoJournalsInOneDirectoryKeepApart(t *testing.T) {
	dir := t.TempDir()
	a, b := openT(t, dir), openT(t, dir)
	if a.Path() == b.Path() {
		t.Fatal("two journals share a file")
	}
	tpa := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(a.SpanProcessor()))
	tpb := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.SpanProcessor()))
	endAll(spans(tpa.Tracer("a"), "a", 100))
	endAll(spans(tpb.Tracer("b"), "b", 50))
	if rep, exp := recoverT(t, dir); rep.Live != 2 || len(exp.stubs()) != 0 {
		t.Fatalf("Recover with both alive: %+v, %d spans", rep, len(exp.stubs()))
	}
	a.die()
	rep, exp := recoverT(t, dir)
	if rep.Live != 1 || rep.Ended != 100 {
		t.Fatalf("Recover with a dead: %+v", rep)
	}
	for _, s := range exp.stubs() {
		if !strings.HasPrefix(s.Name, "a-") {
			t.Errorf("recovered %s from the live journal", s.Name)
		}
	}
	endAll(spans(tpb.Tracer("b"), "b2", 25)) // b still works
	b.die()
	if rep, _ := recoverT(t, dir); rep.Ended != 75 || rep.Live != 0 {
		t.Errorf("Recover with b dead: %+v", rep)
	}
}

// die leaves a journal as a dead process would; writeDead returns the
// path of such a journal holding n ended spans and m open ones.
func writeDead(t *testing.T, dir string, n, m int, opts ...Option) string {
	t.Helper()
	j := openT(t, dir, opts...)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()))
	endAll(spans(tp.Tracer("t"), "ended", n))
	_ = spans(tp.Tracer("t"), "open", m)
	j.die()
	return j.Path()
}

func TestFilesThisBuildCannotReadAreLeftInPlace(t *testing.T) {
	patch := func(off int, v uint32, fixCRC bool) func([]byte) {
		return func(b []byte) {
			binary.LittleEndian.PutUint32(b[off:], v)
			if fixCRC {
				binary.LittleEndian.PutUint32(b[hdrCRC:], crc32c(b[:hdrCRC]))
			}
		}
	}
	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   string
	}{
		{"another version", func(b []byte) []byte { patch(hdrVersion, 2, true)(b); return b }, "format version 2"},
		{"a damaged header", func(b []byte) []byte { b[hdrPID] ^= 1; return b }, "damaged header"},
		{"an impossible layout", func(b []byte) []byte { patch(hdrSegSize, 3, true)(b); return b }, "cannot lay out"},
		{"not a journal", func(b []byte) []byte { copy(b, "hello"); return b }, "not a journal"},
		{"empty", func([]byte) []byte { return nil }, "not a journal"},
		{"cut inside the header", func(b []byte) []byte { return b[:40] }, "not a journal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeDead(t, dir, 3, 1)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			exp := &memExporter{}
			rep, err := Recover(context.Background(), dir, exp)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "left in place") {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
			if rep.Unreadable != 1 || len(exp.stubs()) != 0 {
				t.Errorf("report %+v", rep)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the file was not left in place: %v", err)
			}
		})
	}
}

// A journal cut at any length recovers what lies before the cut, skips
// the rest, and never panics.
func TestATruncatedJournalRecoversWhatItHolds(t *testing.T) {
	src := t.TempDir()
	path := writeDead(t, src, 200, 20, WithSize(minSize))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := geometryFor(minSize)
	used := g.segOff(0) + 200*2*200 // past the records written
	var lengths []int
	for l := 0; l <= hdrClosed+16; l++ {
		lengths = append(lengths, l)
	}
	for l := hdrClosed + 16; l <= headerSize+64; l += 97 {
		lengths = append(lengths, l)
	}
	for l := g.defsOff(); l < g.defsOff()+512; l += 7 {
		lengths = append(lengths, l)
	}
	for l := g.segOff(0); l < used; l += 29 {
		lengths = append(lengths, l)
	}
	lengths = append(lengths, len(orig)-1, len(orig))
	prev := -1
	dir := t.TempDir()
	p := filepath.Join(dir, filepath.Base(path))
	for _, l := range lengths {
		if err := os.WriteFile(p, orig[:l], 0o600); err != nil {
			t.Fatal(err)
		}
		exp := &memExporter{}
		rep, err := Recover(context.Background(), dir, exp)
		n := len(exp.stubs())
		switch {
		case l < hdrClosed+8:
			if err == nil || rep.Unreadable != 1 {
				t.Fatalf("cut at %d: %+v %v, want unreadable", l, rep, err)
			}
		case err != nil:
			t.Fatalf("cut at %d: %v", l, err)
		case rep.Corrupt != 0:
			t.Fatalf("cut at %d: %+v", l, rep)
		case l >= g.segOff(0) && n < prev:
			t.Fatalf("cut at %d recovered %d spans, fewer than a shorter cut (%d)", l, n, prev)
		}
		byID(t, exp.stubs())
		if l >= g.segOff(0) {
			prev = n
		}
	}
	if prev != 220 {
		t.Errorf("the whole file recovered %d spans, want 220", prev)
	}
}

// A journal whose file is cut short under it (an operator's truncate, a
// file system that cannot back a page) faults on its next write: the
// journal stops, counts and logs it, and the engine's spans go on.
func TestAFileCutUnderTheJournalStopsItWithoutACrash(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	live := &memExporter{}
	tp, _ := provider(j, live)
	tr := tp.Tracer("t")
	endAll(spans(tr, "before", 10))
	if err := os.Truncate(j.Path(), 0); err != nil {
		t.Fatal(err)
	}
	endAll(spans(tr, "after", 100_000/geometryFor(DefaultSize).segCount)) // past the first page
	if st := j.Stats(); st.Faults != 1 {
		t.Fatalf("stats %+v: no fault counted", st)
	}
	endAll(spans(tr, "stopped", 10))
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(live.stubs()); n < 10+10 {
		t.Errorf("%d spans exported: the engine's spans stopped with the journal", n)
	}
	if err := j.Close(); err == nil || !strings.Contains(err.Error(), "fault") {
		t.Errorf("Close after a fault: %v", err)
	}
	if _, err := os.Stat(j.Path()); !os.IsNotExist(err) {
		t.Errorf("the stopped journal's file is left: %v", err)
	}
}
