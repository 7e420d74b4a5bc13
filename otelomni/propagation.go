package otelomni

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Carrier carries trace context in a stage message: put a Carrier field in
// your message struct (it marshals as a JSON object) and pass its address
// to [Instrumenter.Inject] and [Instrumenter.Extract]. For a map you already
// have, use propagation.MapCarrier.
type Carrier map[string]string

var _ propagation.TextMapCarrier = (*Carrier)(nil)

// Get returns the value of key.
func (c *Carrier) Get(key string) string { return (*c)[key] }

// Set sets key, making the map if it is nil.
func (c *Carrier) Set(key, value string) {
	if *c == nil {
		*c = Carrier{}
	}
	(*c)[key] = value
}

// Keys lists the keys.
func (c *Carrier) Keys() []string {
	out := make([]string, 0, len(*c))
	for k := range *c {
		out = append(out, k)
	}
	return out
}

// w3c is used when the configured propagator carries nothing (the default
// no-op one), so that cross-process traces never break silently.
var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// propagator returns the configured propagators, or the globals, or W3C
// trace context when those carry no field at all.
func (in *Instrumenter) propagator() propagation.TextMapPropagator {
	p := in.cfg.propagators
	if p == nil {
		p = otel.GetTextMapPropagator()
	}
	if len(p.Fields()) == 0 {
		return w3c
	}
	return p
}

// Inject puts the trace context of ctx into carrier, for the next stage.
// Pass the request's context (the one [Instrumenter.Start] returned, or in a
// stage process the one [Instrumenter.Extract] returned), not a stage's or a
// phase's, so that the next stage hangs under omni.request. An unsampled
// request's context is injected too, so that the next stage does not sample
// it anew.
func (in *Instrumenter) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if ctx == nil || carrier == nil {
		return
	}
	in.propagator().Inject(ctx, carrier)
}

// Extract returns ctx with the trace context that carrier holds, from which
// a stage process starts its stage with [Instrumenter.StartStage].
func (in *Instrumenter) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	if carrier == nil {
		return ctx
	}
	return in.propagator().Extract(ctx, carrier)
}
