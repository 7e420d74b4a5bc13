// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"math/rand/v2"
	"testing"
)

// The table against a Go map, through random puts, gets and deletes of
// keys that collide (few distinct homes) and that do not, and trims now
// and then; it grows and shrinks on the way.
func TestTableAgreesWithAMap(t *testing.T) {
	for _, keys := range []uint64{40, 5000, 1 << 40} {
		rng := rand.New(rand.NewPCG(keys, 3))
		var tb table
		m := map[uint64]int32{}
		for i := range 200_000 {
			k := 1 + rng.Uint64N(keys)
			if i%1000 == 999 {
				tb.trim()
			}
			switch rng.IntN(3) {
			case 0:
				tb.put(k).start = int32(i)
				m[k] = int32(i)
			case 1:
				tb.del(k)
				delete(m, k)
			case 2:
				e := tb.get(k)
				v, ok := m[k]
				if (e != nil) != ok || (ok && e.start != v) {
					t.Fatalf("keys %d, op %d: get(%d) = %v, map has %v %v", keys, i, k, e, v, ok)
				}
			}
			if tb.n != len(m) {
				t.Fatalf("keys %d, op %d: %d entries, map %d", keys, i, tb.n, len(m))
			}
		}
		n := 0
		tb.each(func(k uint64, e *entry) {
			n++
			if m[k] != e.start {
				t.Fatalf("each: %d = %d, map %d", k, e.start, m[k])
			}
		})
		if n != len(m) {
			t.Fatalf("each saw %d, map %d", n, len(m))
		}
		// Most entries go: the second trim after that shrinks the table
		// around the rest (the first keeps what they needed before).
		kept := 0
		for k := range m {
			if kept++; kept%16 != 0 {
				tb.del(k)
				delete(m, k)
			}
		}
		tb.trim()
		if tb.trim(); len(tb.slots) > max(minTable, 8*len(m)) || tb.n != len(m) {
			t.Fatalf("keys %d: %d entries in %d slots after two trims, map %d", keys, tb.n, len(tb.slots), len(m))
		}
		for k, v := range m {
			if e := tb.get(k); e == nil || e.start != v {
				t.Fatalf("keys %d: after two trims get(%d) = %v, map has %v", keys, k, e, v)
			}
		}
		for k := range m {
			tb.del(k)
		}
		size := len(tb.slots)
		if tb.trim(); tb.n != 0 || len(tb.slots) != size {
			t.Fatalf("emptied: %d entries in %d slots, %d before the first trim", tb.n, len(tb.slots), size)
		}
		if tb.trim(); len(tb.slots) > minTable {
			t.Fatalf("emptied and trimmed twice: %d slots", len(tb.slots))
		}
	}
	var tb table
	if tb.get(0) != nil {
		t.Fatal("key 0 found in an empty table")
	}
	tb.put(5)
	if tb.get(0) != nil {
		t.Fatal("key 0 found")
	}
}
