// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/codes"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/spans"
)

// Bounds of what one cell of a view prints, in bytes.
const (
	maxIDCell      = 128 // a request or trace id
	maxNameCell    = 40  // a stage name, a model, an error type
	maxMessageCell = 200 // a status message
)

// maxOutputRows bounds the outputs a waterfall shows one by one.
const maxOutputRows = 16

// waterfallWidth is the width of the timeline, in characters.
const waterfallWidth = 48

// labelWidth is the width of the row labels.
const labelWidth = 30

// Waterfall writes one waterfall per omni.request tree of a trace (a root,
// or under another span such as a gateway's; a stage span in its own
// process likewise): one row
// per expected phase in tree order, a bar placed on the request's own
// timeline, and the phase's duration in ms, or "not measured" where the
// phase has no span. Phases are never added together.
func Waterfall(w io.Writer, trace []Span) {
	var last time.Time
	for i := range trace {
		if trace[i].End.After(last) {
			last = trace[i].End
		}
	}
	var scopes []*Node
	roots, _ := Trees(trace)
	for _, root := range roots {
		switch root.Span.Name {
		case plan.EngineStartSpanName:
			engineWaterfall(w, root)
		case plan.BatchSpanName:
			batchLine(w, root.Span)
		default:
			// A request, or a stage in its own process, is a root or hangs
			// under another span (a gateway's server span, say); a request
			// may hang under another request.
			scopes = append(scopes, scopeNodes(root)...)
		}
	}
	for _, root := range scopes {
		wf := waterfall{w: w, t0: root.Span.Start, total: root.Span.Duration()}
		if d := last.Sub(wf.t0); d > wf.total {
			wf.total = d
		}
		wf.header(root.Span)
		wf.scope(root, 1)
		fmt.Fprintln(w)
	}
}

type waterfall struct {
	w     io.Writer
	t0    time.Time
	total time.Duration
}

func (wf *waterfall) header(s *Span) {
	var b strings.Builder
	if s.Name == spans.StageSpanName {
		fmt.Fprintf(&b, "%s %s (%s)", s.Name, sanitize.Display(s.Str(string(attrs.StageNameKey)), maxNameCell),
			sanitize.Display(s.Str(string(attrs.StageTypeKey)), maxNameCell))
	} else {
		fmt.Fprintf(&b, "%s %q", s.Name, sanitize.Display(s.Str(string(attrs.RequestIDKey)), maxIDCell))
	}
	for _, k := range []string{string(attrs.OutputModalityKey), string(semconv.GenAIRequestModelKey)} {
		if v := s.Str(k); v != "" {
			fmt.Fprintf(&b, " %s", sanitize.Display(v, maxNameCell))
		}
	}
	fmt.Fprintf(&b, "  %.3f ms", ms(s.Duration()))
	if s.StatusCode == codes.Error {
		fmt.Fprintf(&b, "  ERROR %s: %s", sanitize.Display(s.Str(string(semconv.ErrorTypeKey)), maxNameCell), sanitize.Display(s.StatusMessage, maxMessageCell))
	}
	fmt.Fprintln(wf.w, b.String())
	fmt.Fprintf(wf.w, "  %-*s |%s| %12s\n", labelWidth-2, "phase", timelineLabel(wf.total), "ms")
}

func timelineLabel(total time.Duration) string {
	l := fmt.Sprintf("0 .. %.0f ms", ms(total))
	if len(l) >= waterfallWidth {
		return l[:waterfallWidth]
	}
	return l + strings.Repeat(" ", waterfallWidth-len(l))
}

// scope writes the rows under a request or stage span.
func (wf *waterfall) scope(n *Node, depth int) {
	k := kindOf(n)
	if k == kindMulti {
		for _, c := range n.Children {
			switch c.Span.Name {
			case spans.StageSpanName:
				label := fmt.Sprintf("stage %s (%s)", sanitize.Display(c.Span.Str(string(attrs.StageNameKey)), maxNameCell), sanitize.Display(c.Span.Str(string(attrs.StageTypeKey)), maxNameCell))
				wf.row(depth, label, c.Span)
				wf.scope(c, depth+1)
			case plan.TransferSpanName:
				from, _ := c.Span.Int(string(attrs.TransferFromStageKey))
				to, _ := c.Span.Int(string(attrs.TransferToStageKey))
				wf.row(depth, fmt.Sprintf("transfer %d->%d", from, to), c.Span)
				wf.phases(c, plan.TransferParts(), depth+1)
			default:
				wf.other(c, depth)
			}
		}
		return
	}
	wf.phases(n, scopePhases(k), depth)
	for _, c := range n.named(plan.OutputSpanName) {
		wf.other(c, depth)
	}
}

// phases writes a row per expected phase under n, "not measured" for one
// with no span, and recurses into the phases that others nest in.
func (wf *waterfall) phases(n *Node, expected []spans.Phase, depth int) {
	perOutput := outputIndices(n)
	for _, p := range expected {
		if perOutput != nil && plan.PerOutput(p) {
			if p == spans.OutputReadyWait {
				wf.outputs(n, perOutput, depth)
			}
			continue
		}
		found := n.named(p.SpanName())
		if p == spans.DenoiseStep {
			wf.steps(found, depth)
			continue
		}
		if len(found) == 0 {
			wf.absent(depth, p.String())
			continue
		}
		for _, c := range found {
			wf.row(depth, phaseLabel(p, c.Span), c.Span)
			if nested := plan.NestedPhases(p); nested != nil {
				wf.phases(c, nested, depth+1)
			}
		}
	}
}

// outputIndices returns the output indices that n's per-output phases
// carry, in order, or nil when they carry none (a single-output request).
func outputIndices(n *Node) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, c := range n.Children {
		if p, ok := plan.LookupSpanName(c.Span.Name); ok && plan.PerOutput(p) {
			if i, ok := c.Span.Int(string(attrs.OutputIndexKey)); ok && !seen[i] {
				seen[i] = true
				out = append(out, i)
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// outputs writes, output by output, its wait and its postprocess, so that
// a synchronous output shows that it had no wait.
func (wf *waterfall) outputs(n *Node, indices []int64, depth int) {
	// Index the per-output spans once: a request can have thousands.
	byOutput := map[[2]int64][]*Node{}
	for _, c := range n.Children {
		if p, ok := plan.LookupSpanName(c.Span.Name); ok && plan.PerOutput(p) {
			if j, ok := c.Span.Int(string(attrs.OutputIndexKey)); ok {
				k := [2]int64{int64(p), j}
				byOutput[k] = append(byOutput[k], c)
			}
		}
	}
	hidden := 0
	if len(indices) > maxOutputRows {
		// A person reads the first outputs and the last one.
		hidden = len(indices) - maxOutputRows
		indices = append(indices[:maxOutputRows-1:maxOutputRows-1], indices[len(indices)-1])
	}
	for k, i := range indices {
		if hidden > 0 && k == len(indices)-1 {
			fmt.Fprintf(wf.w, "  %-*s  (%d more outputs not shown)\n", labelWidth-2, indent(depth-1)+"...", hidden)
		}
		for _, p := range []spans.Phase{spans.OutputReadyWait, spans.Postprocess} {
			found := byOutput[[2]int64{int64(p), i}]
			if len(found) == 0 {
				wf.absent(depth, fmt.Sprintf("%s #%d", p.String(), i))
			}
			for _, c := range found {
				wf.row(depth, phaseLabel(p, c.Span), c.Span)
			}
		}
	}
}

// steps writes per-step spans (opt-in): one row each for a few, a summary
// row for many.
func (wf *waterfall) steps(found []*Node, depth int) {
	if len(found) <= 4 {
		for _, c := range found {
			wf.row(depth, phaseLabel(spans.DenoiseStep, c.Span), c.Span)
		}
		return
	}
	first, last := found[0].Span, found[len(found)-1].Span
	agg := Span{Start: first.Start, End: last.End}
	wf.row(depth, fmt.Sprintf("denoise_step x%d", len(found)), &agg)
}

func phaseLabel(p spans.Phase, s *Span) string {
	label := p.String()
	if i, ok := s.Int(string(attrs.OutputIndexKey)); ok {
		label += fmt.Sprintf(" #%d", i)
		if f, _ := s.Bool(string(attrs.OutputFinalKey)); f {
			label += " final"
		}
	}
	if i, ok := s.Int(string(attrs.StepKey)); ok {
		label += fmt.Sprintf(" @%d", i)
	}
	if b := s.Str(string(attrs.BatchIDKey)); b != "" {
		label += " in " + sanitize.Display(b, 12)
	}
	return label
}

func (wf *waterfall) other(c *Node, depth int) {
	label := sanitize.Display(c.Span.Name, maxNameCell)
	if c.Span.Name == plan.OutputSpanName {
		label = "output"
		if i, ok := c.Span.Int(string(attrs.OutputIndexKey)); ok {
			label += fmt.Sprintf(" #%d", i)
		}
		if f, _ := c.Span.Bool(string(attrs.OutputFinalKey)); f {
			label += " final"
		}
	}
	wf.row(depth, label, c.Span)
}

func (wf *waterfall) absent(depth int, label string) {
	fmt.Fprintf(wf.w, "  %-*s  %-*s %12s\n", labelWidth-2, indent(depth-1)+label, waterfallWidth, "", "not measured")
}

func (wf *waterfall) row(depth int, label string, s *Span) {
	mark := ""
	if s.StatusCode == codes.Error {
		mark = "  !"
	}
	fmt.Fprintf(wf.w, "  %-*s |%s| %12.3f%s\n", labelWidth-2, indent(depth-1)+label, wf.bar(s), ms(s.Duration()), mark)
}

// bar places s on the request's timeline. A zero-length span is a thin
// mark at its place; any other span is at least one full cell.
func (wf *waterfall) bar(s *Span) string {
	cells := []rune(strings.Repeat("·", waterfallWidth))
	if wf.total <= 0 {
		return string(cells)
	}
	pos := func(t time.Time) float64 {
		f := float64(t.Sub(wf.t0)) / float64(wf.total) * waterfallWidth
		return min(max(f, 0), waterfallWidth)
	}
	a, b := pos(s.Start), pos(s.End)
	i, j := int(a), int(b+0.999)
	if s.End.Equal(s.Start) {
		cells[min(i, waterfallWidth-1)] = '│'
		return string(cells)
	}
	if j <= i {
		j = i + 1
	}
	for k := i; k < j && k < waterfallWidth; k++ {
		cells[k] = '█'
	}
	return string(cells)
}

func indent(depth int) string { return strings.Repeat("  ", max(depth, 0)) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// engineWaterfall writes the engine's start: one row per step.
func engineWaterfall(w io.Writer, root *Node) {
	wf := waterfall{w: w, t0: root.Span.Start, total: root.Span.Duration()}
	fmt.Fprintf(w, "%s %s  %.3f ms\n", root.Span.Name, sanitize.Display(root.Span.Str(string(attrs.EngineModelKey)), maxNameCell), ms(root.Span.Duration()))
	fmt.Fprintf(w, "  %-*s |%s| %12s\n", labelWidth-2, "step", timelineLabel(wf.total), "ms")
	for _, c := range root.Children {
		label := strings.TrimPrefix(c.Span.Name, "omni.engine.")
		if m := c.Span.Str(string(attrs.EngineModelKey)); m != "" {
			label += " " + m
		} else if n := c.Span.Str(string(attrs.StageNameKey)); n != "" {
			label += " " + n
		}
		wf.row(1, sanitize.Display(label, labelWidth-2), c.Span)
	}
	fmt.Fprintln(w)
}

// batchLine writes one batch: its id, size and the execs it links to.
func batchLine(w io.Writer, s *Span) {
	size, _ := s.Int(string(attrs.BatchSizeKey))
	fmt.Fprintf(w, "%s %q of %d requests (%s)  %.3f ms, linked to %d member execs\n\n", s.Name,
		sanitize.Display(s.Str(string(attrs.BatchIDKey)), maxIDCell), size, sanitize.Display(s.Str(string(semconv.GenAIRequestModelKey)), maxNameCell),
		ms(s.Duration()), len(s.Links))
}

// scopeNodes returns the requests of a tree, nested ones too, then the
// stage spans that hang under no request (a stage's own process). A stage
// inside a request is drawn with its request.
func scopeNodes(root *Node) []*Node {
	out := requestNodes([]*Node{root})
	visit([]*Node{root}, func(n *Node) bool {
		switch n.Span.Name {
		case spans.RequestSpanName:
			return false
		case spans.StageSpanName:
			out = append(out, n)
			return false
		}
		return true
	})
	return out
}
