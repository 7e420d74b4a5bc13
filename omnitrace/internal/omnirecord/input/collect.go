// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// Defaults of the collector.
const (
	// DefaultSettle is how many more records of the input a finished
	// request waits for before it is exported: a request's tables are
	// logged next to its [OmniTiming] line, and a few other requests'
	// records may come between.
	DefaultSettle = 64
	// DefaultMaxPending bounds the requests held at once; beyond, the
	// oldest is exported if finished, or dropped and counted if not.
	DefaultMaxPending = 10000
	// recentExported is how many exported requests are remembered, to
	// tell a late record of one from a new request that reuses its id.
	recentExported = 4096
	// maxHeldBytes bounds the attribute bytes of the requests held at
	// once (each is bounded by maxRequestBytes); beyond, the oldest is
	// handed on or dropped as beyond MaxPending.
	maxHeldBytes = 64 << 20
)

// collector gathers the records of each request of a log until the
// request is finished and settled, and hands it on then. It holds at most
// MaxPending requests: its memory is bounded whatever the input's length.
type collector struct {
	settle, maxPending int
	ready              func(*forms.Builder)

	seq     int64
	pending map[string]*pendingReq
	queue   *list.List // of *pendingReq, by first record
	done    *list.List // of the finished *pendingReq, by finishing record

	// recent are the requests handed on last, oldest first, each with
	// where its records lie, and recentIDs how many of them have each id:
	// for the checkpoint, and to tell a late record from a new request.
	recent    *list.List // of Done
	recentIDs map[string]int
	// lastNth is, for each id remembered, the Nth of the latest request
	// with it: which of the requests with that id the next one is.
	lastNth map[string]int

	// resumed are requests handed on before a restart, and resumedUntil
	// the offset up to which their records are read again.
	resumed      map[string][]Done
	resumedUntil int64

	// heldBytes are the attribute bytes of the requests held.
	heldBytes int
	// line is the input line of the record being added, which a new
	// request keeps to be reported by.
	line int
	// Counts for the report.
	late, dropped int
}

// Done is a request handed on: the key of its id (see doneKey), the
// offsets of its first and last records, and which of the requests with
// that id of the input it was (Nth: 1 for the first, 0 when not counted).
type Done struct {
	Key         string `json:"id"`
	First, Last int64
	Nth         int `json:"nth,omitempty"`
}

type pendingReq struct {
	b        *forms.Builder
	firstOff int64
	lastOff  int64
	// rotated: its records lie in a file rotated away, which a restart
	// cannot read again; newFirst is the offset of its first record in
	// the new file, -1 when none came.
	rotated     bool
	newFirst    int64
	lastSeq     int64
	lastWall    time.Time
	elem, delem *list.Element
}

func newCollector(settle, maxPending int, ready func(*forms.Builder)) *collector {
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	if settle < 0 {
		settle = 0
	}
	return &collector{settle: settle, maxPending: maxPending, ready: ready,
		pending: map[string]*pendingReq{}, queue: list.New(), done: list.New(), recent: list.New(), recentIDs: map[string]int{},
		lastNth: map[string]int{}}
}

// add applies one record of request id to its builder. once says the
// record is written once per request (an [OmniTiming] line): for a request
// already handed on, it begins a new request (a new run reusing the id),
// while any other record of it is late, and counted.
func (c *collector) add(id, source string, at time.Time, offset int64, once bool, apply func(*forms.Builder)) {
	c.seq++
	if offset < c.resumedUntil && c.wasDone(id, offset) {
		return // exported before the restart: read again, not sent again
	}
	p := c.pending[id]
	if p != nil && once && p.b.Timed {
		// A second [OmniTiming] line for one id: a new request reusing it
		// (a restarted engine); the first is finished.
		c.finish(p)
		p = nil
	}
	if p == nil {
		if c.recentIDs[DoneKey(id)] > 0 && !once {
			c.late++
			return
		}
		p = &pendingReq{b: forms.NewBuilder(id, source, ""), firstOff: offset}
		// The id is held too, whole (it tells requests apart): it counts.
		// The builder's copy of it is the key: id shares the memory of
		// the record it was read from.
		p.b.Bytes += len(id)
		p.b.Line = c.line
		c.pending[p.b.R.ID] = p
		p.elem = c.queue.PushBack(p)
	}
	p.lastSeq, p.lastWall, p.lastOff = c.seq, time.Now(), offset
	if p.rotated && p.newFirst < 0 {
		p.newFirst = offset
	}
	before := p.b.Bytes
	apply(p.b)
	c.heldBytes += p.b.Bytes - before
	if p.b.R.End.IsZero() || at.After(p.b.R.End) {
		p.b.R.End = at
	}
	if p.b.Complete && p.delem == nil {
		p.delem = c.done.PushBack(p)
	}
	c.release()
	for len(c.pending) > c.maxPending || (c.heldBytes > maxHeldBytes && c.queue.Len() > 0) {
		c.evictOldest()
	}
	c.trim()
}

// release hands on the finished requests that have settled: no record of
// theirs among the last settle records.
func (c *collector) release() {
	for e := c.done.Front(); e != nil; e = c.done.Front() {
		p := e.Value.(*pendingReq)
		if c.seq-p.lastSeq < int64(c.settle) {
			return
		}
		c.finish(p)
	}
}

// flush hands on every request held, finished or not (the input ended).
func (c *collector) flush() {
	for e := c.queue.Front(); e != nil; e = c.queue.Front() {
		c.finish(e.Value.(*pendingReq))
	}
}

// idle hands on every request with no record for d (a followed log whose
// engine wrote no more of it): finished or not.
func (c *collector) idle(now time.Time, d time.Duration) {
	for e := c.queue.Front(); e != nil; {
		next := e.Next()
		if p := e.Value.(*pendingReq); now.Sub(p.lastWall) >= d {
			c.finish(p)
		}
		e = next
	}
	c.trim()
}

func (c *collector) evictOldest() {
	p := c.queue.Front().Value.(*pendingReq)
	if p.b.Complete {
		c.finish(p)
		return
	}
	c.remove(p)
	c.dropped++
}

func (c *collector) remove(p *pendingReq) {
	c.heldBytes -= p.b.Bytes
	c.queue.Remove(p.elem)
	if p.delem != nil {
		c.done.Remove(p.delem)
	}
	delete(c.pending, p.b.R.ID)
}

func (c *collector) finish(p *pendingReq) {
	c.remove(p)
	switch {
	case !p.rotated:
		p.b.R.Run = c.count(p.b.R.ID, p.firstOff, p.lastOff)
	case p.newFirst >= 0:
		// Only its records in the new file can be read again.
		p.b.R.Run = c.count(p.b.R.ID, p.newFirst, p.lastOff)
	default:
		// No record of it can be read again: remembered all the same, to
		// be counted, and to tell a late record of it.
		p.b.R.Run = c.count(p.b.R.ID, -1, -1)
	}
	c.ready(p.b)
}

// count remembers a request of id handed on, whose records lie from
// first to last, and returns its run (see [Request.Run]): which of the
// requests with that id it is, counted over the requests remembered.
func (c *collector) count(id string, first, last int64) string {
	key := DoneKey(id)
	n := c.lastNth[key] + 1
	c.remember(Done{Key: key, First: first, Last: last, Nth: n})
	return runOf(n)
}

// handedOn counts a request handed on outside the collector (a summary's):
// see count.
func (c *collector) handedOn(id string, first, last int64) string {
	run := c.count(id, first, last)
	c.trim()
	return run
}

// runOf is the run of the nth request with one id: "#1" for the first.
func runOf(n int) string { return "#" + strconv.Itoa(n) }

// remember keeps a request handed on: for the checkpoint, to tell a late
// record of it from a new request, and to count the requests with its id.
func (c *collector) remember(d Done) {
	// A copy: the id it was made of shares the memory of the record it was
	// read from, which 4 096 requests remembered must not keep.
	d.Key = strings.Clone(d.Key)
	c.recent.PushBack(d)
	c.recentIDs[d.Key]++
	if d.Nth > c.lastNth[d.Key] {
		c.lastNth[d.Key] = d.Nth
	}
}

// trim forgets the oldest requests handed on beyond recentExported. A
// restart reads again from the first record of the oldest request held;
// a forgotten request whose records lie after that would be read again
// and sent twice, so the requests held that begin before its last record
// are handed on (finished) or dropped (unfinished, counted) first.
func (c *collector) trim() {
	for c.recent.Len() > recentExported {
		old := c.recent.Remove(c.recent.Front()).(Done)
		if c.recentIDs[old.Key]--; c.recentIDs[old.Key] <= 0 {
			delete(c.recentIDs, old.Key)
			delete(c.lastNth, old.Key)
		}
		for c.queue.Len() > 0 && c.queue.Front().Value.(*pendingReq).firstOff <= old.Last {
			c.evictOldest()
		}
	}
}

// checkpoint returns the offset from which the input must be read again
// after a restart so that no pending request loses a record: the first
// record of the oldest pending one, or pin (the start of a record not yet
// read whole) if earlier, or next when neither is; with the number of
// lines before it, given those before pin and before next.
func (c *collector) checkpoint(pin int64, pinLines int, next int64, nextLines int) (int64, int) {
	off, lines := next, nextLines
	if pin < off {
		off, lines = pin, pinLines
	}
	for e := c.queue.Front(); e != nil; e = e.Next() {
		if p := e.Value.(*pendingReq); p.firstOff < off {
			off, lines = p.firstOff, max(p.b.Line-1, 0)
		}
	}
	return off, lines
}

// remembered returns the requests remembered, oldest first.
func (c *collector) remembered() []Done {
	// Every request remembered is saved, not only those read again: after
	// a restart they still tell a late record from a new request, and are
	// saved again by the next checkpoint.
	done := make([]Done, 0, c.recent.Len())
	for e := c.recent.Front(); e != nil; e = e.Next() {
		done = append(done, e.Value.(Done))
	}
	return done
}

// rebase says the input moved to a new file (a rotation): the records of
// the requests held lie in the old one, which a restart cannot read again.
// Their offsets fall back to the start of the new one, and they are handed
// on when the reading stops (see stop). The requests handed on are still
// remembered (a late record of one stays late), but where their records
// lay is the old file's, which no restart reads: those ranges match
// nothing.
func (c *collector) rebase() {
	for e := c.queue.Front(); e != nil; e = e.Next() {
		p := e.Value.(*pendingReq)
		p.firstOff, p.rotated, p.newFirst = 0, true, -1
	}
	for e := c.recent.Front(); e != nil; e = e.Next() {
		d := e.Value.(Done)
		d.First, d.Last = -1, -1
		e.Value = d
	}
}

// stop hands on the requests whose records a restart cannot read again
// (they lie in a file rotated away), finished or not; the others stay, to
// be read again from the checkpoint.
func (c *collector) stop() {
	for e := c.queue.Front(); e != nil; {
		next := e.Next()
		if p := e.Value.(*pendingReq); p.rotated {
			c.finish(p)
		}
		e = next
	}
}

// wasDone reports whether a record of id at offset belongs to a request
// handed on before the restart.
func (c *collector) wasDone(id string, offset int64) bool {
	for _, d := range c.resumed[DoneKey(id)] {
		if d.First <= offset && offset <= d.Last {
			return true
		}
	}
	return false
}

// DoneKey is what is remembered of an exported request's id (and saved in
// a checkpoint): the id itself, or for a long one its head and a digest of
// the whole, so that 4 096 remembered ids of a megabyte each cost no 4 GB.
func DoneKey(id string) string {
	if len(id) <= 256 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return id[:128] + "\x00" + hex.EncodeToString(sum[:16])
}

// markDone remembers requests handed on before a restart, whose records
// lie before until: their records read again are skipped, a later record
// of one is late, and the next checkpoint saves them again.
func (c *collector) markDone(done []Done, until int64) {
	c.resumed = make(map[string][]Done, len(done))
	for _, d := range done {
		c.resumed[d.Key] = append(c.resumed[d.Key], d)
		c.remember(d)
	}
	c.resumedUntil = until
	c.trim()
}

// Held returns how many requests the input holds, not yet handed on.
func (in *Input) Held() int { return in.coll.queue.Len() }
