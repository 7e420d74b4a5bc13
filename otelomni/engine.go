// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
)

// EngineInfo describes an engine as it starts.
type EngineInfo struct {
	// Model is the model the engine serves (omni.engine.model).
	Model string
	// Start is when the engine started, for a start rebuilt after the fact;
	// the zero time means now.
	Start time.Time
	// Attributes are recorded on the omni.engine.start span as well,
	// except one whose key otelomni sets itself, as for
	// RequestInfo.Attributes.
	Attributes []attribute.KeyValue
}

// LoadInfo describes one model load. A zero field is not recorded, nor is a
// negative one, which is counted in Stats.Misuse.
type LoadInfo struct {
	// Model is the model whose weights are loaded.
	Model string
	// WeightBytes is the size of the weights.
	WeightBytes int64
	// DType is the dtype the weights run in, such as "bfloat16".
	DType string
	// DeviceKind is the accelerator kind, such as "cuda"; DeviceCount how
	// many the model is loaded on.
	DeviceKind  string
	DeviceCount int
	// AcceleratorMemoryBytes is the accelerator memory in use after the
	// load, when the engine reports it. It is often known only once the
	// load ends: set it with [EnginePhase.SetAcceleratorMemory].
	AcceleratorMemoryBytes int64
}

// Engine is the trace of an engine's start (omni.engine.start): model
// loads, warm-up, and each stage's initialisation, as its children. It is a
// trace of its own, never under a request. Its methods are safe for
// concurrent use, and do nothing on a nil *Engine or when nothing is
// recorded.
type Engine struct {
	in     *Instrumenter
	tracer trace.Tracer
	span   trace.Span
	ctx    context.Context
	start  time.Time
	clk    clock

	mu    sync.Mutex
	ended bool
	// open are its steps started and not ended; a nil span is one still
	// starting, which the goroutine starting it ends at the engine's end.
	open map[uint32]*engineStep
	next uint32
}

// engineStep is one step of an engine's start, open.
type engineStep struct {
	span  trace.Span
	start time.Time
	// endAt is set when the engine's start ended while its span was
	// starting.
	endAt time.Time
}

// EnginePhase is a step of an engine's start on the live path.
type EnginePhase struct {
	e    *Engine
	id   uint32
	span trace.Span
}

// End ends the step now; a non-nil err marks it failed. Ending it twice,
// or after the engine's start ended (which ended it), does nothing.
func (p EnginePhase) End(err error) {
	if p.span == nil {
		return
	}
	e := p.e
	e.mu.Lock()
	if _, open := e.open[p.id]; !open {
		e.mu.Unlock()
		return
	}
	delete(e.open, p.id)
	at := e.clk.now()
	e.mu.Unlock()
	if err != nil {
		markError(p.e.in, p.span, err)
	}
	endSpanAt(p.span, at)
}

// SetAcceleratorMemory records the accelerator memory in use after a load
// (omni.engine.accelerator_memory_bytes). A negative value is not recorded,
// and is counted in Stats.Misuse.
func (p EnginePhase) SetAcceleratorMemory(bytes int64) {
	if p.span == nil {
		return
	}
	if bytes < 0 {
		_ = p.e.in.outOfRange("accelerator memory bytes", bytes, 0, math.MaxInt64, "not recorded", nil)
		return
	}
	if bytes > 0 {
		p.span.SetAttributes(omniattr.EngineAcceleratorMemory(bytes))
	}
}

// StartEngine starts the trace of an engine's start: the root span
// omni.engine.start, a trace of its own whatever ctx holds, with a link to
// the span ctx holds, if any. End it when the engine is ready to serve. It
// returns nil, on which every method does nothing, when nothing is
// recorded.
func (in *Instrumenter) StartEngine(ctx context.Context, info EngineInfo) *Engine {
	if ctx == nil {
		ctx = context.Background()
	}
	if in == nil {
		return nil
	}
	in.ready()
	if in.tracer == nil {
		return nil
	}
	kv := []attribute.KeyValue{}
	if info.Model != "" {
		kv = append(kv, omniattr.EngineModel(in.str(info.Model)))
	}
	kv = append(kv, in.callerKVs("EngineInfo.Attributes", info.Attributes)...)
	clk := newClock()
	start := info.Start
	if !start.IsZero() {
		start = clk.place(in.startTime(start, "engine"))
	}
	if start.IsZero() {
		start = clk.base
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...),
		trace.WithTimestamp(start)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := in.tracer.Start(ctx, plan.EngineStartSpanName, opts...)
	if !span.IsRecording() {
		return nil
	}
	return &Engine{in: in, tracer: in.tracer, span: span, ctx: ctx, start: start, clk: clk}
}

// Context returns a context that holds the omni.engine.start span, for
// spans of your own during the start. Never start a request from it.
func (e *Engine) Context() context.Context {
	if e == nil || e.ctx == nil {
		return context.Background()
	}
	return e.ctx
}

func (l LoadInfo) attributes(in *Instrumenter) []attribute.KeyValue {
	var kv []attribute.KeyValue
	if l.Model != "" {
		kv = append(kv, omniattr.EngineModel(in.str(l.Model)))
	}
	for _, n := range [...]struct {
		what string
		v    int64
	}{{"weight bytes", l.WeightBytes}, {"device count", int64(l.DeviceCount)}, {"accelerator memory bytes", l.AcceleratorMemoryBytes}} {
		if n.v < 0 {
			_ = in.outOfRange(n.what, n.v, 0, math.MaxInt64, "not recorded", nil)
		}
	}
	if l.WeightBytes > 0 {
		kv = append(kv, omniattr.EngineWeightBytes(l.WeightBytes))
	}
	if l.DType != "" {
		kv = append(kv, omniattr.EngineDType(in.str(l.DType)))
	}
	if l.DeviceKind != "" {
		kv = append(kv, omniattr.EngineDeviceKind(in.str(l.DeviceKind)))
	}
	if l.DeviceCount > 0 {
		kv = append(kv, omniattr.EngineDeviceCount(l.DeviceCount))
	}
	if l.AcceleratorMemoryBytes > 0 {
		kv = append(kv, omniattr.EngineAcceleratorMemory(l.AcceleratorMemoryBytes))
	}
	return kv
}

func (s StageInfo) initAttributes(in *Instrumenter) []attribute.KeyValue {
	st := in.stageInfo(&s, true)
	if st.Type == "" {
		st.Type = attrs.StageOther
	}
	return st.appendAttrs(nil)
}

// StartLoad starts an omni.engine.load span now.
func (e *Engine) StartLoad(info LoadInfo) EnginePhase {
	if e == nil || e.span == nil {
		return EnginePhase{}
	}
	return e.startStep(plan.EngineLoadSpanName, info.attributes(e.in))
}

// StartWarmup starts an omni.engine.warmup span now.
func (e *Engine) StartWarmup() EnginePhase {
	if e == nil || e.span == nil {
		return EnginePhase{}
	}
	return e.startStep(plan.EngineWarmupSpanName, nil)
}

// StartStageInit starts the omni.engine.stage_init span of one stage of a
// multi-stage pipeline now.
func (e *Engine) StartStageInit(stage StageInfo) EnginePhase {
	if e == nil || e.span == nil {
		return EnginePhase{}
	}
	return e.startStep(plan.EngineStageInitSpanName, stage.initAttributes(e.in))
}

func (e *Engine) startStep(name string, kv []attribute.KeyValue) EnginePhase {
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		e.in.stats.misused(name + " started after the engine's start ended")
		return EnginePhase{}
	}
	start := e.clk.now()
	if err := stepBeforeEngine(name, start, e.start); err != nil {
		e.mu.Unlock()
		e.in.stats.conflict(err)
		return EnginePhase{}
	}
	e.next++
	id := e.next
	if e.open == nil {
		e.open = map[uint32]*engineStep{}
	}
	st := &engineStep{start: start}
	e.open[id] = st
	e.mu.Unlock()
	started := false
	defer func() {
		if !started { // a span processor panicked: the step is not open
			e.mu.Lock()
			delete(e.open, id)
			e.mu.Unlock()
		}
	}()
	_, span := e.tracer.Start(e.ctx, name, trace.WithAttributes(kv...), trace.WithTimestamp(start))
	started = true
	e.mu.Lock()
	if !st.endAt.IsZero() {
		// The engine's start ended while this span started: it ends there.
		at := st.endAt
		delete(e.open, id)
		e.mu.Unlock()
		endSpanAt(span, at)
		return EnginePhase{}
	}
	st.span = span
	e.mu.Unlock()
	return EnginePhase{e: e, id: id, span: span}
}

// stepError reports an engine step that made no span.
type stepError struct {
	name string
	err  error
}

func (e *stepError) Error() string {
	return fmt.Sprintf("otelomni: %s: %v; no span emitted", e.name, e.err)
}

func (e *stepError) Unwrap() error { return e.err }

// End ends the engine's start now: the engine is ready to serve, or, with
// a non-nil err, failed to start.
func (e *Engine) End(err error) {
	if e == nil || e.span == nil {
		return
	}
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		e.in.stats.misused("an engine's start was ended twice")
		return
	}
	e.ended = true
	at := e.clk.now()
	clamped := false
	if e.start.After(at) {
		// A start given later than now: the span ends no earlier.
		at, clamped = e.start, true
	}
	var open []trace.Span
	for id, st := range e.open {
		if st.span == nil {
			st.endAt = at // still starting: its starter ends it here
			continue
		}
		open = append(open, st.span)
		delete(e.open, id)
	}
	e.mu.Unlock()
	if clamped {
		e.in.stats.clampedEnd("an engine's start ended before its given start; ended there")
	}
	// Steps still open end first, at the same moment.
	for _, s := range open {
		endSpanAt(s, at)
	}
	if err != nil {
		markError(e.in, e.span, err)
	}
	endSpanAt(e.span, at)
}
