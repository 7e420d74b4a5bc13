// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/spans"
)

// Summary aggregates many requests per phase: how many requests measured
// it, how many spans, and percentiles of the spans' durations. It never
// adds phases together; "exec per step" is a ratio of one span's duration
// to the request's step count. Safe for concurrent use.
//
// Its memory is bounded: a row keeps at most 20 000 durations, a uniform
// sample of all it saw (reservoir sampling), so that a long-running process
// can keep a Summary. Counts and the maximum stay exact; beyond 20 000 spans
// a row's percentiles are those of the sample.
type Summary struct {
	mu       sync.Mutex
	requests int
	rows     map[string]*summaryRow
	// hidden counts spans of rows beyond maxSummaryRows; problems counts
	// spans that could not be placed in their trace's tree.
	hidden, problems int
}

// maxSummaryRows bounds the rows: a row per stage name must not let a trace
// of a million stage names print a million rows.
const maxSummaryRows = 200

// maxSamples bounds the durations a row keeps.
const maxSamples = 20000

type summaryRow struct {
	label    string
	rank     [3]int
	requests int
	// spans and max are exact; durs is a uniform sample of at most
	// maxSamples durations.
	spans int
	max   time.Duration
	durs  []time.Duration
	rng   *rand.Rand
	ratio bool
}

// observe adds one duration, keeping a uniform sample.
func (r *summaryRow) observe(d time.Duration) {
	r.spans++
	if r.spans == 1 || d > r.max {
		r.max = d
	}
	if len(r.durs) < maxSamples {
		r.durs = append(r.durs, d)
		return
	}
	if r.rng == nil {
		r.rng = rand.New(rand.NewPCG(uint64(len(r.label)), 1))
	}
	if i := r.rng.IntN(r.spans); i < maxSamples {
		r.durs[i] = d
	}
}

// Add adds the requests (omni.request trees) of one trace, whether a
// request span is the trace's root or hangs under another span.
func (s *Summary) Add(trace []Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[string]*summaryRow{}
	}
	roots, _, problems := buildTrees(trace)
	s.problems += problems
	for _, root := range requestNodes(roots) {
		s.requests++
		seen := map[string]bool{}
		add := func(label string, rank [3]int, d time.Duration, ratio bool) {
			if d < 0 {
				return // ends before it starts: no length (a problem counted)
			}
			r := s.rows[label]
			if r == nil {
				if len(s.rows) >= maxSummaryRows {
					s.hidden++
					return
				}
				r = &summaryRow{label: label, rank: rank, ratio: ratio}
				s.rows[label] = r
			}
			r.observe(d)
			if !seen[label] {
				seen[label] = true
				r.requests++
			}
		}
		s.expect("request", [3]int{-1, 0, 0})
		add("request", [3]int{-1, 0, 0}, root.Span.Duration(), false)
		s.walk(root, "", 0, add)
		if steps, ok := root.Span.Int(string(attrs.NumInferenceStepsKey)); ok && steps > 0 {
			for _, e := range findAll(root, spans.Exec.SpanName()) {
				add("exec per step (ratio)", [3]int{99, 0, 0}, e.Span.Duration()/time.Duration(steps), true)
			}
		}
	}
}

// expect makes sure a row exists, so that a phase no request measured shows
// as 0, not as missing.
func (s *Summary) expect(label string, rank [3]int) {
	if s.rows[label] == nil && len(s.rows) < maxSummaryRows {
		s.rows[label] = &summaryRow{label: label, rank: rank}
	}
}

func (s *Summary) walk(n *Node, prefix string, stageRank int, add func(string, [3]int, time.Duration, bool)) {
	k := kindOf(n)
	if k == kindMulti {
		for _, c := range n.Children {
			switch c.Span.Name {
			case spans.StageSpanName:
				id, _ := c.Span.Int(string(attrs.StageIDKey))
				name := sanitize.Display(c.Span.Str(string(attrs.StageNameKey)), maxNameCell)
				if name == "" {
					name = fmt.Sprint(id) // a stage the input did not name
				}
				r := [3]int{int(id) * 2, 0, 0}
				label := "stage " + name
				s.expect(label, r)
				if !lengthUnmeasured(c.Span) {
					add(label, r, c.Span.Duration(), false)
				}
				s.walk(c, name+" ", int(id)*2, add)
			case plan.TransferSpanName:
				from, _ := c.Span.Int(string(attrs.TransferFromStageKey))
				to, _ := c.Span.Int(string(attrs.TransferToStageKey))
				label := fmt.Sprintf("transfer %d->%d", from, to)
				r := [3]int{int(from)*2 + 1, 0, 0}
				s.expect(label, r)
				add(label, r, c.Span.Duration(), false)
				s.phases(c, plan.TransferParts(), label+" ", r[0], add)
			}
		}
		return
	}
	s.phases(n, scopePhases(k), prefix, stageRank, add)
	for _, c := range n.named(plan.OutputSpanName) {
		r := [3]int{stageRank, plan.NumPhases, 0}
		s.expect(prefix+"output", r)
		add(prefix+"output", r, c.Span.Duration(), false)
	}
}

func (s *Summary) phases(n *Node, expected []spans.Phase, prefix string, stageRank int, add func(string, [3]int, time.Duration, bool)) {
	for _, p := range expected {
		label := prefix + p.String()
		r := [3]int{stageRank, int(p), 0}
		if p != spans.DenoiseStep {
			s.expect(label, r)
		}
		for _, c := range n.named(p.SpanName()) {
			add(label, r, c.Span.Duration(), false)
			if nested := plan.NestedPhases(p); nested != nil {
				s.phases(c, nested, prefix, stageRank, add)
			}
		}
	}
}

// findAll returns the descendants of n named name, not looking inside a
// nested request, which is counted on its own.
func findAll(n *Node, name string) []*Node {
	var out []*Node
	visit(n.Children, func(c *Node) bool {
		if c.Span.Name == spans.RequestSpanName {
			return false
		}
		if c.Span.Name == name {
			out = append(out, c)
		}
		return true
	})
	return out
}

// Problems returns the number of spans, over all traces added, that could
// not be placed in their tree (see [Trees]; they are counted as
// roots) or that end before they start (their length is not counted).
func (s *Summary) Problems() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.problems
}

// Requests returns the number of requests added.
func (s *Summary) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Spans returns, per row label (a phase id, "stage thinker", ...), the
// number of spans measured.
func (s *Summary) Spans() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.rows))
	for k, r := range s.rows {
		if !r.ratio {
			out[k] = r.spans
		}
	}
	return out
}

// Write prints the table: per phase, the requests that measured it out of
// all, the spans, and p50, p90, p99 and max in ms; "-" where nothing was
// measured.
func (s *Summary) Write(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := make([]*summaryRow, 0, len(s.rows))
	for _, r := range s.rows {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].rank != rows[j].rank {
			a, b := rows[i].rank, rows[j].rank
			for k := range a {
				if a[k] != b[k] {
					return a[k] < b[k]
				}
			}
		}
		return rows[i].label < rows[j].label
	})
	fmt.Fprintf(w, "%-34s %10s %6s %10s %10s %10s %10s\n", "phase", "measured", "spans", "p50 ms", "p90 ms", "p99 ms", "max ms")
	for _, r := range rows {
		d := append([]time.Duration(nil), r.durs...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		measured := fmt.Sprintf("%d/%d", r.requests, s.requests)
		if len(d) == 0 {
			fmt.Fprintf(w, "%-34s %10s %6d %10s %10s %10s %10s\n", r.label, measured, 0, "-", "-", "-", "-")
			continue
		}
		fmt.Fprintf(w, "%-34s %10s %6d %10.3f %10.3f %10.3f %10.3f\n", r.label, measured, r.spans,
			ms(percentile(d, 0.50)), ms(percentile(d, 0.90)), ms(percentile(d, 0.99)), ms(r.max))
	}
	if s.hidden > 0 {
		fmt.Fprintf(w, "(%d spans of rows beyond the first %d not shown)\n", s.hidden, maxSummaryRows)
	}
}

// percentile returns the nearest-rank q-quantile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
