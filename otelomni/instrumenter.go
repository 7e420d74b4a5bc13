// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Instrumenter makes the spans and measurements of omni requests. Make one
// per engine with [New] and share it: it is safe for concurrent use. A nil
// *Instrumenter records nothing and never panics; the zero Instrumenter
// behaves like New() with no options.
type Instrumenter struct {
	once sync.Once
	cfg  config
	// tracer is nil when the tracer provider is a no-op one.
	tracer trace.Tracer
	// met is nil when the meter provider is a no-op one.
	met    *instruments
	models modelCache
	stats  counters
	// noFieldsSaid: the first Inject or Extract with a propagator that
	// carries no fields has said so.
	noFieldsSaid atomic.Bool
}

// New returns an Instrumenter configured by opts. The providers are read
// here, once: the given ones, or the globals (which forward to an SDK
// installed later).
func New(opts ...Option) *Instrumenter {
	in := &Instrumenter{}
	in.once.Do(func() { in.init(opts) })
	return in
}

// ready initialises a zero Instrumenter on first use.
func (in *Instrumenter) ready() {
	in.once.Do(func() { in.init(nil) })
}

func (in *Instrumenter) init(opts []Option) {
	in.cfg = newConfig(opts)
	if p := in.cfg.propagators; p != nil && panics(func() { p.Fields() }) {
		in.cfg.propagators = nil // a nil pointer: taken as none given
	}
	tp := in.cfg.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		// Recognised by its public type: nothing is ever started.
	default:
		tracer := func(tp trace.TracerProvider) trace.Tracer {
			return tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version), trace.WithSchemaURL(semconv.SchemaURL))
		}
		if panics(func() { in.tracer = tracer(tp) }) {
			// A nil pointer given as the provider: taken as none given.
			in.tracer = tracer(otel.GetTracerProvider())
		}
	}
	mp := in.cfg.meterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
	default:
		var m metric.Meter
		meter := func(mp metric.MeterProvider) metric.Meter {
			return mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version), metric.WithSchemaURL(semconv.SchemaURL))
		}
		if panics(func() { m = meter(mp) }) {
			m = meter(otel.GetMeterProvider())
		}
		inst, err := newInstruments(m)
		if err != nil {
			otel.Handle(err)
		} else {
			in.met = inst
		}
	}
	in.models.init(in.cfg.modelLimit, in.cfg.providerName)
}

// Start starts the span of one request (omni.request) and returns a context
// that holds it, and the [Request] on which its phases are recorded.
//
// The request's identifying attributes (omni.request.id,
// gen_ai.request.model, omni.output.modality, the stage's) are given at
// start, so that samplers see them. The span is a SERVER span, or INTERNAL
// when ctx already holds a local span (a gateway's own span, say). With a
// no-op tracer provider and no metrics, Start returns ctx unchanged and
// allocates nothing. When the request is not sampled, no phase span is ever
// started (with metrics on, its measurements are still recorded). Either way
// the returned Request is safe to use.
//
// A nil ctx is taken as context.Background().
func (in *Instrumenter) Start(ctx context.Context, info RequestInfo) (context.Context, *Request) {
	if ctx == nil {
		ctx = context.Background()
	}
	if in == nil {
		return ctx, noRequest
	}
	in.ready()
	if in.tracer == nil && in.met == nil {
		return ctx, noRequest
	}
	return in.startRequest(ctx, &info)
}

// StartStage starts the span of one stage (omni.stage) under the request
// span that ctx holds, local or remote, with the stage's attributes, and
// returns the [Request] that records the stage's phases: in a multi-stage
// pipeline, each stage process records its phases under its own stage span.
// It is a SERVER span under a remote parent (the request span in another
// process), INTERNAL under a local one. With a no-op tracer provider and no
// metrics it returns ctx unchanged and allocates nothing.
func (in *Instrumenter) StartStage(ctx context.Context, info StageInfo) (context.Context, *Request) {
	if ctx == nil {
		ctx = context.Background()
	}
	if in == nil {
		return ctx, noRequest
	}
	in.ready()
	if in.tracer == nil && in.met == nil {
		return ctx, noRequest
	}
	return in.startStage(ctx, &info)
}

// Stats returns the counts of what otelomni refused or repaired since the
// instrumenter was made.
func (in *Instrumenter) Stats() Stats {
	if in == nil {
		return Stats{}
	}
	return in.stats.snapshot()
}
