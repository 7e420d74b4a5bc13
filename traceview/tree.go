package traceview

import (
	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// Node is a span with its children, in start order.
type Node struct {
	Span     *Span
	Children []*Node
}

// Trees builds the trees of one trace's spans. A span whose parent is not
// among them is a root.
func Trees(ss []Span) []*Node {
	sortByStart(ss)
	nodes := make(map[string]*Node, len(ss))
	for i := range ss {
		nodes[ss[i].SpanID] = &Node{Span: &ss[i]}
	}
	var roots []*Node
	for i := range ss {
		n := nodes[ss[i].SpanID]
		if p, ok := nodes[ss[i].ParentID]; ok && ss[i].ParentID != "" {
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	return roots
}

// Named returns the children of n named name.
func (n *Node) Named(name string) []*Node {
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
	if n.Span.Name == spans.RequestSpanName && len(n.Named(spans.StageSpanName)) > 0 {
		return kindMulti
	}
	switch n.Span.Str(string(attrs.StageTypeKey)) {
	case attrs.StageLLM:
		return kindLLM
	case attrs.StageDiffusion:
		return kindDiffusion
	}
	for _, c := range n.Children {
		if p, ok := spans.LookupSpanName(c.Span.Name); ok {
			if p >= spans.LLMQueue && p <= spans.LLMDecode {
				return kindLLM
			}
			if p < spans.LLMQueue {
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
		return []spans.Phase{spans.QueueWait, spans.Preprocess, spans.Exec, spans.OutputReadyWait, spans.Postprocess}
	case kindLLM:
		return []spans.Phase{spans.LLMQueue, spans.LLMPrefill, spans.LLMDecode}
	}
	return nil
}

// nestedPhases are the phases expected under a phase span.
func nestedPhases(p spans.Phase) []spans.Phase {
	switch p {
	case spans.Exec:
		return []spans.Phase{spans.KVRecv, spans.Forward, spans.VAEDecode}
	case spans.Forward:
		return []spans.Phase{spans.DenoiseStep}
	}
	return nil
}

var transferParts = []spans.Phase{spans.TransferTx, spans.TransferInFlight, spans.TransferRxDecode}
