// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

// table maps span ids to entries: open addressing, linear probing,
// deletion by backward shift (no tombstones). Unlike a Go map, a lookup
// that updates the entry probes once, and its slots are one array the
// garbage collector scans in one go; assigning an entry costs no bulk
// write barrier. Callers hold the shard's lock.
//
// A table grows as entries are put, and shrinks only when trimmed (once a
// heartbeat): it keeps the size its most entries since the last trim
// needed, so that a table emptied by each confirmed batch is not shrunk
// and grown again, each time allocating its slots anew, with the next
// spans; a burst of open spans leaves no big table past the next trim.
type table struct {
	slots []slot // a power of two long
	n     int
	peak  int // the most entries since the last trim
}

type slot struct {
	key uint64 // 0: empty (no valid span has span id 0)
	e   entry
}

const minTable = 16

func hashKey(k uint64) uint64 { return k * 0x9e3779b97f4a7c15 }

// get returns the entry of k, or nil.
func (t *table) get(k uint64) *entry {
	if len(t.slots) == 0 || k == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := hashKey(k) >> 32 & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == k {
			return &s.e
		}
		if s.key == 0 {
			return nil
		}
	}
}

// put returns the entry of k, made zero when k is new.
// k must not be 0.
func (t *table) put(k uint64) *entry {
	e, _ := t.insert(k)
	return e
}

// insert returns the entry of k, made zero when k is new, and whether it
// was. k must not be 0.
func (t *table) insert(k uint64) (*entry, bool) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(minTable, len(t.slots)*2))
	}
	mask := uint64(len(t.slots) - 1)
	for i := hashKey(k) >> 32 & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == k {
			return &s.e, false
		}
		if s.key == 0 {
			s.key = k
			s.e = entry{}
			t.n++
			t.peak = max(t.peak, t.n)
			return &s.e, true
		}
	}
}

// del removes k, if there.
func (t *table) del(k uint64) {
	if len(t.slots) == 0 || k == 0 {
		return
	}
	mask := uint64(len(t.slots) - 1)
	i := hashKey(k) >> 32 & mask
	for ; t.slots[i].key != k; i = (i + 1) & mask {
		if t.slots[i].key == 0 {
			return
		}
	}
	// Shift back the slots after i that probed past it.
	for j := (i + 1) & mask; t.slots[j].key != 0; j = (j + 1) & mask {
		home := hashKey(t.slots[j].key) >> 32 & mask
		// Does j's home lie cyclically in (i, j]? Then it stays.
		if (j > i && home > i && home <= j) || (j < i && (home > i || home <= j)) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = slot{}
	t.n--
}

// trim shrinks the table to the size its most entries since the last trim
// needed, and starts counting them again.
func (t *table) trim() {
	size := len(t.slots)
	for size > minTable && t.peak*8 < size {
		size /= 2
	}
	if size < len(t.slots) {
		t.resize(size)
	}
	t.peak = t.n
}

func (t *table) resize(size int) {
	old := t.slots
	t.slots = make([]slot, size)
	t.n = 0
	for i := range old {
		if old[i].key != 0 {
			*t.put(old[i].key) = old[i].e
		}
	}
}

// each calls f with every key and entry; f may change the entry but not
// the table.
func (t *table) each(f func(k uint64, e *entry)) {
	for i := range t.slots {
		if t.slots[i].key != 0 {
			f(t.slots[i].key, &t.slots[i].e)
		}
	}
}
