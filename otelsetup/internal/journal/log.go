// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

// endedLog holds a shard's ended spans awaiting the confirmation of their
// export, in the order their ends were journalled: a ring of at most
// logCap entries. The batcher exports spans in the order they end, so a
// confirmation finds its span at the log's head, or near it; the shard's
// table then holds its open spans only, few enough to stay in the
// processor's caches, which a table of every span awaiting export does
// not. An ended span that does not fit, and one a later confirmation
// passes over (its export failed, or the batcher dropped it, or spans
// ended on two goroutines reached the batcher in the other order), moves
// to the table. Callers hold the shard's lock.
type endedLog struct {
	ents []logEntry // a power of two long once allocated
	head int        // the oldest entry
	n    int
}

// logEntry is an ended span's records (see entry). Key 0 is an entry taken
// out of the middle of the log: the span ended again, or was evicted.
type logEntry struct {
	key        uint64
	start, end int32
}

// logCap bounds each shard's log: 32 shards of 128 entries hold a
// batcher's default queue (2 048 spans) and a batch being exported.
const logCap = 128

func (l *endedLog) at(i int) *logEntry { return &l.ents[(l.head+i)&(len(l.ents)-1)] }

// push adds an ended span's entry; when the log is full, its oldest entry
// moves to t.
func (l *endedLog) push(e logEntry, t *table) {
	if l.ents == nil {
		l.ents = make([]logEntry, logCap)
	}
	if l.n == len(l.ents) {
		l.spill(1, t)
	}
	*l.at(l.n) = e
	l.n++
}

// spill moves the oldest n entries to t. An entry whose span id a span
// started since holds in t stays out, as a span started with the id of an
// open one replaces it: its records, no longer referred to, are dropped
// when compaction reaches them.
func (l *endedLog) spill(n int, t *table) {
	for range n {
		if e := l.at(0); e.key != 0 {
			if te, ok := t.insert(e.key); ok {
				*te = entry{start: e.start, end: e.end}
			}
		}
		l.head = (l.head + 1) & (len(l.ents) - 1)
		l.n--
	}
}

// find returns the position of k's entry from the head, or -1.
func (l *endedLog) find(k uint64) int {
	for i := range l.n {
		if l.at(i).key == k {
			return i
		}
	}
	return -1
}

// take removes and returns the entry at position i, moving the older ones
// to t: whatever was passed over is not confirmed yet.
func (l *endedLog) take(i int, t *table) logEntry {
	l.spill(i, t)
	e := *l.at(0)
	l.head = (l.head + 1) & (len(l.ents) - 1)
	l.n--
	return e
}

// each calls f with every entry; f may change the entry.
func (l *endedLog) each(f func(e *logEntry)) {
	for i := range l.n {
		if e := l.at(i); e.key != 0 {
			f(e)
		}
	}
}
