package otelomni_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

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
