// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

func TestCollectorBoundsAndSettles(t *testing.T) {
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	type step struct {
		id       string
		finishes bool
		once     bool
	}
	cases := []struct {
		name             string
		settle, max      int
		steps            []step
		handed           string // ids handed on before the end, in order
		late, dropped    int
		handedAfterFlush string
	}{
		{"a finished request waits for settle more records", 2, 10,
			[]step{{"a", true, true}, {"b", false, false}, {"b", false, false}}, "a", 0, 0, "a b"},
		{"beyond the bound, the oldest unfinished request is dropped", 100, 2,
			[]step{{"a", false, false}, {"b", false, false}, {"c", false, false}}, "", 0, 1, "b c"},
		{"beyond the bound, the oldest finished request is handed on", 100, 2,
			[]step{{"a", true, true}, {"b", false, false}, {"c", false, false}}, "a", 0, 0, "a b c"},
		{"a record after its request was handed on is late", 0, 10,
			[]step{{"a", true, true}, {"a", false, false}}, "a", 1, 0, "a"},
		{"an [OmniTiming] line of a handed-on id begins a new request", 0, 10,
			[]step{{"a", true, true}, {"a", true, true}}, "a a", 0, 0, "a a"},
		{"a second [OmniTiming] line of a held id begins a new request", 100, 10,
			[]step{{"a", true, true}, {"a", true, true}}, "a", 0, 0, "a a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var handed []string
			coll := newCollector(c.settle, c.max, func(b *forms.Builder) { handed = append(handed, b.R.ID) })
			for i, s := range c.steps {
				coll.add(s.id, "log", at, int64(i), s.once, func(b *forms.Builder) {
					if s.finishes {
						b.Complete = true
					}
					b.Timed = b.Timed || s.once
				})
			}
			if got := fmt.Sprint(handed); got != fmt.Sprint(splitIDs(c.handed)) {
				t.Errorf("handed on %v, want %v", got, c.handed)
			}
			coll.flush()
			if got := fmt.Sprint(handed); got != fmt.Sprint(splitIDs(c.handedAfterFlush)) {
				t.Errorf("after the end, handed on %v, want %v", got, c.handedAfterFlush)
			}
			if coll.late != c.late || coll.dropped != c.dropped {
				t.Errorf("late %d dropped %d, want %d %d", coll.late, coll.dropped, c.late, c.dropped)
			}
		})
	}
}

func splitIDs(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// TestCheckpointNamesTheOldestHeldRecord: a restart must read again from
// the first record of the oldest request still held.
func TestCheckpointNamesTheOldestHeldRecord(t *testing.T) {
	at := time.Now()
	coll := newCollector(100, 10, func(*forms.Builder) {})
	coll.add("a", "log", at, 10, false, func(*forms.Builder) {})
	coll.add("b", "log", at, 20, false, func(*forms.Builder) {})
	coll.add("a", "log", at, 30, false, func(*forms.Builder) {})
	if off, _ := coll.checkpoint(40, 0, 40, 0); off != 10 {
		t.Errorf("checkpoint at %d, want 10", off)
	}
	if off, _ := coll.checkpoint(5, 0, 40, 0); off != 5 {
		t.Errorf("with a record open from 5, checkpoint at %d, want 5", off)
	}
	coll.flush()
	off, _ := coll.checkpoint(40, 0, 40, 0)
	done := coll.remembered()
	if off != 40 || fmt.Sprint(done) != "[{a 10 30 1} {b 20 20 1}]" {
		t.Errorf("with nothing held, checkpoint at %d (done %v), want 40, and a and b with where their records lie", off, done)
	}
	// Every request remembered is named with where its records lie, so
	// that a restart skips exactly those records, and remembers them on.
	coll.add("c", "log", at, 50, false, func(*forms.Builder) {})
	coll.add("d", "log", at, 60, false, func(b *forms.Builder) { b.Complete = true })
	coll.flush()
	coll.add("e", "log", at, 70, false, func(*forms.Builder) {})
	off, _ = coll.checkpoint(80, 0, 80, 0)
	done = coll.remembered()
	if off != 70 || fmt.Sprint(done) != "[{a 10 30 1} {b 20 20 1} {c 50 50 1} {d 60 60 1}]" {
		t.Errorf("checkpoint at %d, done %v: want 70 and a, b, c, d", off, done)
	}
	if off, _ = coll.checkpoint(55, 0, 80, 0); off != 55 {
		t.Errorf("checkpoint at %d, want 55", off)
	}
}

// TestAForgottenRequestNeverPinsTheCheckpoint: beyond the requests
// remembered, the oldest forgotten one's records must not lie after the
// checkpoint, or a restart would send it again: a held request that pins
// the checkpoint before them is handed on (or dropped) first.
func TestAForgottenRequestNeverPinsTheCheckpoint(t *testing.T) {
	at := time.Now()
	var handed []string
	coll := newCollector(0, 1<<20, func(b *forms.Builder) { handed = append(handed, b.R.ID) })
	coll.add("old", "log", at, 0, false, func(*forms.Builder) {}) // unfinished, held
	for i := range recentExported + 10 {
		coll.add(fmt.Sprint("r", i), "log", at, int64(10+i), false, func(b *forms.Builder) { b.Complete = true })
	}
	off, _ := coll.checkpoint(1<<40, 0, 1<<40, 0)
	done := coll.remembered()
	if _, held := coll.pending["old"]; held || coll.dropped != 1 {
		t.Errorf("the request pinning the checkpoint is still held (dropped %d)", coll.dropped)
	}
	if off != 1<<40 || len(done) != recentExported {
		t.Errorf("checkpoint at %d naming %d requests, want past every record, and the last %d", off, len(done), recentExported)
	}
}

// TestAReusedIDIsNotTakenForTheRequestExportedBeforeARestart: after a
// restart, the records read again of a request exported before it are
// skipped, and those of a new request reusing its id are not.
func TestAReusedIDIsNotTakenForTheRequestExportedBeforeARestart(t *testing.T) {
	at := time.Now()
	var handed []int
	coll := newCollector(0, 100, func(b *forms.Builder) { handed = append(handed, b.Line) })
	coll.markDone([]Done{{Key: "0", First: 10, Last: 20}}, 100)
	for _, off := range []int64{10, 20, 50, 60} {
		coll.line = int(off)
		coll.add("0", "log", at, off, off == 10 || off == 50, func(b *forms.Builder) { b.Complete = true })
	}
	coll.flush()
	if fmt.Sprint(handed) != "[50]" {
		t.Errorf("handed on requests first read at lines %v, want the new one at 50 only", handed)
	}
}

// TestHeldRequestsAreBoundedInBytes: unfinished requests that each keep
// the most attribute bytes a request may are held only up to the byte
// bound, whatever -max-pending allows; the oldest beyond it are dropped
// and counted.
func TestHeldRequestsAreBoundedInBytes(t *testing.T) {
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	coll := newCollector(0, 1<<20, func(*forms.Builder) {})
	big := literal.Value{Kind: literal.String, Str: strings.Repeat("v", forms.MaxValueBytes)}
	n := 2 * maxHeldBytes / (forms.MaxExtras * forms.MaxValueBytes)
	for i := range n {
		coll.add(fmt.Sprint("r", i), "log", at, int64(i), false, func(b *forms.Builder) {
			var kv []attribute.KeyValue
			for k := 0; k < forms.MaxExtras; k++ {
				kv = b.AddExtra(kv, &b.R.DroppedKeys, fmt.Sprint("key", k), &big)
			}
			b.R.Extra = kv
		})
		if coll.heldBytes > maxHeldBytes {
			t.Fatalf("after %d requests, %d bytes held, beyond %d", i+1, coll.heldBytes, maxHeldBytes)
		}
	}
	if coll.dropped == 0 || len(coll.pending)+coll.dropped != n {
		t.Errorf("%d held, %d dropped of %d", len(coll.pending), coll.dropped, n)
	}
}

// TestARotatedRequestIsRememberedByItsNewRecords: a request begun before a
// rotation and handed on at the stop is remembered by its records in the
// new file, the only ones a restart reads again.
func TestARotatedRequestIsRememberedByItsNewRecords(t *testing.T) {
	at := time.Now()
	coll := newCollector(100, 100, func(*forms.Builder) {})
	coll.add("a", "log", at, 500, false, func(*forms.Builder) {})
	coll.rebase()
	coll.add("a", "log", at, 30, false, func(*forms.Builder) {})
	coll.add("a", "log", at, 40, false, func(*forms.Builder) {})
	coll.stop()
	if done := coll.remembered(); fmt.Sprint(done) != "[{a 30 40 1}]" {
		t.Errorf("remembered %v, want a by its records in the new file, 30 to 40", done)
	}
}
