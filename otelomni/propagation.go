package otelomni

import (
	"context"
	"fmt"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// w3c is used while no propagator was chosen, neither with
// [WithPropagators] nor as the global one: the API's global default
// carries nothing, and cross-process traces must not break silently.
var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// unsetGlobal is the global propagator as the API starts it, read when
// this package is initialised (before main runs, so before a program sets
// one). The API's is a pointer; anything else there was set by a package
// initialised earlier, is the program's choice, and is not kept.
var unsetGlobal = keptIfPointer(otel.GetTextMapPropagator())

func keptIfPointer(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p == nil || reflect.TypeOf(p).Kind() != reflect.Pointer {
		return nil
	}
	return p
}

// propagator returns the propagator chosen with WithPropagators, else the
// global one once a program has set it (even one that carries nothing, as
// OTEL_PROPAGATORS=none makes), else W3C trace context and baggage.
func (in *Instrumenter) propagator() propagation.TextMapPropagator {
	if p := in.cfg.propagators; p != nil {
		return p
	}
	p := otel.GetTextMapPropagator()
	// unsetGlobal holds a pointer: comparing it with p never panics,
	// whatever p's type (a composite propagator is a slice).
	if p == nil || (unsetGlobal != nil && p == unsetGlobal && len(p.Fields()) == 0) {
		return w3c
	}
	return p
}

// Inject puts the trace context of ctx into carrier, for the next stage.
// Pass the request's context (the one [Instrumenter.Start] returned, or in a
// stage process the one [Instrumenter.Extract] returned), not a stage's or a
// phase's, so that the next stage hangs under omni.request. An unsampled
// request's context is injected too, so that the next stage does not sample
// it anew. A nil ctx or carrier does nothing; a carrier that panics on
// write (a nil propagation.MapCarrier, a nil http.Header) is counted as
// misuse, not raised.
func (in *Instrumenter) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if in == nil || ctx == nil || carrier == nil {
		return
	}
	in.ready()
	defer func() {
		if v := recover(); v != nil {
			in.stats.misused(fmt.Sprintf("Inject: the carrier (%T) panicked on write: %v", carrier, v))
		}
	}()
	in.propagator().Inject(ctx, carrier)
}

// Extract returns ctx with the trace context that carrier holds, from which
// a stage process starts its stage with [Instrumenter.StartStage]. A nil
// ctx is taken as context.Background(); a nil carrier, or one that panics on
// read, gives ctx unchanged.
func (in *Instrumenter) Extract(ctx context.Context, carrier propagation.TextMapCarrier) (out context.Context) {
	if ctx == nil {
		ctx = context.Background()
	}
	if in == nil || carrier == nil {
		return ctx
	}
	in.ready()
	defer func() {
		if v := recover(); v != nil {
			in.stats.misused(fmt.Sprintf("Extract: the carrier (%T) panicked on read: %v", carrier, v))
			out = ctx
		}
	}()
	return in.propagator().Extract(ctx, carrier)
}
