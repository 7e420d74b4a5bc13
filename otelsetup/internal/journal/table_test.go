// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"math/rand/v2"
	"testing"
)

// The table against a Go map, through random puts, gets and deletes of
// keys that collide (few distinct homes) and that do not; it grows and
// shrinks on the way.
func TestTableAgreesWithAMap(t *testing.T) {
	for _, keys := range []uint64{40, 5000, 1 << 40} {
		rng := rand.New(rand.NewPCG(keys, 3))
		var tb table
		m := map[uint64]int32{}
		for i := range 200_000 {
			k := 1 + rng.Uint64N(keys)
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
		for k := range m {
			tb.del(k)
		}
		if tb.n != 0 || len(tb.slots) > keepTable {
			t.Fatalf("emptied: %d entries in %d slots", tb.n, len(tb.slots))
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
