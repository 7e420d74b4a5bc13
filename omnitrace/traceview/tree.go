// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"fmt"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/spans"
)

// Node is a span with its children, in start order.
type Node struct {
	Span     *Span
	Children []*Node
}

// maxTreeDepth bounds how deep a tree is built: a span deeper than this
// is made a root, so that no view recurses without bound on a hostile
// chain.
const maxTreeDepth = 64

// Trees builds the trees of one trace's spans, in start order (it sorts
// ss), and reports what kept a span from its parent: a span id used twice
// (the later span is a root and parents nothing), a span naming itself as
// parent, a parent chain that loops back on itself (cut at the span that
// closes the loop), and a chain deeper than 64. Such spans become roots,
// so that every span is in the trees exactly once and no view ever loops.
// A span whose parent is not among ss is a root. A span that ends before
// it starts is reported too: the views leave its length out. The list of
// problems is bounded; the last says how many more there were.
func Trees(ss []Span) ([]*Node, []string) {
	roots, problems, _ := buildTrees(ss)
	return roots, problems
}

// buildTrees is [Trees], which also returns how many spans had a
// problem: the list of problems is bounded, the count is not.
func buildTrees(ss []Span) ([]*Node, []string, int) {
	sortByStart(ss)
	var problems []string
	count := 0
	report := func(format string, args ...any) {
		count++
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	nodes := make(map[string]*Node, len(ss))
	all := make([]*Node, len(ss))
	for i := range ss {
		n := &Node{Span: &ss[i]}
		all[i] = n
		if ss[i].End.Before(ss[i].Start) {
			report("%s %s ends before it starts; its length is not shown", sanitize.Display(ss[i].Name, 60), sanitize.Display(ss[i].SpanID, 40))
		}
		if _, dup := nodes[ss[i].SpanID]; dup {
			report("span id %s is used by more than one span; %s is shown as a root", sanitize.Display(ss[i].SpanID, 40), sanitize.Display(ss[i].Name, 60))
			continue
		}
		nodes[ss[i].SpanID] = n
	}
	parent := make(map[*Node]*Node, len(ss))
	for _, n := range all {
		s := n.Span
		if s.ParentID == "" || nodes[s.SpanID] != n {
			continue
		}
		if s.ParentID == s.SpanID {
			report("span %s (%s) names itself as its parent; shown as a root", sanitize.Display(s.SpanID, 40), sanitize.Display(s.Name, 60))
			continue
		}
		if p, ok := nodes[s.ParentID]; ok {
			parent[n] = p
		}
	}
	// Cut loops: walk each chain up, marking the nodes of this walk; a
	// node met twice on one walk closes a loop, and loses its parent.
	state := make(map[*Node]int8, len(ss)) // 0 new, 1 on this walk, 2 done
	var chain []*Node
	for _, n := range all {
		chain = chain[:0]
		for m := n; m != nil && state[m] == 0; m = parent[m] {
			state[m] = 1
			chain = append(chain, m)
			if p := parent[m]; p != nil && state[p] == 1 {
				report("spans %s and %s are each other's ancestors; %s is shown as a root", sanitize.Display(m.Span.SpanID, 40), sanitize.Display(p.Span.SpanID, 40), sanitize.Display(m.Span.Name, 60))
				delete(parent, m)
			}
		}
		for _, m := range chain {
			state[m] = 2
		}
	}
	depth := make(map[*Node]int, len(ss))
	depthOf := func(n *Node) int {
		// Iterative: a chain of a million spans must not grow the stack.
		var up []*Node
		m := n
		for ; m != nil; m = parent[m] {
			if _, ok := depth[m]; ok {
				break
			}
			up = append(up, m)
		}
		d := -1
		if m != nil {
			d = depth[m]
		}
		for i := len(up) - 1; i >= 0; i-- {
			d++
			if d > maxTreeDepth {
				if d == maxTreeDepth+1 {
					report("a chain of spans is deeper than %d; %s is shown as a root", maxTreeDepth, sanitize.Display(up[i].Span.Name, 60))
				}
				delete(parent, up[i])
				d = 0
			}
			depth[up[i]] = d
		}
		return depth[n]
	}
	var roots []*Node
	for _, n := range all {
		depthOf(n)
	}
	for _, n := range all {
		if p := parent[n]; p != nil {
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	if count > len(problems) {
		problems = append(problems, fmt.Sprintf("%d more problems not shown", count-len(problems)))
	}
	return roots, problems, count
}

// maxProblems bounds the problems one trace reports.
const maxProblems = 20

// Named returns the children of n named name.
func (n *Node) named(name string) []*Node {
	var out []*Node
	for _, c := range n.Children {
		if c.Span.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// scopeKind is the kind of stage a request or stage span stands for.
type scopeKind int

const (
	kindOther scopeKind = iota
	kindDiffusion
	kindLLM
	kindMulti // a request span whose stages are omni.stage children
)

func kindOf(n *Node) scopeKind {
	if n.Span.Name == spans.RequestSpanName && len(n.named(spans.StageSpanName)) > 0 {
		return kindMulti
	}
	switch n.Span.Str(string(attrs.StageTypeKey)) {
	case attrs.StageLLM:
		return kindLLM
	case attrs.StageDiffusion:
		return kindDiffusion
	}
	for _, c := range n.Children {
		if p, ok := plan.LookupSpanName(c.Span.Name); ok {
			if p >= plan.LLMQueue && p <= plan.LLMDecode {
				return kindLLM
			}
			if p < plan.LLMQueue {
				return kindDiffusion
			}
		}
	}
	if n.Span.Name == spans.RequestSpanName {
		// A single-stage request with no phase at all (aborted before
		// anything was measured) is still read as a diffusion request.
		return kindDiffusion
	}
	return kindOther
}

// scopePhases are the phases expected directly under a scope of a kind, in
// tree order.
func scopePhases(k scopeKind) []spans.Phase {
	switch k {
	case kindDiffusion:
		return plan.ScopePhases(false)
	case kindLLM:
		return plan.ScopePhases(true)
	}
	return nil
}

// visit calls f on every node of the trees in tree order (a node before its
// children, siblings in order), and goes below a node only when f returns
// true. It walks with a stack of its own: a tree's depth costs no call
// depth.
func visit(roots []*Node, f func(*Node) bool) {
	stack := make([]*Node, 0, len(roots))
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, roots[i])
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !f(n) {
			continue
		}
		for i := len(n.Children) - 1; i >= 0; i-- {
			stack = append(stack, n.Children[i])
		}
	}
}

// requestNodes returns the request spans of the trees, in the trees'
// order: roots, under another span (a gateway's server span, say), or
// under another request.
func requestNodes(roots []*Node) []*Node {
	var out []*Node
	visit(roots, func(n *Node) bool {
		if n.Span.Name == spans.RequestSpanName {
			out = append(out, n)
		}
		return true
	})
	return out
}

// lengthUnmeasured reports whether s is a span whose duration its record
// did not give (an imported stage with nothing of its own measured).
func lengthUnmeasured(s *Span) bool {
	v, _ := s.Bool(string(omnikeys.LengthUnmeasured))
	return v
}
