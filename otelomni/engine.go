// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/spans"
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

	mu    sync.Mutex
	ended bool
	// open holds the live steps started and not ended: ending the start
	// ends them first.
	open map[uint32]trace.Span
	next uint32
	// starting counts the steps being started or ended outside mu: End
	// waits for them on cond.
	starting int
	cond     *sync.Cond
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
	_, open := e.open[p.id]
	if !open {
		e.mu.Unlock()
		return
	}
	delete(e.open, p.id)
	// Counted as a start in flight: the engine's start ends after this
	// step does, never before.
	e.starting++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.startDoneLocked()
		e.mu.Unlock()
	}()
	if err != nil {
		markError(p.e.in, p.span, err)
	}
	p.span.End()
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
	start := info.Start
	if !start.IsZero() {
		start = in.startTime(start, "engine")
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(kv...)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	ctx, span := in.tracer.Start(ctx, spans.EngineStartSpanName, opts...)
	if !span.IsRecording() {
		return nil
	}
	return &Engine{in: in, tracer: in.tracer, span: span, ctx: ctx, start: startOr(start)}
}

// Context returns a context that holds the omni.engine.start span, for
// spans of your own during the start. Never start a request from it.
func (e *Engine) Context() context.Context {
	if e == nil {
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
	if e == nil {
		return EnginePhase{}
	}
	return e.startStep(spans.EngineLoadSpanName, info.attributes(e.in))
}

// StartWarmup starts an omni.engine.warmup span now.
func (e *Engine) StartWarmup() EnginePhase {
	if e == nil {
		return EnginePhase{}
	}
	return e.startStep(spans.EngineWarmupSpanName, nil)
}

// StartStageInit starts the omni.engine.stage_init span of one stage of a
// multi-stage pipeline now.
func (e *Engine) StartStageInit(stage StageInfo) EnginePhase {
	if e == nil {
		return EnginePhase{}
	}
	return e.startStep(spans.EngineStageInitSpanName, stage.initAttributes(e.in))
}

func (e *Engine) startStep(name string, kv []attribute.KeyValue) EnginePhase {
	if err := engineBeforeStart(name, e.start); err != nil {
		e.in.stats.conflict(err)
		return EnginePhase{}
	}
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		e.in.stats.misused(name + " started after the engine's start ended")
		return EnginePhase{}
	}
	e.starting++
	e.mu.Unlock()
	started := false
	defer func() {
		if !started { // a span processor panicked: nothing may wait for this start
			e.mu.Lock()
			e.startDoneLocked()
			e.mu.Unlock()
		}
	}()
	_, span := e.tracer.Start(e.ctx, name, trace.WithAttributes(kv...))
	e.mu.Lock()
	e.next++
	if e.open == nil {
		e.open = map[uint32]trace.Span{}
	}
	e.open[e.next] = span
	p := EnginePhase{e: e, id: e.next, span: span}
	started = true
	e.startDoneLocked()
	e.mu.Unlock()
	return p
}

// startDoneLocked ends a step's start, waking an End that waits for it.
func (e *Engine) startDoneLocked() {
	e.starting--
	if e.starting == 0 && e.cond != nil {
		e.cond.Broadcast()
	}
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
	if e == nil {
		return
	}
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		e.in.stats.misused("an engine's start was ended twice")
		return
	}
	e.ended = true
	for e.starting > 0 {
		// A step is starting on another goroutine: end after it, so that
		// it does not outlive the start.
		if e.cond == nil {
			e.cond = sync.NewCond(&e.mu)
		}
		e.cond.Wait()
	}
	open := e.open
	e.open = nil
	e.mu.Unlock()
	var at time.Time
	if e.start.After(time.Now()) {
		// A start given later than now: the span ends no earlier.
		e.in.stats.clampedEnd("an engine's start ended before its given start; ended there")
		at = e.start
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

// startOr returns a start given, or else now: read after the span
// started, no earlier than its own start.
func startOr(given time.Time) time.Time {
	if given.IsZero() {
		return time.Now()
	}
	return given
}
