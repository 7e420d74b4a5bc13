// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/otelsetup/internal/keep"
)

// Exemplars. By default a histogram's exemplars are the SDK's choice
// (OTEL_METRICS_EXEMPLAR_FILTER: by default any measurement made under a
// sampled span), and behind the tail-sampling tier of deploy/ most of them
// name a trace the tier then drops. With the kept choice
// (OTELOMNI_EXEMPLARS=kept), a measurement is
// offered to the SDK's own reservoir only when the tier keeps its trace,
// by the tier's own rules read from the variables the collector reads
// (package keep): the span the measurement was made under is sampled and
// exported here, and its trace id falls in the baseline share, or the span
// has ended and, as the exporter sends it, failed, or is a request span
// longer than its modality's threshold, or a queue wait longer than the
// budget. "As the exporter sends it" is the span after the SDK's limits
// and after this package's own repair on export, so that the value a
// decision reads is the value the tier reads.

// envExemplars chooses the exemplars: kept, or sdk (the default). It is a
// variable and no option of Setup: the choice is the deployment's, made
// where the tier's thresholds are given, in the environment of every
// engine and collector of a fleet.
const envExemplars = "OTELOMNI_EXEMPLARS"

// exemplarOptions returns the meter provider's options of the kept choice,
// when it is on: a View that gives every instrument the SDK's default
// reservoir behind the tier's rule. exporting says Setup exports spans;
// maxValue is the byte limit its exporter applies to string values; res is
// the resource of its tracer provider, which tells its spans from those of
// any other.
func exemplarOptions(exporting bool, maxValue int, res *resource.Resource) []sdkmetric.Option {
	if !keptExemplarsOn() {
		return nil
	}
	k := &keptExemplars{maxValue: maxValue, exporting: exporting, resource: res}
	var warnings []error
	k.policy, warnings = keep.FromEnv(os.Getenv)
	for _, w := range warnings {
		otel.Handle(fmt.Errorf("otelsetup: %w", w))
	}
	if !exporting {
		otel.Handle(fmt.Errorf("otelsetup: %s=kept: no span is exported here, so no measurement is known to lead to a kept trace: no exemplar is kept", envExemplars))
	}
	return []sdkmetric.Option{sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Name: "*"},
		sdkmetric.Stream{ExemplarReservoirProviderSelector: k.selector},
	))}
}

// keptExemplarsOn reads OTELOMNI_EXEMPLARS as the specification reads an
// enum: case and surrounding space ignored; a value it does not know is
// warned about and ignored.
func keptExemplarsOn() bool {
	v := os.Getenv(envExemplars)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "kept":
		return true
	case "sdk", "":
	default:
		otel.Handle(fmt.Errorf("otelsetup: %s=%q: want kept or sdk; ignored: the exemplars are the SDK's choice", envExemplars, sanitize.String(v, 64)))
	}
	return false
}

// keptExemplars is the kept choice: the tier's policy, and how this
// process exports the spans it decides on.
type keptExemplars struct {
	policy    keep.Policy
	maxValue  int
	exporting bool
	resource  *resource.Resource
	// provider is the resource of Setup's tracer provider, as its spans
	// return it, once one was found equal to resource: then a pointer
	// comparison tells its spans.
	provider atomic.Pointer[resource.Resource]
}

// selector wraps the SDK's default reservoir of each aggregation.
func (k *keptExemplars) selector(agg sdkmetric.Aggregation) exemplar.ReservoirProvider {
	inner := sdkmetric.DefaultExemplarReservoirProviderSelector(agg)
	return func(attrs attribute.Set) exemplar.Reservoir {
		return &keptReservoir{Reservoir: inner(attrs), k: k}
	}
}

// keptReservoir offers its reservoir only the measurements whose trace the
// tier keeps. It is not marked concurrent-safe: the SDK then serialises
// its calls, as the reservoir it wraps allows either way.
type keptReservoir struct {
	exemplar.Reservoir
	k *keptExemplars
}

// Offer offers the measurement to the wrapped reservoir when its trace is
// kept.
func (r *keptReservoir) Offer(ctx context.Context, t time.Time, v exemplar.Value, a []attribute.KeyValue) {
	if r.k.keeps(ctx) {
		r.Reservoir.Offer(ctx, t, v, a)
	}
}

// keeps says the tier keeps the trace of the span ctx holds. Only a span
// of the tracer provider Setup built is read, one this process exports
// (the provider's resource tells it from a span of another provider); only
// an ended span's status and times are final.
func (k *keptExemplars) keeps(ctx context.Context) bool {
	if !k.exporting {
		return false
	}
	s, ok := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
	if !ok || !k.ours(s.Resource()) {
		return false
	}
	sc := s.SpanContext()
	if !sc.IsSampled() {
		return false
	}
	if k.policy.Baseline(sc.TraceID()) {
		return true
	}
	start, end := s.StartTime(), s.EndTime()
	if end.IsZero() || !plan.InRange(start) || !plan.InRange(end) {
		// Open, or refused on export (safeExporter): no span the tier
		// reads.
		return false
	}
	return k.policy.Keeps(k.exported(s, start, end))
}

// ours says res is the resource of Setup's tracer provider.
func (k *keptExemplars) ours(res *resource.Resource) bool {
	if p := k.provider.Load(); p != nil && p == res {
		return true
	}
	if !res.Equal(k.resource) {
		return false
	}
	k.provider.Store(res)
	return true
}

// exported is what the tier reads of s, as safeExporter sends it: the
// name and the modality repaired as its repair does, a span that ends
// before it starts ending where it starts, the times as OTLP carries them.
func (k *keptExemplars) exported(s sdktrace.ReadOnlySpan, start, end time.Time) keep.Span {
	out := keep.Span{Name: sanitize.String(s.Name(), maxKeyBytes), Error: s.Status().Code == codes.Error}
	if d := end.UnixNano() - start.UnixNano(); d > 0 {
		out.Duration = time.Duration(d)
	}
	if out.Name != keep.RequestSpan || out.Error {
		return out
	}
	for _, kv := range s.Attributes() {
		if kv.Key != keep.ModalityKey {
			continue
		}
		// The key is valid and short, so repair keeps it and no other key
		// becomes it; the value is repaired as the exporter repairs it.
		if kv = sanitize.KeyValue(kv, maxKeyBytes, k.maxValue); kv.Value.Type() == attribute.STRING {
			out.Modality = kv.Value.AsString()
		}
		break
	}
	return out
}
