// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelomni"
)

// shape renders spans as "name <- parent [kind] {attributes}" lines, sorted,
// with times left out: what must match between two ways of making a trace.
func shape(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		kv := s.Attributes()
		a := make([]string, len(kv))
		for i, x := range kv {
			a[i] = fmt.Sprintf("%s=%s", x.Key, x.Value.String())
		}
		sort.Strings(a)
		out = append(out, fmt.Sprintf("%s <- %s [%v] %v scope=%s@%s", s.Name(), parentName(ss, s), s.SpanKind(), a,
			s.InstrumentationScope().Name, s.InstrumentationScope().Version))
	}
	sort.Strings(out)
	return out
}

func TestBenchmarkBaselinesMakeTheSameSpansAsOtelomni(t *testing.T) {
	run := func(f func(trace.Tracer, *otelomni.Instrumenter)) []string {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		f(tp.Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version)),
			otelomni.New(otelomni.WithTracerProvider(tp)))
		assertNoNegativeSpan(t, rec.Ended())
		return shape(rec.Ended())
	}
	pairs := map[string][2]func(trace.Tracer, *otelomni.Instrumenter){
		"request": {
			func(_ trace.Tracer, in *otelomni.Instrumenter) { otelomniRequest(in) },
			func(tr trace.Tracer, _ *otelomni.Instrumenter) { handwrittenRequest(tr) },
		},
		"floor": {
			func(_ trace.Tracer, in *otelomni.Instrumenter) { otelomniRequest(in) },
			func(tr trace.Tracer, _ *otelomni.Instrumenter) { newFloor().request(tr) },
		},
		"record": {
			func(_ trace.Tracer, in *otelomni.Instrumenter) { otelomniRecord(in) },
			func(tr trace.Tracer, _ *otelomni.Instrumenter) { handwrittenRecord(tr) },
		},
	}
	for name, p := range pairs {
		t.Run(name, func(t *testing.T) {
			got, want := run(p[0]), run(p[1])
			if len(got) != 6 {
				t.Fatalf("otelomni made %d spans, want 6", len(got))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("otelomni:\n%v\nhandwritten:\n%v", got, want)
			}
		})
	}
}

// measurements renders what a reader collected as "name {attributes} count"
// lines, sorted, with the values left out.
func measurements(t *testing.T, r *sdkmetric.ManualReader) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				out = append(out, fmt.Sprintf("%s %s %v count=%d", m.Name, m.Unit, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Count))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestMetricsFloorMeasuresWhatOtelomniMeasures: the metrics floor records
// the same instruments, attribute sets and counts as otelomni, sampled and
// not.
func TestMetricsFloorMeasuresWhatOtelomniMeasures(t *testing.T) {
	for _, sampler := range []sdktrace.Sampler{sdktrace.AlwaysSample(), sdktrace.NeverSample()} {
		t.Run(sampler.Description(), func(t *testing.T) {
			run := func(f func(trace.TracerProvider, metric.MeterProvider)) []string {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
				r := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
				defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()
				f(tp, mp)
				return measurements(t, r)
			}
			ours := run(func(tp trace.TracerProvider, mp metric.MeterProvider) {
				otelomniRequest(otelomni.New(otelomni.WithTracerProvider(tp), otelomni.WithMeterProvider(mp)))
			})
			floor := run(func(tp trace.TracerProvider, mp metric.MeterProvider) {
				newFloorMetrics(t, mp).run(newFloor(), tp.Tracer(otelomni.ScopeName))
			})
			if len(ours) != 6 || fmt.Sprint(ours) != fmt.Sprint(floor) {
				t.Errorf("otelomni:\n%v\nfloor:\n%v", strings.Join(ours, "\n"), strings.Join(floor, "\n"))
			}
		})
	}
}
