// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// discard is an exporter that drops everything, so that a benchmark measures
// the instrumentation and the SDK, not a network.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// benchProvider is an SDK provider whose batch processor blocks rather than
// drops, so every span of every iteration is really processed.
func benchProvider(b *testing.B, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(discard{}, sdktrace.WithBlocking()),
	}, opts...)...)
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// benchMeterProvider is an SDK meter provider with a reader that is never
// collected: the cost of recording, as between two exports.
func benchMeterProvider(b *testing.B) *sdkmetric.MeterProvider {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp
}

const (
	benchID    = "chatcmpl-ac59cea85b422f04"
	benchModel = "Qwen/Qwen-Image"
)

var benchInfo = otelomni.RequestInfo{ID: benchID, Model: benchModel}

// otelomniRequest is the benchmark's request on the live path: its span and
// five diffusion phases, started and ended around the engine's calls.
func otelomniRequest(in *otelomni.Instrumenter) {
	_, req := in.Start(context.Background(), benchInfo)
	p := req.StartPhase(context.Background(), spans.Preprocess)
	p.End(nil)
	exec := req.StartPhase(context.Background(), spans.Exec)
	q := req.StartPhase(context.Background(), spans.QueueWait)
	q.End(nil)
	exec.End(nil)
	w := req.StartPhase(context.Background(), spans.OutputReadyWait)
	w.End(nil)
	post := req.StartPhase(context.Background(), spans.Postprocess)
	post.End(nil)
	req.End(nil)
}

// handwrittenRequest makes the same spans as otelomniRequest the way a user
// would with the raw API, with exactly the attributes otelomni emits.
func handwrittenRequest(tracer trace.Tracer) {
	ctx, req := tracer.Start(context.Background(), "omni.request",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			omniattr.RequestID(benchID),
			omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()),
			omniattr.RequestModel(benchModel)))
	_, p := tracer.Start(ctx, "omni.diffusion.preprocess",
		trace.WithAttributes(omniattr.Phase("preprocess"), omniattr.RequestModel(benchModel)))
	p.End()
	_, exec := tracer.Start(ctx, "omni.diffusion.exec",
		trace.WithAttributes(omniattr.Phase("exec"), omniattr.RequestModel(benchModel)))
	_, q := tracer.Start(ctx, "omni.diffusion.queue_wait",
		trace.WithAttributes(omniattr.Phase("queue_wait"), omniattr.RequestModel(benchModel)))
	q.End()
	exec.End()
	_, w := tracer.Start(ctx, "omni.diffusion.output_ready_wait",
		trace.WithAttributes(omniattr.Phase("output_ready_wait"), omniattr.RequestModel(benchModel)))
	w.End()
	_, post := tracer.Start(ctx, "omni.diffusion.postprocess",
		trace.WithAttributes(omniattr.Phase("postprocess"), omniattr.RequestModel(benchModel)))
	post.End()
	req.End()
}

func BenchmarkRequest(b *testing.B) {
	b.Run("otelomni", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b)))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRequest(in)
		}
	})
	b.Run("otelomni+metrics", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b)), otelomni.WithMeterProvider(benchMeterProvider(b)))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRequest(in)
		}
	})
	b.Run("handwritten", func(b *testing.B) {
		tracer := benchProvider(b).Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version))
		b.ReportAllocs()
		for b.Loop() {
			handwrittenRequest(tracer)
		}
	})
	b.Run("floor", func(b *testing.B) {
		tracer := benchProvider(b).Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version))
		f := newFloor()
		b.ReportAllocs()
		for b.Loop() {
			f.request(tracer)
		}
	})
	b.Run("nosdk", func(b *testing.B) {
		if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
			b.Skip("a test installed a global SDK in this process")
		}
		in := otelomni.New() // the global provider, before any SDK is installed
		b.ReportAllocs()
		for b.Loop() {
			otelomniRequest(in)
		}
	})
	b.Run("unsampled", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b, sdktrace.WithSampler(sdktrace.NeverSample()))))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRequest(in)
		}
	})
	b.Run("unsampled+metrics", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b, sdktrace.WithSampler(sdktrace.NeverSample()))),
			otelomni.WithMeterProvider(benchMeterProvider(b)))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRequest(in)
		}
	})
	b.Run("disabled", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(noop.NewTracerProvider()))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRequest(in)
		}
	})
	// The floors under "otelomni+metrics" and "unsampled+metrics": the
	// floor's spans and the six measurements otelomni makes of this
	// request, straight on the SDK's histograms with attribute sets built
	// once (see floorMetrics).
	b.Run("floor+metrics", func(b *testing.B) {
		tracer := benchProvider(b).Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version))
		f, m := newFloor(), newFloorMetrics(b, benchMeterProvider(b))
		b.ReportAllocs()
		for b.Loop() {
			m.run(f, tracer)
		}
	})
	b.Run("floor-unsampled+metrics", func(b *testing.B) {
		tracer := benchProvider(b, sdktrace.WithSampler(sdktrace.NeverSample())).Tracer(otelomni.ScopeName)
		f, m := newFloor(), newFloorMetrics(b, benchMeterProvider(b))
		b.ReportAllocs()
		for b.Loop() {
			m.run(f, tracer)
		}
	})
	// The floor under "unsampled": the same request span, its attributes
	// at start, unsampled; no phase is started.
	b.Run("floor-unsampled", func(b *testing.B) {
		tracer := benchProvider(b, sdktrace.WithSampler(sdktrace.NeverSample())).Tracer(otelomni.ScopeName)
		f := newFloor()
		b.ReportAllocs()
		for b.Loop() {
			f.request(tracer)
		}
	})
	// The API's own cost of the request span's Start with no SDK
	// installed: the floor under "nosdk".
	b.Run("floor-nosdk", func(b *testing.B) {
		if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
			b.Skip("a test installed a global SDK in this process")
		}
		tracer := otel.GetTracerProvider().Tracer(otelomni.ScopeName)
		f := newFloor()
		b.ReportAllocs()
		for b.Loop() {
			f.request(tracer)
		}
	})
}

// floor makes the same six spans with the same attributes with the fewest
// API calls a user could write: start options built once, the phases'
// contexts discarded. It is the limit otelomni approaches.
type floor struct {
	request0 []trace.SpanStartOption
	phase    [plan.NumPhases][]trace.SpanStartOption
}

func newFloor() *floor {
	f := &floor{request0: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		omniattr.RequestID(benchID), omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()), omniattr.RequestModel(benchModel))}}
	for _, p := range plan.Phases() {
		f.phase[p] = []trace.SpanStartOption{trace.WithAttributes(omniattr.Phase(p.String()), omniattr.RequestModel(benchModel))}
	}
	return f
}

func (f *floor) request(tracer trace.Tracer) {
	ctx, req := tracer.Start(context.Background(), "omni.request", f.request0...)
	if !req.IsRecording() {
		// As otelomni: no phase span under a request that records nothing.
		req.End()
		return
	}
	_, p := tracer.Start(ctx, "omni.diffusion.preprocess", f.phase[spans.Preprocess]...)
	p.End()
	_, exec := tracer.Start(ctx, "omni.diffusion.exec", f.phase[spans.Exec]...)
	_, q := tracer.Start(ctx, "omni.diffusion.queue_wait", f.phase[spans.QueueWait]...)
	q.End()
	exec.End()
	_, w := tracer.Start(ctx, "omni.diffusion.output_ready_wait", f.phase[spans.OutputReadyWait]...)
	w.End()
	_, post := tracer.Start(ctx, "omni.diffusion.postprocess", f.phase[spans.Postprocess]...)
	post.End()
	req.End()
}

// floorMetrics makes the measurements otelomni makes of the benchmark's
// request (five phase durations and the request's duration; it emits no
// output, so no time to a first output) with the fewest calls: the same instruments, bucket
// boundaries and attributes, the attribute sets built once, each duration
// from two readings of the clock beside the SDK's own.
type floorMetrics struct {
	phase, request metric.Float64Histogram
	phaseOpt       [plan.NumPhases][]metric.RecordOption
	requestOpt     []metric.RecordOption
}

func newFloorMetrics(tb testing.TB, mp metric.MeterProvider) *floorMetrics {
	m := mp.Meter(otelomni.ScopeName)
	h := func(name string) metric.Float64Histogram {
		x, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300))
		if err != nil {
			tb.Fatal(err)
		}
		return x
	}
	f := &floorMetrics{phase: h("omni.phase.duration"), request: h("gen_ai.server.request.duration")}
	for _, p := range plan.Phases() {
		f.phaseOpt[p] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(omniattr.RequestModel(benchModel), omniattr.Phase(p.String())))}
	}
	f.requestOpt = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
		omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()), omniattr.ProviderName("_OTHER"), omniattr.RequestModel(benchModel)))}
	return f
}

func (m *floorMetrics) run(f *floor, tracer trace.Tracer) {
	start := time.Now()
	ctx, req := tracer.Start(context.Background(), "omni.request", f.request0...)
	phase := func(p spans.Phase, s trace.Span, t0 time.Time) time.Time {
		t1 := time.Now()
		s.End()
		m.phase.Record(ctx, t1.Sub(t0).Seconds(), m.phaseOpt[p]...)
		return t1
	}
	if req.IsRecording() {
		t := time.Now()
		_, p := tracer.Start(ctx, "omni.diffusion.preprocess", f.phase[spans.Preprocess]...)
		phase(spans.Preprocess, p, t)
		te := time.Now()
		_, exec := tracer.Start(ctx, "omni.diffusion.exec", f.phase[spans.Exec]...)
		t = time.Now()
		_, q := tracer.Start(ctx, "omni.diffusion.queue_wait", f.phase[spans.QueueWait]...)
		phase(spans.QueueWait, q, t)
		phase(spans.Exec, exec, te)
		t = time.Now()
		_, w := tracer.Start(ctx, "omni.diffusion.output_ready_wait", f.phase[spans.OutputReadyWait]...)
		phase(spans.OutputReadyWait, w, t)
		t = time.Now()
		_, post := tracer.Start(ctx, "omni.diffusion.postprocess", f.phase[spans.Postprocess]...)
		phase(spans.Postprocess, post, t)
	} else {
		// Unsampled, otelomni still measures every phase.
		for _, p := range []spans.Phase{spans.Preprocess, spans.QueueWait, spans.Exec, spans.OutputReadyWait, spans.Postprocess} {
			t0 := time.Now()
			m.phase.Record(ctx, time.Since(t0).Seconds(), m.phaseOpt[p]...)
		}
	}
	req.End()
	m.request.Record(ctx, time.Since(start).Seconds(), m.requestOpt...)
}

// stepsRequest is a request with n spans: the request, exec, forward, and
// n-3 denoise steps (per-step spans are on).
func stepsRequest(in *otelomni.Instrumenter, n int) {
	_, req := in.Start(context.Background(), benchInfo)
	exec := req.StartPhase(context.Background(), spans.Exec)
	fwd := req.StartPhase(exec.Context(), spans.Forward)
	for i := 0; i < n-3; i++ {
		s := req.StartPhase(fwd.Context(), spans.DenoiseStep, attrs.StepKey.Int(i))
		s.End(nil)
	}
	fwd.End(nil)
	exec.End(nil)
	req.End(nil)
}

// BenchmarkScaling shows how the cost grows: with the spans per request
// (5, 20 and 100 phases; the 100 are a 100-step denoise loop's per-step
// spans), and with the goroutines making requests at once (1, 8, 64). The
// figure to watch is ns/span, which should stay flat.
func BenchmarkScaling(b *testing.B) {
	for _, phases := range []int{5, 20, 100} {
		b.Run(fmt.Sprintf("phases=%d", phases), func(b *testing.B) {
			in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b)), otelomni.WithDenoiseSteps(true))
			b.ReportAllocs()
			for b.Loop() {
				if phases == 5 {
					otelomniRequest(in)
				} else {
					stepsRequest(in, phases+1)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(phases+1), "ns/span")
		})
	}
	for _, goroutines := range []int{1, 8, 64} {
		for _, who := range []string{"otelomni", "floor"} {
			b.Run(fmt.Sprintf("goroutines=%d/%s", goroutines, who), func(b *testing.B) {
				tp := benchProvider(b)
				in := otelomni.New(otelomni.WithTracerProvider(tp))
				tracer := tp.Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version))
				f := newFloor()
				one := func() { otelomniRequest(in) }
				if who == "floor" {
					one = func() { f.request(tracer) }
				}
				b.ReportAllocs()
				// Exactly this many goroutines share b.N requests (RunParallel
				// would start a multiple of GOMAXPROCS).
				var wg sync.WaitGroup
				n := b.N
				for g := 0; g < goroutines; g++ {
					share := n / goroutines
					if g < n%goroutines {
						share++
					}
					wg.Go(func() {
						for i := 0; i < share; i++ {
							one()
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/6, "ns/span")
			})
		}
	}
}

// benchRecord is the benchmark's request as a timing record.
var (
	benchArrival = time.Date(2025, 1, 30, 12, 0, 0, 0, time.UTC)
	benchEnd     = benchArrival.Add(2200 * time.Millisecond)
	benchRecord  = spans.DiffusionRecord{
		Preprocess:      spans.Between(benchArrival.Add(1*time.Millisecond), benchArrival.Add(10*time.Millisecond)),
		Exec:            spans.Between(benchArrival.Add(10*time.Millisecond), benchArrival.Add(2110*time.Millisecond)),
		QueueWait:       spans.Between(benchArrival.Add(11*time.Millisecond), benchArrival.Add(23*time.Millisecond)),
		OutputReadyWait: spans.Between(benchArrival.Add(2110*time.Millisecond), benchArrival.Add(2115*time.Millisecond)),
		Postprocess:     spans.Between(benchArrival.Add(2115*time.Millisecond), benchArrival.Add(2160*time.Millisecond)),
	}
	benchRecordInfo = otelomni.RequestInfo{ID: benchID, Model: benchModel, Start: benchArrival}
)

func otelomniRecord(in *otelomni.Instrumenter) {
	_, req := in.Start(context.Background(), benchRecordInfo)
	_ = req.Record(&benchRecord)
	_ = req.EndAt(benchEnd, nil)
}

func handwrittenRecord(tracer trace.Tracer) {
	ctx, req := tracer.Start(context.Background(), "omni.request",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(benchArrival),
		trace.WithAttributes(
			omniattr.RequestID(benchID),
			omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()),
			omniattr.RequestModel(benchModel)))
	phase := func(parent context.Context, p spans.Phase, iv spans.Interval) context.Context {
		c, s := tracer.Start(parent, p.SpanName(), trace.WithTimestamp(iv.Start()),
			trace.WithAttributes(omniattr.Phase(p.String()), omniattr.RequestModel(benchModel)))
		s.End(trace.WithTimestamp(iv.End()))
		return c
	}
	phase(ctx, spans.Preprocess, benchRecord.Preprocess)
	phase(ctx, spans.Exec, benchRecord.Exec)
	phase(ctx, spans.QueueWait, benchRecord.QueueWait)
	phase(ctx, spans.OutputReadyWait, benchRecord.OutputReadyWait)
	phase(ctx, spans.Postprocess, benchRecord.Postprocess)
	req.End(trace.WithTimestamp(benchEnd))
}

func BenchmarkRecord(b *testing.B) {
	b.Run("otelomni", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b)))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRecord(in)
		}
	})
	b.Run("handwritten", func(b *testing.B) {
		tracer := benchProvider(b).Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version))
		b.ReportAllocs()
		for b.Loop() {
			handwrittenRecord(tracer)
		}
	})
	b.Run("unsampled", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b, sdktrace.WithSampler(sdktrace.NeverSample()))))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRecord(in)
		}
	})
	b.Run("disabled", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(noop.NewTracerProvider()))
		b.ReportAllocs()
		for b.Loop() {
			otelomniRecord(in)
		}
	})
}

// batchedRequests makes n requests whose execs run as one batch: each
// request's cost includes its share of the batch span and the links.
func batchedRequests(in *otelomni.Instrumenter, reqs []*otelomni.Request, execs []otelomni.ActivePhase, batched bool) {
	for i := range reqs {
		ctx, req := in.Start(context.Background(), benchInfo)
		reqs[i] = req
		execs[i] = req.StartPhase(ctx, spans.Exec)
	}
	var b *otelomni.Batch
	if batched {
		b = in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "step-1", Model: benchModel}, reqs...)
	}
	for i := range reqs {
		execs[i].End(nil)
		reqs[i].End(nil)
	}
	b.End(nil)
}

// BenchmarkBatch reports, per request, a request whose exec runs in a batch
// of four (its share of the batch span and the links both ways) beside the
// same request run alone.
func BenchmarkBatch(b *testing.B) {
	const size = 4
	for _, batched := range []bool{false, true} {
		name := "unbatched"
		if batched {
			name = "batched"
		}
		b.Run(name, func(b *testing.B) {
			in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b)))
			reqs := make([]*otelomni.Request, size)
			execs := make([]otelomni.ActivePhase, size)
			b.ReportAllocs()
			for b.Loop() {
				batchedRequests(in, reqs, execs, batched)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/size, "ns/request")
		})
	}
}
