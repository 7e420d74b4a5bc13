// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"context"
	"io"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporter is a span exporter that shows traces in a terminal: it writes
// each request's waterfall to its writer as soon as the request's trace is
// complete in this process, and adds it to a [Summary]. Use it where an
// OTLP exporter would go, such as the fallback exporter of
// otelsetup.Setup, to see traces with no backend at all; or wrap it in
// sdktrace.NewSimpleSpanProcessor to see them beside an OTLP export.
//
// A trace is complete when its local root ends (the omni.request span, or
// a stage span in a stage's own process). At most 10 000 incomplete traces
// are held; beyond, the oldest is dropped.
type Exporter struct {
	mu        sync.Mutex
	w         io.Writer
	summary   *Summary
	collector collector
	quiet     bool
}

// ExporterOption configures an [Exporter].
type ExporterOption func(*Exporter)

// WithoutWaterfalls keeps the exporter from writing waterfalls: it only
// adds each trace to its summary.
func WithoutWaterfalls() ExporterOption {
	return func(e *Exporter) { e.quiet = true }
}

// NewExporter returns an Exporter that writes to w.
func NewExporter(w io.Writer, opts ...ExporterOption) *Exporter {
	e := &Exporter{w: w, summary: &Summary{}}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	e.collector.onTrace = e.show
	return e
}

func (e *Exporter) show(trace []Span) {
	e.summary.Add(trace)
	if e.quiet {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	Waterfall(e.w, trace)
}

// ExportSpans groups spans by trace and shows each trace once complete.
func (e *Exporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	for _, s := range ss {
		e.collector.onEnd(s)
	}
	return nil
}

// Shutdown does nothing: what is incomplete stays unshown.
func (e *Exporter) Shutdown(context.Context) error { return nil }

// Summary returns the summary of every trace shown so far.
func (e *Exporter) Summary() *Summary { return e.summary }
