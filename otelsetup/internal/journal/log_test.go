// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// However the exporter's confirmations come (in the order the spans
// ended, a little out of it as when spans end on several goroutines, or in
// any order; in batches of any size; with the spans of failed batches
// never confirmed), and however many ended spans wait in a shard (more
// than its log holds), a death leaves exactly the spans not confirmed.
func TestConfirmationsInAnyOrderLeaveExactlyTheUnconfirmed(t *testing.T) {
	const n = 6000 // about 190 a shard: more than a shard's log holds
	for _, order := range []string{"in order", "swapped", "shuffled"} {
		t.Run(order, func(t *testing.T) {
			dir := t.TempDir()
			j := openT(t, dir, WithHeartbeat(time.Hour))
			p := j.SpanProcessor()
			rng := rand.New(rand.NewPCG(uint64(len(order)), 7))
			spans := make([]fakeSpan, n)
			for i := range spans {
				spans[i] = newFakeSpan(uint64(i + 1))
				p.OnStart(context.Background(), spans[i])
				p.OnEnd(spans[i])
			}
			var exported []int
			failed := map[[8]byte]bool{}
			for i := range spans {
				if i%7 == 3 {
					failed[[8]byte(spans[i].SpanContext().SpanID())] = true
				} else {
					exported = append(exported, i)
				}
			}
			switch order {
			case "swapped":
				for i := 0; i+1 < len(exported); i++ {
					if rng.IntN(4) == 0 {
						exported[i], exported[i+1] = exported[i+1], exported[i]
					}
				}
			case "shuffled":
				rng.Shuffle(len(exported), func(a, b int) { exported[a], exported[b] = exported[b], exported[a] })
			}
			for len(exported) > 0 {
				size := min(len(exported), 1+rng.IntN(512))
				batch := make([]sdktrace.ReadOnlySpan, size)
				for i, s := range exported[:size] {
					batch[i] = spans[s]
				}
				j.confirm(batch)
				exported = exported[size:]
			}
			if st := j.Stats(); st != (Stats{}) {
				t.Fatalf("stats %+v", st)
			}
			j.die()
			rep, exp := recoverT(t, dir)
			got := byID(t, exp.stubs())
			if rep.Ended != len(failed) || len(got) != len(failed) {
				t.Errorf("report %+v: %d spans recovered, want the %d not confirmed", rep, len(got), len(failed))
			}
			for id := range got {
				if !failed[id] {
					t.Errorf("confirmed span %x recovered", id)
				}
			}
		})
	}
}

// A span ended twice (a processor called directly: the SDK ends a span
// once) is journalled with its last end, whether its first end still waits
// for its export in the shard's log or has moved on to the table.
func TestTheLastEndStands(t *testing.T) {
	for _, spilled := range []bool{false, true} {
		dir := t.TempDir()
		j := openT(t, dir, WithHeartbeat(time.Hour))
		p := j.SpanProcessor()
		first := newFakeSpan(1)
		p.OnStart(context.Background(), first)
		p.OnEnd(first)
		if spilled {
			// Enough ended spans in the same shard (the same last byte
			// of the span id) push the first out of the log.
			for i := range uint64(logCap) {
				s := newFakeSpan(1 + (i+1)<<8)
				p.OnStart(context.Background(), s)
				p.OnEnd(s)
			}
			if k := liveKey(first.SpanContext().SpanID()); j.shard(k).log.find(k) >= 0 {
				t.Fatal("the first span is still in the log")
			}
		}
		stub := tracetest.SpanStubFromReadOnlySpan(first.ReadOnlySpan)
		stub.EndTime = stub.EndTime.Add(time.Minute)
		p.OnEnd(fakeSpanOf(stub))
		j.die()
		_, exp := recoverT(t, dir)
		got := byID(t, exp.stubs())
		if s, ok := got[[8]byte(first.SpanContext().SpanID())]; !ok || !s.EndTime.Equal(stub.EndTime) {
			t.Errorf("spilled %v: recovered %v %+v, want the span with its last end %v", spilled, ok, s.EndTime, stub.EndTime)
		}
	}
}

// The log against a slice of entries, through pushes beyond its bound,
// entries taken from anywhere in it and entries taken out of its middle.
func TestLogAgreesWithASlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var l endedLog
	var tb table
	var model []logEntry // the log's entries, oldest first
	spilled := map[uint64]logEntry{}
	next := uint64(1)
	for i := range 100_000 {
		switch op := rng.IntN(10); {
		case op < 5:
			e := logEntry{key: next, start: int32(8 * next), end: int32(8*next + 8)}
			next++
			l.push(e, &tb)
			if len(model) == logCap {
				if model[0].key != 0 {
					spilled[model[0].key] = model[0]
				}
				model = model[1:]
			}
			model = append(model, e)
		case op < 8 && len(model) > 0:
			at := rng.IntN(min(len(model), 8)) // near the head, mostly
			k := model[at].key
			if k == 0 {
				continue
			}
			if got := l.find(k); got != at {
				t.Fatalf("op %d: find(%d) = %d, want %d", i, k, got, at)
			}
			if got := l.take(at, &tb); got != model[at] {
				t.Fatalf("op %d: take(%d) = %+v, want %+v", i, at, got, model[at])
			}
			for _, e := range model[:at] {
				if e.key != 0 {
					spilled[e.key] = e
				}
			}
			model = model[at+1:]
		case op < 9 && len(model) > 0:
			at := rng.IntN(len(model))
			if model[at].key != 0 {
				l.at(at).key = 0
				model[at].key = 0
			}
		default:
			k := 1 + rng.Uint64N(next)
			want := -1
			for i, e := range model {
				if e.key == k {
					want = i
					break
				}
			}
			if got := l.find(k); got != want {
				t.Fatalf("op %d: find(%d) = %d, want %d", i, k, got, want)
			}
		}
		if l.n != len(model) {
			t.Fatalf("op %d: %d entries, want %d", i, l.n, len(model))
		}
	}
	var seen, want []uint64
	l.each(func(e *logEntry) { seen = append(seen, e.key) })
	for _, e := range model {
		if e.key != 0 {
			want = append(want, e.key)
		}
	}
	if !slices.Equal(seen, want) {
		t.Errorf("each saw %v, want %v", seen, want)
	}
	if tb.n != len(spilled) {
		t.Errorf("%d entries spilled to the table, want %d", tb.n, len(spilled))
	}
	for k, e := range spilled {
		if got := tb.get(k); got == nil || got.start != e.start || got.end != e.end {
			t.Fatalf("spilled %d: table has %+v, want %+v", k, got, e)
		}
	}
}
