// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/otelomni/otelomni/otelomni"
)

// shape renders spans as "name <- parent [kind] status {attributes} scope"
// lines, sorted, with times left out: what must match between two ways of
// making a trace.
func shape(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		kv := s.Attributes()
		a := make([]string, len(kv))
		for i, x := range kv {
			a[i] = fmt.Sprintf("%s=%s", x.Key, x.Value.String())
		}
		sort.Strings(a)
		sc := s.InstrumentationScope()
		out = append(out, fmt.Sprintf("%s <- %s [%v] %v %v scope=%s@%s %s", s.Name(), parentName(ss, s), s.SpanKind(), s.Status().Code, a,
			sc.Name, sc.Version, sc.SchemaURL))
	}
	sort.Strings(out)
	return out
}

// made is what one variant of BenchmarkRequest made of one request.
type made struct {
	spans        []sdktrace.ReadOnlySpan
	metrics      metricdata.ResourceMetrics
	starts       int64 // spans started, recording or not
	measurements []string
}

// makeOnPath makes request i of the cycle with variant v on path's
// providers: an SDK tracer provider with a recorder, sampling or not, or
// one that records nothing, not the SDK's; an SDK meter provider with a
// reader, or the global one with no SDK installed, as in the benchmark.
// Every start is counted.
func makeOnPath(t *testing.T, path benchPath, v benchVariant, i int) made {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	var tp trace.TracerProvider = noop.NewTracerProvider()
	if path.sdk {
		sampler := sdktrace.NeverSample()
		if path.sampled {
			sampler = sdktrace.AlwaysSample()
		}
		sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
		defer func() { _ = sdk.Shutdown(context.Background()) }()
		tp = sdk
	}
	counted := &countingProvider{tp: tp}
	reader := sdkmetric.NewManualReader()
	mp := otel.GetMeterProvider()
	if _, ok := mp.(*sdkmetric.MeterProvider); ok {
		t.Fatal("a test installed a global SDK meter provider in this process")
	}
	if path.metrics {
		sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = sdk.Shutdown(context.Background()) }()
		mp = sdk
	}
	v(t, counted, mp)(i)
	m := made{spans: rec.Ended(), starts: counted.starts.Load()}
	if path.metrics {
		if err := reader.Collect(context.Background(), &m.metrics); err != nil {
			t.Fatal(err)
		}
	}
	m.measurements = measurements(t, &m.metrics, m.spans)
	assertNoNegativeSpan(t, m.spans)
	return m
}

// TestBenchmarkBaselinesMakeTheSameSpansAsOtelomni: on every path of
// BenchmarkRequest, handwritten and floor start as many spans as otelomni,
// record the same ones (names, parents, kinds, status, attributes, scope)
// and make the same measurements (instruments, units, descriptions,
// buckets, attribute sets, counts, each under the same span); otelomni
// and handwritten hand the span and the histogram the same clock
// readings, so each measurement is its span's duration exactly. On the
// record path, handwrittenRecord makes otelomni's spans.
func TestBenchmarkBaselinesMakeTheSameSpansAsOtelomni(t *testing.T) {
	wantSpans := map[string]int{"": 6, "+metrics": 6}
	wantMeasurements := map[string]int{"+metrics": 7, "-unsampled+metrics": 7}
	for _, path := range benchPaths {
		t.Run(path.otelomniName(), func(t *testing.T) {
			// Three requests of the cycle, each on providers of its own,
			// so that each measurement is of one request.
			for _, i := range []int{0, 1, benchCycle - 1} {
				ours := makeOnPath(t, path, otelomniVariant, i)
				if len(ours.spans) != wantSpans[path.suffix] || len(ours.measurements) != wantMeasurements[path.suffix] || ours.starts != int64(max(len(ours.spans), 1)) {
					t.Fatalf("request %d: otelomni started %d spans, recorded %d and made %d measurements, want %d and %d",
						i, ours.starts, len(ours.spans), len(ours.measurements), wantSpans[path.suffix], wantMeasurements[path.suffix])
				}
				checkOneReading(t, "otelomni", ours, &benchRequests[i])
				for _, v := range benchVariants[1:] {
					name := v.name(path)
					theirs := makeOnPath(t, path, v.make, i)
					if theirs.starts != ours.starts {
						t.Errorf("request %d: %s started %d spans, otelomni %d", i, name, theirs.starts, ours.starts)
					}
					if got, want := shape(theirs.spans), shape(ours.spans); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("request %d: spans:\n%s:\n%s\notelomni:\n%s", i, name, strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
					if fmt.Sprint(theirs.measurements) != fmt.Sprint(ours.measurements) {
						t.Errorf("request %d: measurements:\n%s:\n%s\notelomni:\n%s", i, name,
							strings.Join(theirs.measurements, "\n"), strings.Join(ours.measurements, "\n"))
					}
					if name == "handwritten"+path.suffix {
						checkOneReading(t, name, theirs, &benchRequests[i])
					}
				}
			}
		})
	}
	t.Run("record", func(t *testing.T) {
		run := func(f func(trace.Tracer, *otelomni.Instrumenter)) []string {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			f(tp.Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version), trace.WithSchemaURL(semconv.SchemaURL)),
				otelomni.New(otelomni.WithTracerProvider(tp)))
			assertNoNegativeSpan(t, rec.Ended())
			return shape(rec.Ended())
		}
		got := run(func(_ trace.Tracer, in *otelomni.Instrumenter) { otelomniRecord(in) })
		want := run(func(tr trace.Tracer, _ *otelomni.Instrumenter) { handwrittenRecord(tr) })
		if len(got) != 6 {
			t.Fatalf("otelomni made %d spans, want 6", len(got))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("otelomni:\n%v\nhandwritten:\n%v", got, want)
		}
	})
}

// measurements renders what a reader collected as "scope name unit
// description buckets {attributes} count under-span" lines, sorted, with
// the values left out: under-span names the span of the measurement's
// exemplar (its context's span, when sampled), "-" for none.
func measurements(t *testing.T, rm *metricdata.ResourceMetrics, ss []sdktrace.ReadOnlySpan) []string {
	t.Helper()
	names := map[trace.SpanID]string{}
	for _, s := range ss {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	var out []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				under := []string{}
				for _, e := range dp.Exemplars {
					under = append(under, names[trace.SpanID(e.SpanID)])
				}
				out = append(out, fmt.Sprintf("%s@%s %s %s %s %q %v %s count=%d under=%v", sm.Scope.Name, sm.Scope.Version, sm.Scope.SchemaURL,
					m.Name, m.Unit, m.Description, dp.Bounds, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Count, under))
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkOneReading checks that each measurement of a request that made
// spans is the duration of the span it was made under exactly (exec per
// step: exec's, divided by the steps), as when one clock reading of each
// edge went to both.
func checkOneReading(t *testing.T, who string, m made, info *otelomni.RequestInfo) {
	t.Helper()
	if len(m.spans) == 0 {
		return
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range m.spans {
		byID[s.SpanContext().SpanID()] = s
	}
	for _, sm := range m.metrics.ScopeMetrics {
		for _, met := range sm.Metrics {
			for _, dp := range met.Data.(metricdata.Histogram[float64]).DataPoints {
				if dp.Count != 1 || len(dp.Exemplars) != 1 {
					t.Errorf("%s: %s %v: %d measurements, %d exemplars, want one of each", who, met.Name, dp.Attributes.ToSlice(), dp.Count, len(dp.Exemplars))
					continue
				}
				s, ok := byID[trace.SpanID(dp.Exemplars[0].SpanID)]
				if !ok {
					t.Errorf("%s: %s was measured under no span of the request", who, met.Name)
					continue
				}
				want := s.EndTime().Sub(s.StartTime()).Seconds()
				if met.Name == "omni.diffusion.exec_per_step" {
					want /= float64(info.NumInferenceSteps)
				}
				if dp.Sum != want {
					t.Errorf("%s: %s %v is %v, its span %s lasted %v", who, met.Name, dp.Attributes.ToSlice(), dp.Sum, s.Name(), want)
				}
			}
		}
	}
}
