// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/jaegerquery"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

// Outcome is what the backend holds of one request.
type Outcome struct {
	Request
	// Kept says its trace is in the backend; TraceID names it.
	Kept    bool
	TraceID string
	// Problems says what is wrong with a kept trace: a span missing or too
	// many, too few processes. None for a complete trace.
	Problems []string
	// Duration is the omni.request span's; Queue the longest queue wait's.
	Duration, Queue time.Duration
	// Failed says the request span has status Error.
	Failed bool
	// Processes is how many processes its spans came from.
	Processes int
}

// Report is the backend's content checked against the requests made.
type Report struct {
	// Outcomes has one entry per request, in the order given.
	Outcomes []*Outcome
	// Strays describes every trace in the backend that is not one whole
	// request: several roots, a root that is not a known request's
	// omni.request, a second trace for the same request.
	Strays []string
	// Traces is how many distinct traces the backend holds.
	Traces int
}

// Complete reports whether every kept trace is complete and nothing else
// is in the backend.
func (r Report) Complete() bool {
	if len(r.Strays) > 0 {
		return false
	}
	for _, o := range r.Outcomes {
		if o.Kept && len(o.Problems) > 0 {
			return false
		}
	}
	return true
}

// Kept counts the requests whose trace is in the backend.
func (r Report) Kept() int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Kept {
			n++
		}
	}
	return n
}

// Check reads every trace of every service the backend knows, started
// between from and to, and checks them against the requests made.
func Check(ctx context.Context, c *jaegerquery.Client, from, to time.Time, reqs []Request) (Report, error) {
	services, err := listServices(ctx, c.Base)
	if err != nil {
		return Report{}, err
	}
	traces := map[string][]traceview.Span{}
	for _, svc := range services {
		ss, err := c.Search(ctx, svc, from, to, 2*len(reqs)+100)
		if err != nil {
			return Report{}, err
		}
		for id, tr := range traceview.ByTrace(ss) {
			traces[id] = tr
		}
	}
	byID := map[string]*Outcome{}
	rep := Report{Traces: len(traces)}
	for _, r := range reqs {
		o := &Outcome{Request: r}
		rep.Outcomes = append(rep.Outcomes, o)
		byID[r.ID] = o
	}
	ids := make([]string, 0, len(traces))
	for id := range traces {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, tid := range ids {
		tr := traces[tid]
		roots, _ := traceview.Trees(tr)
		if len(roots) != 1 || roots[0].Span.Name != spans.RequestSpanName {
			rep.Strays = append(rep.Strays, fmt.Sprintf("trace %s: %d spans in %d trees, first root %s",
				tid, len(tr), len(roots), sanitize.String(roots[0].Span.Name, 64)))
			continue
		}
		root := roots[0].Span
		o := byID[root.Str(string(attrs.RequestIDKey))]
		if o == nil || o.Kept {
			rep.Strays = append(rep.Strays, fmt.Sprintf("trace %s: request %q unknown or traced twice",
				tid, sanitize.String(root.Str(string(attrs.RequestIDKey)), 64)))
			continue
		}
		o.Kept, o.TraceID = true, tid
		o.examine(tr, root)
	}
	return rep, nil
}

// examine fills in what a kept trace shows and what is wrong with it.
func (o *Outcome) examine(tr []traceview.Span, root *traceview.Span) {
	o.Duration = root.Duration()
	o.Failed = root.StatusCode == codes.Error
	counts := map[string]int{}
	pids := map[int64]bool{}
	for i := range tr {
		s := &tr[i]
		counts[s.Name]++
		pids[s.PID] = true
		if s.Name == plan.LLMQueue.SpanName() || s.Name == spans.QueueWait.SpanName() {
			o.Queue = max(o.Queue, s.Duration())
		}
	}
	o.Processes = len(pids)
	want := pipeline.ExpectScenario(o.Pipeline, o.Special)
	names := map[string]bool{}
	for n := range want {
		names[n] = true
	}
	for n := range counts {
		names[n] = true
	}
	for n := range names {
		if counts[n] != want[n] {
			o.Problems = append(o.Problems, fmt.Sprintf("%d %s spans, want %d", counts[n], sanitize.String(n, 64), want[n]))
		}
	}
	sort.Strings(o.Problems)
	// The gateway and one process per stage.
	if wantPIDs := len(pipeline.Pipelines[o.Pipeline]) + 1; o.Processes != wantPIDs {
		o.Problems = append(o.Problems, fmt.Sprintf("spans from %d processes, want %d", o.Processes, wantPIDs))
	}
}

// listServices reads the services the backend has spans of.
func listServices(ctx context.Context, base string) ([]string, error) {
	b, err := get(ctx, base+"/api/v3/services", 1<<20)
	if err != nil {
		return nil, err
	}
	var body struct{ Services []string }
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	return body.Services, nil
}
