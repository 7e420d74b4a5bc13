// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package tracetable writes omnitrace's per-request table of a trace:
// rows are phases, columns are stages and hand-overs, each cell a duration
// in ms, laid out as vLLM-Omni's per-request debug table.
package tracetable

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/critpath"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

type (
	span = traceview.Span
	node = traceview.Node
)

// Write writes the per-request table of each omni.request span of a trace
// (a root, or under another span, such as a gateway's server span), or of
// those whose omni.request.id is one of requestIDs when any is given, and
// returns how many it wrote. Each is laid out as vLLM-Omni's per-request
// debug table: rows are phases, columns are
// stages (and hand-overs), each cell the phase's duration in ms. A phase that
// was not measured leaves its cell blank, never 0.000; a measured 0 shows
// 0.000. Rows with nothing measured are hidden. Cells are never sums: a
// phase measured twice in one stage shows both values.
//
// Every string from the trace is bounded (see sanitize.Display), and so are the
// columns, rows and values per cell, so that the table stays what a person
// can read whatever the trace holds. Spans that could not be placed in the
// tree (a shared id, a loop of parents) are noted under the table.
func Write(w io.Writer, trace []traceview.Span, requestIDs ...string) int {
	return WriteWith(w, trace, Options{}, requestIDs...)
}

// Options change what [WriteWith] writes.
type Options struct {
	// Critical marks with * each cell whose span held part of the
	// request's critical path (see critpath), and says under the table
	// how much of the request the path gave to no phase.
	Critical bool
}

// WriteWith is [Write] with options.
func WriteWith(w io.Writer, trace []traceview.Span, o Options, requestIDs ...string) int {
	roots, problems := traceview.Trees(trace)
	requests := requestNodes(roots)
	if len(requestIDs) > 0 {
		requests = slices.DeleteFunc(requests, func(n *node) bool {
			return !slices.Contains(requestIDs, n.Span.Str(string(attrs.RequestIDKey)))
		})
	}
	shown := requests
	if len(shown) > maxTables {
		shown = shown[:maxTables]
	}
	var paths *critpath.Trace
	for _, root := range shown {
		t := newTable()
		var own time.Duration
		if o.Critical {
			if paths == nil {
				paths = critpath.New(roots)
			}
			t.critical = map[*span]bool{}
			for _, seg := range paths.Path(root) {
				t.critical[seg.Node.Span] = true
				if seg.Node == root {
					own += seg.Duration()
				}
			}
		}
		if kindOf(root) == kindMulti {
			for _, c := range root.Children {
				switch c.Span.Name {
				case spans.StageSpanName:
					id, _ := c.Span.Int(string(attrs.StageIDKey))
					col := t.column(fmt.Sprintf("%d %s", id, sanitize.Display(c.Span.Str(string(attrs.StageNameKey)), maxNameCell)), int(id)*2+1)
					if !lengthUnmeasured(c.Span) {
						t.set("stage", 0, col, c.Span)
					}
					t.scope(c, col)
				case plan.TransferSpanName:
					from, _ := c.Span.Int(string(attrs.TransferFromStageKey))
					to, _ := c.Span.Int(string(attrs.TransferToStageKey))
					col := t.column(fmt.Sprintf("%d->%d", from, to), int(from)*2+2)
					t.set("transfer", 0, col, c.Span)
					t.phases(c, plan.TransferParts(), col)
				}
			}
		} else {
			name := sanitize.Display(root.Span.Str(string(attrs.StageNameKey)), maxNameCell)
			if name == "" {
				name = "request"
			}
			t.scope(root, t.column(name, 0))
		}
		s := root.Span
		status := ""
		if et := s.Str(string(semconv.ErrorTypeKey)); et != "" {
			status = "  error.type=" + sanitize.Display(et, maxNameCell)
		}
		length := fmt.Sprintf("%.3f ms", ms(s.Duration()))
		if s.Duration() < 0 {
			length = "length not shown" // ends before it starts: noted below
		}
		fmt.Fprintf(w, "request %q  trace %s  %s%s\n", sanitize.Display(s.Str(string(attrs.RequestIDKey)), maxIDCell), sanitize.Display(s.TraceID, maxIDCell), length, status)
		t.write(w)
		if o.Critical {
			fmt.Fprintf(w, "  * on the critical path (the spans that decided when the request ended); %.3f ms of it in no phase\n", ms(own))
		}
		fmt.Fprintln(w)
	}
	if n := len(requests) - len(shown); n > 0 {
		fmt.Fprintf(w, "note: %d more requests in this trace not shown (name one with -request)\n", n)
	}
	for _, p := range problems {
		fmt.Fprintf(w, "note: %s\n", p)
	}
	return len(shown)
}

// maxTables bounds the tables written of one trace: a trace of a million
// request spans must not print a million tables.
const maxTables = 100

// lengthUnmeasured reports whether s is a span whose duration its record
// did not give (an imported stage with nothing of its own measured).
func lengthUnmeasured(s *span) bool {
	v, _ := s.Bool(string(omnikeys.LengthUnmeasured))
	return v
}

// requestNodes returns the request spans of the trees, in the trees'
// order: roots, under another span (a gateway's server span, say), or
// under another request.
func requestNodes(roots []*node) []*node {
	var out []*node
	for _, n := range roots {
		// Trees are at most 65 deep: the recursion is bounded.
		if n.Span.Name == spans.RequestSpanName {
			out = append(out, n)
		}
		out = append(out, requestNodes(n.Children)...)
	}
	return out
}

// named returns the children of n named name.
func named(n *node, name string) []*node {
	var out []*node
	for _, c := range n.Children {
		if c.Span.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// The table reads the tree as traceview's waterfall and summary read it
// (TestTheTableAndTheSummaryReadTheSameTree holds them to it): a request
// with omni.stage children is a multi-stage request, otherwise its stage
// type, or the phases under it, tell its kind, which tells the phases
// expected under it.

// scopeKind is the kind of stage a request or stage span stands for.
type scopeKind int

const (
	kindOther scopeKind = iota
	kindDiffusion
	kindLLM
	kindMulti // a request span whose stages are omni.stage children
)

func kindOf(n *node) scopeKind {
	if n.Span.Name == spans.RequestSpanName && len(named(n, spans.StageSpanName)) > 0 {
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

// Bounds of what one cell prints, in bytes.
const (
	maxIDCell   = 128 // a request or trace id
	maxNameCell = 40  // a stage name
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Bounds of one table.
const (
	maxColumns    = 16 // stages and hand-overs
	maxRows       = 64 // phases, and outputs of a streaming request
	maxCellValues = 4  // values of one phase in one cell
)

type table struct {
	cols  []tableCol
	rows  map[string]*tableRow
	order []string
	// hiddenCols and hiddenRows count what the bounds left out.
	hiddenCols, hiddenRows int
	// critical holds the spans on the critical path, when marked.
	critical map[*span]bool
}

type tableCol struct {
	name string
	rank int
}

type tableRow struct {
	label string
	rank  int
	cells map[int][]cellValue
}

// cellValue is one span's duration in a cell, and whether the span held
// part of the critical path.
type cellValue struct {
	d        time.Duration
	critical bool
}

func newTable() *table { return &table{rows: map[string]*tableRow{}} }

// column adds a column and returns its index, or -1 beyond maxColumns.
func (t *table) column(name string, rank int) int {
	if len(t.cols) >= maxColumns {
		t.hiddenCols++
		return -1
	}
	t.cols = append(t.cols, tableCol{name, rank})
	return len(t.cols) - 1
}

func (t *table) set(label string, rank, col int, s *span) {
	d := s.Duration()
	if col < 0 || d < 0 {
		return // a span that ends before it starts is noted, never shown
	}
	r := t.rows[label]
	if r == nil {
		if len(t.order) >= maxRows {
			t.hiddenRows++
			return
		}
		r = &tableRow{label: label, rank: rank, cells: map[int][]cellValue{}}
		t.rows[label] = r
		t.order = append(t.order, label)
	}
	r.cells[col] = append(r.cells[col], cellValue{d, t.critical[s]})
}

func (t *table) scope(n *node, col int) {
	if col < 0 {
		return
	}
	k := kindOf(n)
	t.phases(n, scopePhases(k), col)
	for i, c := range named(n, plan.OutputSpanName) {
		label := "output"
		if idx, ok := c.Span.Int(string(attrs.OutputIndexKey)); ok {
			label = fmt.Sprintf("output #%d", idx)
		} else {
			label = fmt.Sprintf("output #%d", i)
		}
		t.set(label, plan.NumPhases*100+i, col, c.Span)
	}
}

func (t *table) phases(n *node, expected []spans.Phase, col int) {
	for _, p := range expected {
		if p == spans.DenoiseStep {
			continue // one row per step would drown the table
		}
		for _, c := range named(n, p.SpanName()) {
			label, rank := p.String(), int(p)*100
			if i, ok := c.Span.Int(string(attrs.OutputIndexKey)); ok {
				// Per-output rows sort by output, then phase.
				label = fmt.Sprintf("%s #%d", p.String(), i)
				rank = int(spans.OutputReadyWait)*100 + int(i)*2
				if p == spans.Postprocess {
					rank++
				}
			}
			t.set(label, rank, col, c.Span)
			if nested := plan.NestedPhases(p); nested != nil {
				t.phases(c, nested, col)
			}
		}
	}
}

func (t *table) write(w io.Writer) {
	cols := make([]int, len(t.cols))
	for i := range cols {
		cols[i] = i
	}
	sort.SliceStable(cols, func(a, b int) bool { return t.cols[cols[a]].rank < t.cols[cols[b]].rank })
	rows := make([]*tableRow, 0, len(t.order))
	for _, l := range t.order {
		rows = append(rows, t.rows[l]) // a row exists only once something was measured
	}
	sort.SliceStable(rows, func(a, b int) bool { return rows[a].rank < rows[b].rank })
	width := 14
	for _, c := range t.cols {
		width = max(width, len(c.name)+2)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %-22s", "phase (ms)")
	for _, c := range cols {
		fmt.Fprintf(&b, "%*s", width, t.cols[c].name)
	}
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	for _, r := range rows {
		b.Reset()
		fmt.Fprintf(&b, "  %-22s", r.label)
		for _, c := range cols {
			cell := ""
			if ds := r.cells[c]; len(ds) > 0 {
				vals := make([]string, 0, maxCellValues+1)
				for i, v := range ds {
					if i == maxCellValues {
						vals = append(vals, fmt.Sprintf("+%d more", len(ds)-i))
						break
					}
					mark := ""
					if v.critical {
						mark = "*"
					}
					vals = append(vals, fmt.Sprintf("%.3f%s", ms(v.d), mark))
				}
				cell = strings.Join(vals, "/")
			}
			fmt.Fprintf(&b, "%*s", width, cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	if t.hiddenCols > 0 || t.hiddenRows > 0 {
		fmt.Fprintf(w, "  (%d more stage or hand-over columns and %d more rows not shown)\n", t.hiddenCols, t.hiddenRows)
	}
}
