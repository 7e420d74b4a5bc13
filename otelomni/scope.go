package otelomni

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// scopeKind tells a request scope from a stage scope: they end into
// different histograms.
type scopeKind uint8

const (
	kindRequest scopeKind = iota + 1
	kindStage
)

// scope is a span that phases hang under, a request's or a stage's, and the
// metrics measured under it. It holds the live path and the record path;
// [Request] and [Stage] expose its methods, nil-safe. A scope whose request
// is not sampled but whose metrics are on records metrics only: every
// request counts in the histograms, whatever the trace sampler decided.
type scope struct {
	in *Instrumenter
	// on: the scope records spans, metrics, or both.
	on     bool
	tracer trace.Tracer
	// span is nil when the scope records metrics only.
	span trace.Span
	// ctx holds the scope's span: the parent of its phases.
	ctx    context.Context
	pattrs *phaseAttrs
	met    *instruments
	kind   scopeKind
	id     string
	steps  int
	// start is the scope's start when it was given, or when metrics need
	// it and there is no span to ask.
	start time.Time

	mu    sync.Mutex
	ended bool
	// exec and forward hold the exec and forward spans once started, as the
	// parents of the phases that nest in them.
	exec, forward context.Context
	open          openPhases
	// lastEnd is the latest explicit end among recorded phases.
	lastEnd time.Time
	llm     llmState
	// outputs counts the omni.output spans made, and lastOutput is when
	// the last one ended.
	outputs    int
	lastOutput time.Time
	// firstOut: the time to the first output has been recorded.
	firstOut atomic.Bool
	// Buffers reused under mu, so that a phase costs no allocation beyond
	// the SDK's own.
	attrBuf  [8]attribute.KeyValue
	startOpt [1]trace.SpanStartOption
	endOpt   [1]trace.SpanEndOption
}

func (r *scope) init(in *Instrumenter, tracer trace.Tracer, span trace.Span, ctx context.Context, met *instruments, model, stageType string, start time.Time) {
	r.in, r.on, r.tracer, r.span, r.ctx, r.met = in, true, tracer, span, ctx, met
	r.pattrs = in.models.get(model, stageType)
	r.start = start
	if r.start.IsZero() && (span == nil || met != nil) {
		r.start = time.Now()
	}
}

// recording reports whether r records anything at all.
func (r *scope) recording() bool { return r != nil && r.on }

// spanOrNoop returns the scope's span, or a non-recording span.
func (r *scope) spanOrNoop() trace.Span {
	if r == nil || r.span == nil {
		return trace.SpanFromContext(context.Background())
	}
	return r.span
}

func (r *scope) setAttributes(kv ...attribute.KeyValue) {
	if r != nil && r.span != nil {
		r.span.SetAttributes(kv...)
	}
}

func (r *scope) endAt(t time.Time, err error) error {
	if !r.recording() {
		return nil
	}
	r.mu.Lock()
	floor := r.lastEnd
	r.mu.Unlock()
	if start := r.startTime(time.Time{}); start.After(floor) {
		floor = start
	}
	var bad error
	if t.IsZero() || t.Before(floor) {
		bad = fmt.Errorf("otelomni: %s: end %v is zero, or before its start or a recorded phase's end (%v); ended there instead",
			r.id, t, floor)
		r.in.stats.reject(bad)
		t = floor
	}
	r.end(t, err)
	return bad
}

func (r *scope) end(at time.Time, err error) {
	var now time.Time
	if r.met != nil || !r.start.IsZero() {
		now = time.Now()
	}
	if at.IsZero() && !r.start.IsZero() && now.Before(r.start) {
		// A start given from another clock lies in the future: ending now
		// would make the span negative. It ends where it started.
		r.in.stats.reject(fmt.Errorf("otelomni: %s: started at %v, after now; ended at its start", r.id, r.start))
		at = r.start
	}
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		r.in.stats.misused("a request or stage was ended twice")
		return
	}
	r.ended = true
	open := r.open.drain()
	r.mu.Unlock()
	// Children end before their parents: latest started first.
	for i := len(open) - 1; i >= 0; i-- {
		r.finish(&open[i], now)
	}
	if r.span != nil {
		if err != nil {
			markError(r.span, err)
		}
		if at.IsZero() {
			r.span.End()
		} else {
			r.span.End(trace.WithTimestamp(at))
		}
	}
	if r.met != nil {
		end := at
		if end.IsZero() {
			end = now
		}
		start, stop := r.spanTimes(r.span, r.start, end)
		h, opts := r.met.request, r.pattrs.scopeRec
		if r.kind == kindStage {
			h = r.met.stage
		}
		if err != nil {
			opts = r.pattrs.failedRec(errorType(err))
		}
		if d := stop.Sub(start); d >= 0 && h.Enabled(r.ctx) {
			h.Record(r.ctx, seconds(d), opts...)
		}
	}
}

// spanTimes returns a span's own start and end, so that a metric and its
// span carry the same measurement; without an SDK span, start and end.
func (r *scope) spanTimes(s trace.Span, start, end time.Time) (time.Time, time.Time) {
	if ro, ok := s.(interface {
		StartTime() time.Time
		EndTime() time.Time
	}); ok {
		if st, en := ro.StartTime(), ro.EndTime(); !st.IsZero() && !en.IsZero() {
			return st, en
		}
	}
	return start, end
}

// startTime returns the scope's start: its span's, or the one kept.
func (r *scope) startTime(fallback time.Time) time.Time {
	if s, ok := r.span.(interface{ StartTime() time.Time }); ok {
		if t := s.StartTime(); !t.IsZero() {
			return t
		}
	}
	if !r.start.IsZero() {
		return r.start
	}
	return fallback
}

// observe records one measured phase in the phase histogram, and what
// derives from it: exec per step, and the time to the first output.
func (r *scope) observe(ctx context.Context, p spans.Phase, start, end time.Time, output int) {
	if r.met == nil {
		return
	}
	if ctx == nil {
		ctx = r.ctx
	}
	d := end.Sub(start)
	if r.met.phase.Enabled(ctx) {
		r.met.phase.Record(ctx, seconds(d), r.pattrs.phaseRec[p]...)
	}
	if p == spans.Exec && r.steps > 0 && r.met.perStep.Enabled(ctx) {
		r.met.perStep.Record(ctx, seconds(d)/float64(r.steps), r.pattrs.scopeRec...)
	}
	if p == spans.Postprocess && output == 0 {
		r.firstOutput(ctx, end)
	}
}

// firstOutput records the time from the scope's start to its first output,
// once per scope whichever path reports that output.
func (r *scope) firstOutput(ctx context.Context, at time.Time) {
	if r.met == nil || !r.firstOut.CompareAndSwap(false, true) {
		return
	}
	d := at.Sub(r.startTime(at))
	if d < 0 {
		r.in.stats.reject(fmt.Errorf("otelomni: %s: first output at %v, before its start; not recorded", r.id, at))
		return
	}
	if r.met.ttfo.Enabled(ctx) {
		r.met.ttfo.Record(ctx, seconds(d), r.pattrs.scopeRec...)
	}
}

// markError sets status Error with err's message and error.type on span.
// The SDK bounds attribute values but not the status description, so the
// message is bounded here: a 10 MB error must not cost a whole batch.
func markError(span trace.Span, err error) {
	span.SetStatus(codes.Error, truncateUTF8(err.Error(), 4096))
	span.SetAttributes(attrs.ErrorType(errorType(err)))
}
