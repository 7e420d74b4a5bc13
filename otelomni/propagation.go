// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// propagator returns the propagator chosen with WithPropagators, else the
// global one as it is now (otel.GetTextMapPropagator), as contrib's
// instrumentation does. The first time the one in use carries no fields
// (the API's global before a program sets one, or OTEL_PROPAGATORS=none),
// it says so once through the OpenTelemetry error handler: no trace
// context then crosses to the next stage.
func (in *Instrumenter) propagator() propagation.TextMapPropagator {
	p := in.cfg.propagators
	if p == nil {
		p = otel.GetTextMapPropagator()
	}
	if len(p.Fields()) == 0 && in.noFieldsSaid.CompareAndSwap(false, true) {
		otel.Handle(errors.New("otelomni: the propagator in use carries no fields, so no trace context reaches the next stage; " +
			"give one with WithPropagators or install a global one (otelsetup.Setup installs W3C trace context and baggage)"))
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
			in.stats.misused(fmt.Sprintf("Inject: the propagator or the carrier (%T) panicked: %v", carrier, v))
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
			in.stats.misused(fmt.Sprintf("Extract: the propagator or the carrier (%T) panicked: %v", carrier, v))
			out = ctx
		}
	}()
	return in.propagator().Extract(ctx, carrier)
}
