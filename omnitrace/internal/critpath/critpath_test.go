// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package critpath

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// sp is a span of the test trace: id, parent id, name, start and end in
// ms from t0, and the ids it links to.
func sp(id, parent, name string, start, end float64, links ...string) traceview.Span {
	s := traceview.Span{TraceID: "t", SpanID: id, ParentID: parent, Name: name,
		Start: t0.Add(time.Duration(start * float64(time.Millisecond))),
		End:   t0.Add(time.Duration(end * float64(time.Millisecond)))}
	for _, l := range links {
		s.Links = append(s.Links, traceview.Link{TraceID: "t", SpanID: l})
	}
	return s
}

// path is the critical path of the trace's root span, as "id start-end"
// in ms, in time order.
func path(t *testing.T, ss []traceview.Span, rule func(*Trace, *traceview.Node) []Segment) []string {
	t.Helper()
	roots, _ := traceview.Trees(ss)
	if len(roots) == 0 {
		t.Fatal("no root")
	}
	tr := New(roots)
	var out []string
	var last time.Time
	for i, s := range rule(tr, roots[0]) {
		if i > 0 && !s.Start.Equal(last) {
			t.Errorf("segment %d starts at %v, the one before ended at %v: the path has a gap or an overlap", i, s.Start, last)
		}
		last = s.End
		out = append(out, fmt.Sprintf("%s %g-%g", s.Node.Span.SpanID, ms(s.Start), ms(s.End)))
	}
	return out
}

func ms(t time.Time) float64 { return float64(t.Sub(t0)) / float64(time.Millisecond) }

func ours(t *Trace, n *traceview.Node) []Segment { return t.Path(n) }

// lastFinishingChild is Jaeger's rule, for comparison: within a span, the
// child that finished last before the time reached, then the one that
// finished last before that child started.
func lastFinishingChild(_ *Trace, n *traceview.Node) []Segment {
	var out []Segment
	var walk func(n *traceview.Node, until time.Time)
	walk = func(n *traceview.Node, until time.Time) {
		cur := until
		for {
			var best *traceview.Node
			for _, c := range n.Children {
				if !c.Span.End.After(cur) && c.Span.Start.Before(cur) && (best == nil || c.Span.End.After(best.Span.End)) {
					best = c
				}
			}
			if best == nil {
				break
			}
			if best.Span.End.Before(cur) {
				out = append(out, Segment{n, best.Span.End, cur})
			}
			walk(best, best.Span.End)
			cur = best.Span.Start
		}
		if cur.After(n.Span.Start) {
			out = append(out, Segment{n, n.Span.Start, cur})
		}
	}
	walk(n, n.Span.End)
	slices.Reverse(out)
	return out
}

func TestCriticalPathsWithKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		ss   []traceview.Span
		want []string
		// jaeger is what the last-finishing-child rule gives, where it
		// differs.
		jaeger []string
	}{{
		// Queue wait is a child of the request that lies within exec.
		name: "overlapping siblings: a queue wait within exec",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 110),
			sp("pre", "req", "omni.diffusion.preprocess", 0, 10),
			sp("exec", "req", "omni.diffusion.exec", 10, 100),
			sp("qw", "req", "omni.diffusion.queue_wait", 10, 30),
			sp("fwd", "exec", "omni.diffusion.forward", 30, 90),
			sp("vae", "exec", "omni.diffusion.vae_decode", 90, 100),
			sp("orw", "req", "omni.diffusion.output_ready_wait", 100, 104),
			sp("post", "req", "omni.diffusion.postprocess", 104, 110),
		},
		want:   []string{"pre 0-10", "qw 10-30", "fwd 30-90", "vae 90-100", "orw 100-104", "post 104-110"},
		jaeger: []string{"pre 0-10", "exec 10-30", "fwd 30-90", "vae 90-100", "orw 100-104", "post 104-110"},
	}, {
		name: "a stage that waits on another stage's transfer",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 200),
			sp("s0", "req", "omni.stage", 0, 55),
			sp("q0", "s0", "omni.llm.queue", 0, 5),
			sp("p0", "s0", "omni.llm.prefill", 5, 30),
			sp("d0", "s0", "omni.llm.decode", 30, 55),
			sp("x01", "req", "omni.transfer", 40, 60),
			sp("tx", "x01", "omni.transfer.tx", 40, 45),
			sp("fl", "x01", "omni.transfer.in_flight", 45, 50),
			sp("rx", "x01", "omni.transfer.rx_decode", 50, 60),
			sp("s1", "req", "omni.stage", 60, 195),
			sp("e1", "s1", "omni.diffusion.exec", 62, 190),
			sp("f1", "e1", "omni.diffusion.forward", 62, 190),
		},
		want: []string{"q0 0-5", "p0 5-30", "d0 30-40", "tx 40-45", "fl 45-50", "rx 50-60",
			"s1 60-62", "f1 62-190", "s1 190-195", "req 195-200"},
		jaeger: []string{"req 0-40", "tx 40-45", "fl 45-50", "rx 50-60",
			"s1 60-62", "f1 62-190", "s1 190-195", "req 195-200"},
	}, {
		// The LLM stage goes on decoding after its first output, which
		// starts the diffusion stage; the diffusion stage ends last.
		name: "an LLM stage whose first output starts the diffusion stage",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 300),
			sp("llm", "req", "omni.stage", 0, 150),
			sp("q", "llm", "omni.llm.queue", 0, 4),
			sp("p", "llm", "omni.llm.prefill", 4, 40),
			sp("d", "llm", "omni.llm.decode", 40, 150),
			sp("o0", "llm", "omni.output", 0, 40),
			sp("o1", "llm", "omni.output", 40, 150),
			sp("dit", "req", "omni.stage", 40, 300),
			sp("qw", "dit", "omni.diffusion.queue_wait", 40, 50),
			sp("ex", "dit", "omni.diffusion.exec", 40, 290),
			sp("fw", "ex", "omni.diffusion.forward", 50, 280),
			sp("va", "ex", "omni.diffusion.vae_decode", 280, 290),
			sp("pp", "dit", "omni.diffusion.postprocess", 290, 300),
		},
		want:   []string{"q 0-4", "p 4-40", "qw 40-50", "fw 50-280", "va 280-290", "pp 290-300"},
		jaeger: []string{"req 0-40", "ex 40-50", "fw 50-280", "va 280-290", "pp 290-300"},
	}, {
		// Parallel stages: the one that ended last decided.
		name: "parallel stages",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 100),
			sp("a", "req", "omni.stage", 0, 90),
			sp("b", "req", "omni.stage", 0, 60),
		},
		want: []string{"a 0-90", "req 90-100"},
	}, {
		// A link names what a span waited on elsewhere in the trace.
		name: "through a link",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 100),
			sp("s0", "req", "omni.stage", 0, 30),
			sp("w", "s0", "work", 5, 30),
			sp("s1", "req", "omni.stage", 20, 100, "w"),
			sp("e", "s1", "omni.diffusion.exec", 35, 100),
		},
		want: []string{"s0 0-5", "w 5-30", "s1 30-35", "e 35-100"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := path(t, tc.ss, ours)
			if !slices.Equal(got, tc.want) {
				t.Errorf("critical path\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(tc.want, ", "))
			}
			if tc.jaeger != nil {
				lfc := path(t, tc.ss, lastFinishingChild)
				if !slices.Equal(lfc, tc.jaeger) {
					t.Errorf("the last-finishing-child rule\n got %s\nwant %s", strings.Join(lfc, ", "), strings.Join(tc.jaeger, ", "))
				}
				if slices.Equal(lfc, tc.want) {
					t.Errorf("the last-finishing-child rule gives the right path here: no case against it")
				}
			}
		})
	}
}

// TestCriticalPathOfHostileTraces: cycles of links, a span that ends
// before it starts, shared span ids, zero-length spans and a child that
// overruns its parent give a path that covers the request once and ends.
func TestCriticalPathOfHostileTraces(t *testing.T) {
	for _, tc := range []struct {
		name string
		ss   []traceview.Span
		want []string
	}{{
		name: "a cycle of links",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 100),
			sp("a", "req", "x", 10, 50, "b"),
			sp("b", "req", "x", 40, 90, "a", "req", "b"),
		},
		want: []string{"req 0-10", "a 10-50", "b 50-90", "req 90-100"},
	}, {
		name: "ends before it starts",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 100),
			sp("a", "req", "x", 80, 20),
		},
		want: []string{"req 0-100"},
	}, {
		name: "zero-length spans and an overrunning child",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 100),
			sp("z", "req", "x", 30, 30),
			sp("o", "req", "x", 60, 140),
		},
		want: []string{"req 0-60", "o 60-100"},
	}, {
		name: "links to spans not in the trace, and a span linking to itself",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 100),
			sp("a", "req", "x", 10, 50, "missing", "a", ""),
			sp("b", "req", "x", 60, 90, "a"),
		},
		want: []string{"req 0-10", "a 10-50", "req 50-60", "b 60-90", "req 90-100"},
	}, {
		name: "a shared span id",
		ss: []traceview.Span{
			sp("req", "", "omni.request", 0, 100),
			sp("a", "req", "x", 10, 20),
			sp("a", "req", "x", 30, 40),
		},
		want: []string{"req 0-10", "a 10-20", "req 20-100"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := path(t, tc.ss, ours)
			if !slices.Equal(got, tc.want) {
				t.Errorf("critical path\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(tc.want, ", "))
			}
		})
	}
}

// TestCriticalPathIsBoundedOnWideAndDeepTraces: ten thousand overlapping
// children and a chain of links far deeper than MaxDepth.
func TestCriticalPathIsBoundedOnWideAndDeepTraces(t *testing.T) {
	ss := []traceview.Span{sp("req", "", "omni.request", 0, 20000)}
	for i := range 10000 {
		ss = append(ss, sp(fmt.Sprint("w", i), "req", "x", float64(i), float64(20000-i)))
	}
	for i := range 1000 {
		link := fmt.Sprint("l", i+1)
		ss = append(ss, sp(fmt.Sprint("l", i), "w9999", "x", 9999+float64(i)/1000, 10001, link))
	}
	roots, _ := traceview.Trees(ss)
	segs := New(roots).Path(roots[0])
	var total time.Duration
	for _, s := range segs {
		total += s.Duration()
	}
	if total != roots[0].Span.Duration() {
		t.Errorf("the path covers %v of a request of %v", total, roots[0].Span.Duration())
	}
}

// TestCriticalPathOfAChainOfAHundredThousandSpans: each span the parent
// of the next, each a millisecond inside its parent at both ends: the
// walk stops at a bounded depth (the rest is the deepest span's own
// time), with no stack to overflow, and the path covers the request once.
func TestCriticalPathOfAChainOfAHundredThousandSpans(t *testing.T) {
	const depth = 100000
	ss := []traceview.Span{sp("req", "", "omni.request", 0, 2*depth+2)}
	parent := "req"
	for i := range depth {
		id := fmt.Sprint("c", i)
		ss = append(ss, sp(id, parent, "omni.diffusion.exec", float64(i+1), float64(2*depth+1-i)))
		parent = id
	}
	roots, _ := traceview.Trees(ss)
	segs := New(roots).Path(roots[0])
	var total time.Duration
	deepest := 0
	for _, s := range segs {
		total += s.Duration()
		var n int
		if _, err := fmt.Sscanf(s.Node.Span.SpanID, "c%d", &n); err == nil {
			deepest = max(deepest, n)
		}
	}
	if total != roots[0].Span.Duration() {
		t.Errorf("the path covers %v of a request of %v", total, roots[0].Span.Duration())
	}
	// traceview.Trees makes a span deeper than its bound a root, and the
	// walk goes at most MaxDepth deep: the path ends in the chain above both.
	if deepest == 0 || deepest >= MaxDepth {
		t.Errorf("the path reaches span c%d, want one above c%d", deepest, MaxDepth)
	}
}
