// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package critpath finds the critical path of a request: the chain of
// spans that decided when it ended, through its stages, hand-overs and
// phases, and through span links.
//
// The walk goes back in time from the request's end. Within a span, at a
// time t, the span that held the path just before t is, among the span's
// candidates (its children, its siblings that lie within it in time, as a
// queue wait lies within exec, and the spans it links to in the same
// trace) that started before t:
//
//   - one still running at t, the latest started of them: what started at
//     t started while it ran, fed by what it had done so far (a diffusion
//     stage that starts on an LLM stage's first output, a stage that starts
//     once a transfer is decoded while the sender still runs);
//   - otherwise the one that ended last before t.
//
// The time between is the span's own. Jaeger's rule, the child that
// finished last before t, skips a sibling still running at t and so gives
// the wrong path where siblings overlap: it would give the LLM stage's
// time before its first output to the request itself.
//
// The walk is written here: no library walks spans this way. It is
// bounded: each span is entered once, the candidates of a span come from
// a heap and one pass over them sorted by end (n log n for n candidates),
// a span's siblings within it are looked for among at most
// [MaxContained], and the walk goes at most [MaxDepth] spans deep
// (deeper, the time is the span's own). Link cycles end there.
package critpath

import (
	"container/heap"
	"slices"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// Segment is a stretch of the critical path that one span held itself
// (not through one of its candidates).
type Segment struct {
	Node       *traceview.Node
	Start, End time.Time
}

// Duration is End minus Start.
func (s Segment) Duration() time.Duration { return s.End.Sub(s.Start) }

// Bounds of the walk.
const (
	// MaxDepth bounds how deep the walk goes through candidates.
	MaxDepth = 128
	// MaxContained bounds the siblings looked at as lying within a span.
	MaxContained = 256
)

// Trace is one trace's spans, indexed for the walk. Not safe for
// concurrent use.
type Trace struct {
	byID   map[string]*traceview.Node
	parent map[*traceview.Node]*traceview.Node
	w      walker
}

// New indexes the trees of one trace (see traceview.Trees). A span id
// used twice names the span traceview.Trees keeps in the tree.
func New(roots []*traceview.Node) *Trace {
	t := &Trace{byID: map[string]*traceview.Node{}, parent: map[*traceview.Node]*traceview.Node{}}
	t.Reset(roots)
	return t
}

// Reset indexes the trees of another trace, reusing t's memory.
func (t *Trace) Reset(roots []*traceview.Node) {
	clear(t.byID)
	clear(t.parent)
	stack := append(t.w.cands[:0], roots...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		// Of spans sharing an id, traceview.Trees keeps the first started
		// in the tree.
		if o, dup := t.byID[n.Span.SpanID]; !dup || n.Span.Start.Before(o.Span.Start) {
			t.byID[n.Span.SpanID] = n
		}
		for _, c := range n.Children {
			t.parent[c] = n
			stack = append(stack, c)
		}
	}
	t.w.cands = stack[:0]
}

// Path returns the critical path of the span n (a request), in time
// order: each segment the time one span held the path itself. The
// segments cover n from its start to its end, without overlap. A span
// that ends before it starts holds no path.
func (t *Trace) Path(n *traceview.Node) []Segment {
	if bad(n.Span) {
		return nil
	}
	w := &t.w
	w.t = t
	if w.entered == nil {
		w.entered = map[*traceview.Node]bool{}
	}
	clear(w.entered)
	w.entered[n] = true
	w.out = nil
	w.walk(n, n.Span.End, 0, n.Span.Start)
	slices.Reverse(w.out)
	return w.out
}

func bad(s *traceview.Span) bool { return s.End.Before(s.Start) }

type walker struct {
	t       *Trace
	entered map[*traceview.Node]bool
	out     []Segment // latest first
	// cands and running hold each level's candidates and heap, one
	// level after another: a level's start at the end of its caller's.
	cands   []*traceview.Node
	running []*traceview.Node
}

// candidates returns what n may have waited on, without n's ancestors on
// the walk (entered): its children, its siblings within it, the spans it
// links to.
func (w *walker) candidates(n *traceview.Node) {
	add := func(c *traceview.Node) {
		if c != nil && c != n && !w.entered[c] && !bad(c.Span) {
			w.cands = append(w.cands, c)
		}
	}
	for _, c := range n.Children {
		add(c)
	}
	if p := w.t.parent[n]; p != nil && isPhase(n) {
		looked := 0
		for _, s := range p.Children {
			if s == n {
				continue
			}
			if looked++; looked > MaxContained {
				break
			}
			if isPhase(s) && !s.Span.Start.Before(n.Span.Start) && !s.Span.End.After(n.Span.End) {
				add(s)
			}
		}
	}
	for _, l := range n.Span.Links {
		if l.TraceID != n.Span.TraceID {
			continue
		}
		// A span linked to that overlaps n: what it did before n started
		// is on the path too, and the walk goes back past n's start.
		if c := w.t.byID[l.SpanID]; c != nil && c.Span.Start.Before(n.Span.End) && c.Span.End.After(n.Span.Start) {
			add(c)
		}
	}
}

// walk adds the path within n from until (at most its end) back to its
// start, latest first, and returns where it reached: n's start, or
// earlier through a span n links to; never before floor, the start of the
// request.
func (w *walker) walk(n *traceview.Node, until time.Time, depth int, floor time.Time) time.Time {
	start := n.Span.Start
	if start.Before(floor) {
		start = floor
	}
	cur := until
	if !cur.After(start) {
		return cur
	}
	if depth >= MaxDepth {
		w.add(n, start, cur)
		return start
	}
	cbase, rbase := len(w.cands), len(w.running)
	defer func() {
		clear(w.cands[cbase:])
		w.cands = w.cands[:cbase]
		clear(w.running[rbase:])
		w.running = w.running[:rbase]
	}()
	w.candidates(n)
	slices.SortStableFunc(w.cands[cbase:], func(a, b *traceview.Node) int {
		if c := b.Span.End.Compare(a.Span.End); c != 0 {
			return c
		}
		return b.Span.Start.Compare(a.Span.Start)
	})
	running := levelHeap{w, rbase}
	next := cbase
	for cur.After(start) {
		byEnd := w.cands // deeper levels may have moved it
		// Candidates that end at or after cur run at cur, if they started
		// before it.
		for next < len(byEnd) && !byEnd[next].Span.End.Before(cur) {
			heap.Push(running, byEnd[next])
			next++
		}
		for running.Len() > 0 && (w.entered[running.top()] || !running.top().Span.Start.Before(cur)) {
			heap.Pop(running)
		}
		var c *traceview.Node
		held := cur
		if running.Len() > 0 {
			c = heap.Pop(running).(*traceview.Node)
		} else {
			for next < len(byEnd) && (w.entered[byEnd[next]] || !byEnd[next].Span.Start.Before(cur)) {
				next++
			}
			if next == len(byEnd) || !byEnd[next].Span.End.After(start) {
				break // the rest ended before n started: n's own time
			}
			c = byEnd[next]
			next++
			held = c.Span.End
		}
		w.add(n, held, cur)
		w.entered[c] = true
		cur = w.walk(c, held, depth+1, floor)
	}
	w.add(n, start, cur)
	if cur.Before(start) {
		return cur
	}
	return start
}

// add adds a segment held by n, merged with the one before when n held
// it too.
func (w *walker) add(n *traceview.Node, from, to time.Time) {
	if !from.Before(to) {
		return
	}
	if k := len(w.out) - 1; k >= 0 && w.out[k].Node == n && w.out[k].Start.Equal(to) {
		w.out[k].Start = from
		return
	}
	w.out = append(w.out, Segment{n, from, to})
}

// isPhase reports whether n is one of the catalogue's phases.
func isPhase(n *traceview.Node) bool {
	_, ok := plan.LookupSpanName(n.Span.Name)
	return ok
}

// levelHeap is the heap of one level of the walk, in w.running from
// base on: the candidates running at the walk's time, the latest started
// on top; of two started at once, the one ending first (the narrower).
type levelHeap struct {
	w    *walker
	base int
}

func (h levelHeap) at(i int) *traceview.Node { return h.w.running[h.base+i] }
func (h levelHeap) Len() int                 { return len(h.w.running) - h.base }
func (h levelHeap) Less(i, j int) bool {
	a, b := h.at(i).Span, h.at(j).Span
	if c := a.Start.Compare(b.Start); c != 0 {
		return c > 0
	}
	return a.End.Before(b.End)
}
func (h levelHeap) Swap(i, j int) {
	r := h.w.running
	r[h.base+i], r[h.base+j] = r[h.base+j], r[h.base+i]
}
func (h levelHeap) Push(x any) { h.w.running = append(h.w.running, x.(*traceview.Node)) }
func (h levelHeap) Pop() any {
	r := h.w.running
	x := r[len(r)-1]
	h.w.running = r[:len(r)-1]
	return x
}
func (h levelHeap) top() *traceview.Node { return h.at(0) }
