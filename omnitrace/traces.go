// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"container/list"
	"fmt"
	"strings"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

// defaultMaxSpans is how many spans table and summary hold at once while
// they gather an OTLP/JSON file's spans into traces (-max-spans).
const defaultMaxSpans = 50000

// rememberedTraces is how many traces handed on a traceWindow remembers,
// to tell a span that comes after its trace was handed on.
const rememberedTraces = 1 << 16

// traceWindow gathers spans, as documents bring them, into traces, and
// hands each trace on once it has gone out of the window: at most max
// spans are held (and, of one trace larger than that, max more of its
// frame: see gathered.room), the trace whose last span came longest ago
// is handed on first. A file written one batch of spans a line (an import's -out, the
// OTLP file exporter) keeps each trace's spans close together, and Jaeger
// writes a trace whole: each trace is then handed on whole. A span of a
// trace already handed on (its trace's spans lay farther apart than the
// window) is counted, not handed on, and so is a span of a trace that
// alone fills the window.
type traceWindow struct {
	max  int
	emit func([]traceview.Span)

	held  map[string]*list.Element // of *gathered, by trace id
	order *list.List               // of *gathered, the least recent first
	spans int

	gone      map[string]struct{} // traces handed on, remembered
	goneOrder []string            // of gone, a ring
	goneNext  int

	// late counts the spans of traces already handed on, over those of
	// traces larger than the window.
	late, over int
}

type gathered struct {
	id    string
	spans []traceview.Span
	// frame counts the spans kept beyond the bound for the trace's frame.
	frame int
}

// room reports whether the trace has room for s: max spans, and beyond
// them max more of its frame (its requests, stages and hand-overs), so
// that a request whose phases alone fill the window is still summarised
// and shown, from what it holds.
func (g *gathered) room(s *traceview.Span, max int) bool {
	if len(g.spans) < max {
		return true
	}
	if isFrame(s) && g.frame < max {
		g.frame++
		return true
	}
	return false
}

func isFrame(s *traceview.Span) bool {
	return s.Name == spans.RequestSpanName || s.Name == spans.StageSpanName || s.Name == plan.TransferSpanName
}

func newTraceWindow(max int, emit func([]traceview.Span)) *traceWindow {
	return &traceWindow{max: max, emit: emit, held: map[string]*list.Element{}, order: list.New(), gone: map[string]struct{}{}}
}

// add gathers spans.
func (w *traceWindow) add(ss []traceview.Span) {
	for i := range ss {
		s := &ss[i]
		e, ok := w.held[s.TraceID]
		if !ok {
			if _, done := w.gone[s.TraceID]; done {
				w.late++
				continue
			}
			e = w.order.PushBack(&gathered{id: s.TraceID})
			w.held[s.TraceID] = e
		} else {
			w.order.MoveToBack(e)
		}
		g := e.Value.(*gathered)
		if !g.room(s, w.max) {
			w.over++
			continue
		}
		g.spans = append(g.spans, slim(s))
		w.spans++
		for w.spans > w.max && w.order.Len() > 1 {
			w.handOn(w.order.Front())
		}
	}
}

func (w *traceWindow) handOn(e *list.Element) {
	g := w.order.Remove(e).(*gathered)
	delete(w.held, g.id)
	w.spans -= len(g.spans)
	if len(w.goneOrder) < rememberedTraces {
		w.goneOrder = append(w.goneOrder, g.id)
	} else {
		delete(w.gone, w.goneOrder[w.goneNext])
		w.goneOrder[w.goneNext] = g.id
		w.goneNext = (w.goneNext + 1) % rememberedTraces
	}
	w.gone[g.id] = struct{}{}
	w.emit(g.spans)
}

// flush hands on every trace held, the least recent first.
func (w *traceWindow) flush() {
	for w.order.Len() > 0 {
		w.handOn(w.order.Front())
	}
}

// notes says what the window could not hand on, if anything.
func (w *traceWindow) notes() string {
	var n []string
	if w.late > 0 {
		n = append(n, fmt.Sprintf("%d spans came after their trace was read (its spans lie farther apart in the file than -max-spans %d): not counted", w.late, w.max))
	}
	if w.over > 0 {
		n = append(n, fmt.Sprintf("%d spans of traces of more than -max-spans %d spans: not counted", w.over, w.max))
	}
	return strings.Join(n, "; ")
}

// viewKeys are the attributes table, summary and diff read; a span is held with
// those alone (see slim).
var viewKeys = []string{string(attrs.RequestIDKey), string(attrs.StageIDKey), string(attrs.StageNameKey),
	string(attrs.StageTypeKey), string(attrs.TransferFromStageKey), string(attrs.TransferToStageKey),
	string(attrs.NumInferenceStepsKey), string(omnikeys.LengthUnmeasured), string(semconv.ErrorTypeKey),
	string(attrs.OutputIndexKey), string(attrs.OutputModalityKey), string(semconv.GenAIRequestModelKey)}

// slim returns what table, summary and diff read of a span: its ids, name,
// times, status and the attributes of viewKeys. A span held costs a few
// hundred bytes, whatever attributes it carried.
func slim(s *traceview.Span) traceview.Span {
	out := traceview.Span{TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentID, Name: s.Name,
		Start: s.Start, End: s.End, StatusCode: s.StatusCode}
	for _, k := range viewKeys {
		if v, ok := s.Attrs[k]; ok {
			if out.Attrs == nil {
				out.Attrs = make(map[string]attribute.Value, 4)
			}
			out.Attrs[k] = v
		}
	}
	return out
}
