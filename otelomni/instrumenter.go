package otelomni

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Instrumenter makes the spans of omni requests. Make one per engine with
// [New] and share it: it is safe for concurrent use. The zero Instrumenter
// is usable and behaves like New() with no options.
type Instrumenter struct {
	cfg config
	// fixed is the tracer of an explicit provider; nil means "read the
	// global provider at each call".
	fixed *tracerState
	// global caches the tracer of the last global provider seen.
	global atomic.Pointer[tracerState]
	// fixedMeter and globalMeter are the same for metrics.
	fixedMeter  *meterState
	globalMeter atomic.Pointer[meterState]
	// models caches the phase attribute tables per model.
	models modelCache
	stats  counters
}

// New returns an Instrumenter configured by opts.
func New(opts ...Option) *Instrumenter {
	in := &Instrumenter{}
	for _, o := range opts {
		if o != nil {
			o.apply(&in.cfg)
		}
	}
	if tp := in.cfg.tracerProvider; tp != nil && !isGlobalDelegate(tp) {
		in.fixed = newTracerState(tp)
	}
	if mp := in.cfg.meterProvider; mp != nil && !isGlobalMeterDelegate(mp) {
		in.fixedMeter = newMeterState(mp)
	}
	return in
}

// tracerState is a provider, the tracer otelomni got from it, and whether
// that provider records anything at all.
type tracerState struct {
	provider   trace.TracerProvider
	comparable bool
	tracer     trace.Tracer
	enabled    bool
}

func newTracerState(tp trace.TracerProvider) *tracerState {
	s := &tracerState{provider: tp, comparable: reflect.TypeOf(tp).Comparable()}
	if isNoop(tp) {
		return s
	}
	s.tracer = tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version))
	if _, ok := s.tracer.(noop.Tracer); ok {
		return s
	}
	s.enabled = true
	return s
}

// tracer returns the current tracer state: the fixed one, or the global
// provider's, read now so that an SDK installed later is picked up.
func (in *Instrumenter) tracer() *tracerState {
	if in.fixed != nil {
		return in.fixed
	}
	return in.globalTracer()
}

func (in *Instrumenter) globalTracer() *tracerState {
	tp := otel.GetTracerProvider()
	// The comparison is safe: it can only panic when both dynamic types are
	// the same and not comparable, and then c.comparable is false.
	if c := in.global.Load(); c != nil && c.comparable && c.provider == tp {
		return c
	}
	c := newTracerState(tp)
	in.global.Store(c)
	return c
}

// deprecatedNoop is the no-op provider of trace.NewNoopTracerProvider, which
// some programs still install.
//
//lint:ignore SA1019 recognised so that it costs nothing, not used
var deprecatedNoop = trace.NewNoopTracerProvider()

// isNoop reports whether tp records nothing, so that otelomni never calls
// Start on it: the no-op providers and the global provider before any SDK is
// installed.
func isNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return true
	}
	if reflect.TypeOf(tp) == reflect.TypeOf(deprecatedNoop) {
		return true
	}
	return isGlobalDelegate(tp)
}

// isGlobalDelegate reports whether tp is the provider that
// otel.GetTracerProvider returns before otel.SetTracerProvider is called. It
// forwards to an SDK installed later and until then makes non-recording
// spans, at a cost of two allocations each; otelomni recognises it and
// starts nothing.
func isGlobalDelegate(tp trace.TracerProvider) bool {
	t := reflect.TypeOf(tp)
	if t == nil || t.Kind() != reflect.Pointer {
		return false
	}
	e := t.Elem()
	return e.PkgPath() == "go.opentelemetry.io/otel/internal/global" && e.Name() == "tracerProvider"
}

// Start starts the span of one request (omni.request) and returns a context
// that holds it, and the [Request] on which its phases are recorded.
//
// The span is a SERVER span, or INTERNAL when ctx already holds a local
// span (a gateway's own span, say). When tracing and metrics are off (no-op
// providers, or the global providers before an SDK is installed) Start
// allocates nothing and returns ctx unchanged; when the request is not
// sampled, no phase span is ever started (with metrics on, its
// measurements are still recorded). Either way the returned Request is safe
// to use.
//
// A nil ctx is taken as context.Background().
func (in *Instrumenter) Start(ctx context.Context, info RequestInfo) (context.Context, *Request) {
	ts, ms := in.tracer(), in.meters()
	if ts.enabled || ms.inst != nil {
		return in.start(ctx, ts, ms, &info)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return ctx, noRequest
}

// Stats returns the counts of measurements and calls that otelomni refused,
// since the instrumenter was made.
func (in *Instrumenter) Stats() Stats { return in.stats.snapshot() }
