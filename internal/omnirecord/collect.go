package omnirecord

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"time"
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
	ready              func(*builder)

	seq     int64
	pending map[string]*pendingReq
	queue   *list.List // of *pendingReq, by first record
	done    *list.List // of the finished *pendingReq, by finishing record

	recent      map[string]*list.Element
	recentOrder *list.List // of string

	// resumed are requests handed on before a restart, and resumedUntil
	// the offset up to which their records are read again.
	resumed      map[string]bool
	resumedUntil int64

	// heldBytes are the attribute bytes of the requests held.
	heldBytes int
	// line is the input line of the record being added, which a new
	// request keeps to be reported by.
	line int
	// Counts for the report.
	late, dropped int
}

type pendingReq struct {
	b           *builder
	firstOff    int64
	lastSeq     int64
	lastWall    time.Time
	elem, delem *list.Element
}

func newCollector(settle, maxPending int, ready func(*builder)) *collector {
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	if settle < 0 {
		settle = 0
	}
	return &collector{settle: settle, maxPending: maxPending, ready: ready,
		pending: map[string]*pendingReq{}, queue: list.New(), done: list.New(), recent: map[string]*list.Element{}, recentOrder: list.New()}
}

// add applies one record of request id to its builder. once says the
// record is written once per request (an [OmniTiming] line): for a request
// already handed on, it begins a new request (a new run reusing the id),
// while any other record of it is late, and counted.
func (c *collector) add(id, source string, at time.Time, offset int64, once bool, apply func(*builder)) {
	c.seq++
	if offset < c.resumedUntil && c.resumed[doneKey(id)] {
		return // exported before the restart: read again, not sent again
	}
	p := c.pending[id]
	if p != nil && once && p.b.timed {
		// A second [OmniTiming] line for one id: a new request reusing it
		// (a restarted engine); the first is finished.
		c.finish(p)
		p = nil
	}
	if p == nil {
		if _, done := c.recent[doneKey(id)]; done && !once {
			c.late++
			return
		}
		p = &pendingReq{b: newBuilder(id, source, "log:"+at.UTC().Format(time.RFC3339)), firstOff: offset}
		// The id is held too, whole (it tells requests apart): it counts.
		p.b.bytes += len(id)
		p.b.line = c.line
		c.pending[id] = p
		p.elem = c.queue.PushBack(p)
	}
	p.lastSeq, p.lastWall = c.seq, time.Now()
	before := p.b.bytes
	apply(p.b)
	c.heldBytes += p.b.bytes - before
	if p.b.r.End.IsZero() || at.After(p.b.r.End) {
		p.b.r.End = at
	}
	if p.b.complete && p.delem == nil {
		p.delem = c.done.PushBack(p)
	}
	c.release()
	for len(c.pending) > c.maxPending || (c.heldBytes > maxHeldBytes && c.queue.Len() > 0) {
		c.evictOldest()
	}
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
}

func (c *collector) evictOldest() {
	p := c.queue.Front().Value.(*pendingReq)
	if p.b.complete {
		c.finish(p)
		return
	}
	c.remove(p)
	c.dropped++
}

func (c *collector) remove(p *pendingReq) {
	c.heldBytes -= p.b.bytes
	c.queue.Remove(p.elem)
	if p.delem != nil {
		c.done.Remove(p.delem)
	}
	delete(c.pending, p.b.r.ID)
}

func (c *collector) finish(p *pendingReq) {
	c.remove(p)
	id := p.b.r.ID
	key := doneKey(id)
	if e, ok := c.recent[key]; ok {
		c.recentOrder.MoveToBack(e)
	} else {
		c.recent[key] = c.recentOrder.PushBack(key)
		if c.recentOrder.Len() > recentExported {
			old := c.recentOrder.Remove(c.recentOrder.Front()).(string)
			delete(c.recent, old)
		}
	}
	c.ready(p.b)
}

// checkpoint returns the offset from which the input must be read again
// after a restart so that no pending request loses a record: the first
// record of the oldest pending one, or next when none is pending; and the
// requests already handed on whose records may lie after it.
func (c *collector) checkpoint(next int64) (int64, []string) {
	off := next
	for e := c.queue.Front(); e != nil; e = e.Next() {
		if p := e.Value.(*pendingReq); p.firstOff < off {
			off = p.firstOff
		}
	}
	var done []string
	if off < next {
		for e := c.recentOrder.Front(); e != nil; e = e.Next() {
			done = append(done, e.Value.(string))
		}
	}
	return off, done
}

// rebase says the input moved to a new file (a rotation): the records of
// the requests held lie in the old one, which a restart cannot read again,
// so the checkpoint falls back to the start of the new one.
func (c *collector) rebase() {
	for e := c.queue.Front(); e != nil; e = e.Next() {
		e.Value.(*pendingReq).firstOff = 0
	}
}

// doneKey is what is remembered of an exported request's id (and saved in
// a checkpoint): the id itself, or for a long one its head and a digest of
// the whole, so that 4 096 remembered ids of a megabyte each cost no 4 GB.
func doneKey(id string) string {
	if len(id) <= 256 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return id[:128] + "\x00" + hex.EncodeToString(sum[:16])
}

// markDone remembers requests handed on before a restart, whose records
// lie before until.
func (c *collector) markDone(ids []string, until int64) {
	c.resumed = make(map[string]bool, len(ids))
	for _, id := range ids {
		c.resumed[doneKey(id)] = true
	}
	c.resumedUntil = until
}
