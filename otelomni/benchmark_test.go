// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
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

// benchInfo is the one request of the benchmarks that do not compare with
// hand-written code (the record path, batches).
var benchInfo = otelomni.RequestInfo{ID: benchID, Model: benchModel}

// benchCycle is how many distinct requests BenchmarkRequest and
// BenchmarkScaling cycle through: more than any cache of the SDK or of
// the hardware could keep of one request for the next, so that no variant
// gains from what a stream of real requests does not repeat.
const benchCycle = 4096

// benchGuidance are the guidance scales of the cycle's requests.
var benchGuidance = [...]float64{2.5, 4, 5, 7.5}

// benchRequests are the requests of the cycle: what a text-to-image
// engine's traffic varies per request (its id, steps, size and guidance
// scale), for the one model, modality and stage the engine serves, as the
// demo engine describes its requests.
var benchRequests = func() []otelomni.RequestInfo {
	steps := [...]int{20, 28, 30, 40, 50}
	sizes := [...][2]int{{1024, 1024}, {1328, 1328}, {768, 1344}, {512, 512}}
	out := make([]otelomni.RequestInfo, benchCycle)
	for i := range out {
		size := sizes[i%len(sizes)]
		out[i] = otelomni.RequestInfo{
			ID: fmt.Sprintf("chatcmpl-%016x", splitmix64(uint64(i))), Model: benchModel, Modality: attrs.ModalityImage,
			NumInferenceSteps: steps[i%len(steps)], GuidanceScale: &benchGuidance[i/len(steps)%len(benchGuidance)],
			Height: size[0], Width: size[1],
			Stage: otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion, ReplicaID: "dit-0"},
		}
	}
	return out
}()

// splitmix64 is a bijection of the uint64s that scatters their bits: the
// cycle's ids are distinct and look random.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// requestCycle hands out the indexes of the cycle's requests in turn.
type requestCycle struct{ i int }

func (c *requestCycle) next() int {
	i := c.i
	c.i = (c.i + 1) % len(benchRequests)
	return i
}

// otelomniRequest is the benchmark's request on the live path: its span
// and five diffusion phases (preprocess, exec with queue wait inside it,
// output-ready wait, postprocess), started and ended around the engine's
// calls.
func otelomniRequest(in *otelomni.Instrumenter, info *otelomni.RequestInfo) {
	ctx, req := in.Start(context.Background(), *info)
	p := req.StartPhase(ctx, spans.Preprocess)
	p.End(nil)
	exec := req.StartPhase(ctx, spans.Exec)
	q := req.StartPhase(ctx, spans.QueueWait)
	q.End(nil)
	exec.End(nil)
	w := req.StartPhase(ctx, spans.OutputReadyWait)
	w.End(nil)
	post := req.StartPhase(ctx, spans.Postprocess)
	post.End(nil)
	req.End(nil)
}

// handwritten is what a careful user writes with the raw API for the spans
// and measurements otelomni makes of the benchmark's request, for an
// engine serving one model: the instruments, the phases' span attributes
// and the measurements' attribute sets built once (they are the same for
// every request of the model), and per request its own attributes at its
// start, one clock reading per edge given to the span (trace.WithTimestamp)
// and to the histogram, IsRecording and Enabled asked once, before the
// phases. TestBenchmarkBaselinesMakeTheSameSpansAsOtelomni proves that it
// makes otelomni's spans and measurements on every path.
type handwritten struct {
	tracer         trace.Tracer
	phase, perStep metric.Float64Histogram
	requestDur     genaiconv.ServerRequestDuration

	phaseStart [plan.NumPhases]trace.SpanStartOption
	phaseRec   [plan.NumPhases][]metric.RecordOption
	scopeRec   []metric.RecordOption
	requestRec []metric.RecordOption
}

// The instruments' bucket boundaries, as docs/metrics.md gives them.
var (
	benchDurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300}
	benchPerStepBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

func newHandwritten(tb testing.TB, tp trace.TracerProvider, mp metric.MeterProvider) *handwritten {
	m := mp.Meter(otelomni.ScopeName, metric.WithInstrumentationVersion(otelomni.Version), metric.WithSchemaURL(semconv.SchemaURL))
	h := &handwritten{tracer: tp.Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version), trace.WithSchemaURL(semconv.SchemaURL))}
	var err1, err2, err3 error
	h.phase, err1 = m.Float64Histogram("omni.phase.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one measured phase of a request; an unmeasured phase records nothing."),
		metric.WithExplicitBucketBoundaries(benchDurationBuckets...))
	h.perStep, err2 = m.Float64Histogram("omni.diffusion.exec_per_step", metric.WithUnit("s"),
		metric.WithDescription("A diffusion request's exec divided by its number of inference steps."),
		metric.WithExplicitBucketBoundaries(benchPerStepBuckets...))
	h.requestDur, err3 = genaiconv.NewServerRequestDuration(m, metric.WithExplicitBucketBoundaries(benchDurationBuckets...))
	if err := errors.Join(err1, err2, err3); err != nil {
		tb.Fatal(err)
	}
	model, stageType, modality := semconv.GenAIRequestModelKey.String(benchModel), attrs.StageTypeKey.String(attrs.StageDiffusion),
		attrs.OutputModalityKey.String(attrs.ModalityImage)
	for _, p := range plan.Phases() {
		h.phaseStart[p] = trace.WithAttributes(attrs.PhaseKey.String(p.String()), model)
		h.phaseRec[p] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(model, stageType, modality, attrs.PhaseKey.String(p.String())))}
	}
	h.scopeRec = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(model, stageType, modality))}
	h.requestRec = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
		semconv.GenAIOperationNameKey.String(semconv.GenAIOperationNameGenerateContent.Value.AsString()), semconv.GenAIProviderNameKey.String("_OTHER"), model, modality))}
	return h
}

// request makes the spans and measurements of one request.
func (h *handwritten) request(info *otelomni.RequestInfo) {
	t0 := time.Now()
	ctx, span := h.tracer.Start(context.Background(), spans.RequestSpanName,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(t0),
		trace.WithAttributes(
			attrs.RequestIDKey.String(info.ID),
			semconv.GenAIOperationNameKey.String(semconv.GenAIOperationNameGenerateContent.Value.AsString()),
			semconv.GenAIRequestModelKey.String(info.Model),
			attrs.OutputModalityKey.String(info.Modality),
			semconv.GenAIOutputTypeKey.String("image"),
			attrs.NumInferenceStepsKey.Int(info.NumInferenceSteps),
			attrs.GuidanceScaleKey.Float64(*info.GuidanceScale),
			attrs.HeightKey.Int(info.Height),
			attrs.WidthKey.Int(info.Width),
			attrs.StageIDKey.Int(info.Stage.ID),
			attrs.StageTypeKey.String(info.Stage.Type),
			attrs.StageNameKey.String(info.Stage.Name),
			attrs.ReplicaIDKey.String(info.Stage.ReplicaID)))
	r := handwrittenRequest{h: h, ctx: ctx, sampled: span.IsRecording(), measured: h.phase.Enabled(ctx)}
	if !r.sampled && !r.measured {
		span.End()
		return
	}
	pre := r.start(spans.Preprocess)
	r.end(pre)
	exec := r.start(spans.Exec)
	q := r.start(spans.QueueWait)
	r.end(q)
	if secs := r.end(exec); r.measured && info.NumInferenceSteps > 0 {
		h.perStep.Record(exec.ctx, secs/float64(info.NumInferenceSteps), h.scopeRec...)
	}
	w := r.start(spans.OutputReadyWait)
	r.end(w)
	post := r.start(spans.Postprocess)
	r.end(post)
	t1 := time.Now()
	span.End(trace.WithTimestamp(t1))
	if r.measured {
		h.requestDur.Inst().Record(ctx, t1.Sub(t0).Seconds(), h.requestRec...)
	}
}

// handwrittenRequest is one request of handwritten under way: its span's
// context, whether its span records, and whether its measurements are.
type handwrittenRequest struct {
	h                 *handwritten
	ctx               context.Context
	sampled, measured bool
}

// handwrittenPhase is one phase of a handwrittenRequest under way.
type handwrittenPhase struct {
	p     spans.Phase
	ctx   context.Context
	span  trace.Span
	start time.Time
}

// start starts phase p now, under the request's span.
func (r *handwrittenRequest) start(p spans.Phase) handwrittenPhase {
	ph := handwrittenPhase{p: p, ctx: r.ctx, start: time.Now()}
	if r.sampled {
		ph.ctx, ph.span = r.h.tracer.Start(r.ctx, p.SpanName(), r.h.phaseStart[p], trace.WithTimestamp(ph.start))
	}
	return ph
}

// end ends phase ph now, records its duration and returns it in seconds.
func (r *handwrittenRequest) end(ph handwrittenPhase) float64 {
	t := time.Now()
	if ph.span != nil {
		ph.span.End(trace.WithTimestamp(t))
	}
	secs := t.Sub(ph.start).Seconds()
	if r.measured {
		r.h.phase.Record(ph.ctx, secs, r.h.phaseRec[ph.p]...)
	}
	return secs
}

// benchPath is one path a request takes through the SDK: sampled or not,
// with the histograms on or not, or with no SDK installed. Each path has
// three variants in BenchmarkRequest, made from the same providers:
// otelomni, handwritten and floor.
type benchPath struct {
	// suffix names the path: "handwritten"+suffix and "floor"+suffix are
	// its variants.
	suffix string
	// sdk: an SDK tracer provider is installed, sampling when sampled.
	sdk, sampled bool
	// metrics: an SDK meter provider is installed.
	metrics bool
}

// otelomniName is the name of the path's otelomni variant.
func (p benchPath) otelomniName() string {
	if p.suffix == "" || p.suffix == "+metrics" {
		return "otelomni" + p.suffix
	}
	return p.suffix[1:]
}

var benchPaths = []benchPath{
	{suffix: "", sdk: true, sampled: true},
	{suffix: "+metrics", sdk: true, sampled: true, metrics: true},
	{suffix: "-unsampled", sdk: true},
	{suffix: "-unsampled+metrics", sdk: true, metrics: true},
	{suffix: "-nosdk"},
}

// benchVariant makes, from the path's providers, the function that makes
// request i of the cycle.
type benchVariant func(tb testing.TB, tp trace.TracerProvider, mp metric.MeterProvider) func(i int)

func otelomniVariant(_ testing.TB, tp trace.TracerProvider, mp metric.MeterProvider) func(int) {
	in := otelomni.New(otelomni.WithTracerProvider(tp), otelomni.WithMeterProvider(mp))
	return func(i int) { otelomniRequest(in, &benchRequests[i]) }
}

func handwrittenVariant(tb testing.TB, tp trace.TracerProvider, mp metric.MeterProvider) func(int) {
	h := newHandwritten(tb, tp, mp)
	return func(i int) { h.request(&benchRequests[i]) }
}

func floorVariant(tb testing.TB, tp trace.TracerProvider, mp metric.MeterProvider) func(int) {
	f := newFloor(tp)
	if m := newFloorMetrics(tb, mp); m.h.phase.Enabled(context.Background()) {
		return func(i int) { m.run(f, i) }
	}
	return f.request
}

// benchVariants are the three variants of each path, in the order they
// run: each otelomni variant beside the two it is compared with.
var benchVariants = []struct {
	name func(benchPath) string
	make benchVariant
}{
	{benchPath.otelomniName, otelomniVariant},
	{func(p benchPath) string { return "handwritten" + p.suffix }, handwrittenVariant},
	{func(p benchPath) string { return "floor" + p.suffix }, floorVariant},
}

// cpuPerOp starts counting the process's CPU time (every thread's: the
// batch processor's and the garbage collector's too), and returns the
// function that reports it per operation as cpu-ns/op once the loop is
// done. On a shared machine it is the figure a neighbour moves least:
// time spent waiting for a core is not counted.
func cpuPerOp(b *testing.B) func() {
	c0, ok := processCPU()
	return func() {
		if c1, ok1 := processCPU(); ok && ok1 && b.N > 0 {
			b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
		}
	}
}

// BenchmarkRequest measures one request on each path, made by otelomni, by
// the same spans and measurements written by hand (handwritten), and by
// its floor (floor: the fewest calls, with every option built before the
// run), each on the cycle's requests. The providers are those of the
// path: an SDK tracer provider whose batch processor blocks rather than
// drops and an SDK meter provider never collected, or, where the path has
// none, the global ones before any SDK is installed. Each reports its
// process's CPU time per request beside the time (cpu-ns/op).
func BenchmarkRequest(b *testing.B) {
	for _, path := range benchPaths {
		for _, v := range benchVariants {
			b.Run(v.name(path), func(b *testing.B) {
				tp, mp := otel.GetTracerProvider(), otel.GetMeterProvider()
				if _, ok := tp.(*sdktrace.TracerProvider); ok && !path.sdk {
					b.Skip("a test installed a global SDK in this process")
				}
				if path.sdk {
					var opts []sdktrace.TracerProviderOption
					if !path.sampled {
						opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
					}
					tp = benchProvider(b, opts...)
				}
				if path.metrics {
					mp = benchMeterProvider(b)
				}
				request := v.make(b, tp, mp)
				var cycle requestCycle
				b.ReportAllocs()
				cpu := cpuPerOp(b)
				for b.Loop() {
					request(cycle.next())
				}
				cpu()
			})
		}
	}
	b.Run("disabled", func(b *testing.B) {
		in := otelomni.New(otelomni.WithTracerProvider(noop.NewTracerProvider()))
		var cycle requestCycle
		b.ReportAllocs()
		for b.Loop() {
			otelomniRequest(in, &benchRequests[cycle.next()])
		}
	})
}

// floor makes the same six spans with the same attributes with the fewest
// API calls: every request's start options built before the run (which an
// engine, not knowing its requests in advance, cannot do), the phases'
// contexts discarded, the SDK reading its own clock. It is the limit
// otelomni and handwritten approach.
type floor struct {
	tracer trace.Tracer
	// start holds the start options of each request of the cycle.
	start [][]trace.SpanStartOption
	phase [plan.NumPhases][]trace.SpanStartOption
}

func newFloor(tp trace.TracerProvider) *floor {
	f := &floor{
		tracer: tp.Tracer(otelomni.ScopeName, trace.WithInstrumentationVersion(otelomni.Version), trace.WithSchemaURL(semconv.SchemaURL)),
		start:  make([][]trace.SpanStartOption, len(benchRequests)),
	}
	for i := range benchRequests {
		info := &benchRequests[i]
		f.start[i] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attrs.RequestIDKey.String(info.ID),
			semconv.GenAIOperationNameKey.String(semconv.GenAIOperationNameGenerateContent.Value.AsString()),
			semconv.GenAIRequestModelKey.String(info.Model),
			attrs.OutputModalityKey.String(info.Modality),
			semconv.GenAIOutputTypeKey.String("image"),
			attrs.NumInferenceStepsKey.Int(info.NumInferenceSteps),
			attrs.GuidanceScaleKey.Float64(*info.GuidanceScale),
			attrs.HeightKey.Int(info.Height),
			attrs.WidthKey.Int(info.Width),
			attrs.StageIDKey.Int(info.Stage.ID),
			attrs.StageTypeKey.String(info.Stage.Type),
			attrs.StageNameKey.String(info.Stage.Name),
			attrs.ReplicaIDKey.String(info.Stage.ReplicaID))}
	}
	for _, p := range plan.Phases() {
		f.phase[p] = []trace.SpanStartOption{trace.WithAttributes(attrs.PhaseKey.String(p.String()), semconv.GenAIRequestModelKey.String(benchModel))}
	}
	return f
}

// request makes request i of the cycle.
func (f *floor) request(i int) {
	ctx, req := f.tracer.Start(context.Background(), spans.RequestSpanName, f.start[i]...)
	if !req.IsRecording() {
		// As otelomni: no phase span under a request that records nothing.
		req.End()
		return
	}
	_, p := f.tracer.Start(ctx, "omni.diffusion.preprocess", f.phase[spans.Preprocess]...)
	p.End()
	_, exec := f.tracer.Start(ctx, "omni.diffusion.exec", f.phase[spans.Exec]...)
	_, q := f.tracer.Start(ctx, "omni.diffusion.queue_wait", f.phase[spans.QueueWait]...)
	q.End()
	exec.End()
	_, w := f.tracer.Start(ctx, "omni.diffusion.output_ready_wait", f.phase[spans.OutputReadyWait]...)
	w.End()
	_, post := f.tracer.Start(ctx, "omni.diffusion.postprocess", f.phase[spans.Postprocess]...)
	post.End()
	req.End()
}

// floorMetrics makes the measurements otelomni makes of the benchmark's
// request (five phase durations, exec per step and the request's
// duration; it emits no output, so no time to a first output) with the
// fewest calls: the same instruments, bucket boundaries and attributes,
// the attribute sets built once, each duration from two readings of the
// clock beside the SDK's own.
type floorMetrics struct {
	h *handwritten
}

func newFloorMetrics(tb testing.TB, mp metric.MeterProvider) *floorMetrics {
	// The instruments and attribute sets are handwritten's, built once.
	return &floorMetrics{h: newHandwritten(tb, noop.NewTracerProvider(), mp)}
}

// run makes request i of the cycle, spans and measurements.
func (m *floorMetrics) run(f *floor, i int) {
	steps := float64(benchRequests[i].NumInferenceSteps)
	start := time.Now()
	ctx, req := f.tracer.Start(context.Background(), spans.RequestSpanName, f.start[i]...)
	phase := func(ctx context.Context, p spans.Phase, s trace.Span, t0 time.Time) float64 {
		t1 := time.Now()
		s.End()
		secs := t1.Sub(t0).Seconds()
		m.h.phase.Record(ctx, secs, m.h.phaseRec[p]...)
		return secs
	}
	if req.IsRecording() {
		t := time.Now()
		pctx, p := f.tracer.Start(ctx, "omni.diffusion.preprocess", f.phase[spans.Preprocess]...)
		phase(pctx, spans.Preprocess, p, t)
		te := time.Now()
		ectx, exec := f.tracer.Start(ctx, "omni.diffusion.exec", f.phase[spans.Exec]...)
		t = time.Now()
		qctx, q := f.tracer.Start(ctx, "omni.diffusion.queue_wait", f.phase[spans.QueueWait]...)
		phase(qctx, spans.QueueWait, q, t)
		m.h.perStep.Record(ectx, phase(ectx, spans.Exec, exec, te)/steps, m.h.scopeRec...)
		t = time.Now()
		wctx, w := f.tracer.Start(ctx, "omni.diffusion.output_ready_wait", f.phase[spans.OutputReadyWait]...)
		phase(wctx, spans.OutputReadyWait, w, t)
		t = time.Now()
		postCtx, post := f.tracer.Start(ctx, "omni.diffusion.postprocess", f.phase[spans.Postprocess]...)
		phase(postCtx, spans.Postprocess, post, t)
	} else {
		// Unsampled, otelomni still measures every phase.
		for _, p := range [...]spans.Phase{spans.Preprocess, spans.QueueWait, spans.Exec, spans.OutputReadyWait, spans.Postprocess} {
			t0 := time.Now()
			secs := time.Since(t0).Seconds()
			m.h.phase.Record(ctx, secs, m.h.phaseRec[p]...)
			if p == spans.Exec {
				m.h.perStep.Record(ctx, secs/steps, m.h.scopeRec...)
			}
		}
	}
	req.End()
	m.h.requestDur.Inst().Record(ctx, time.Since(start).Seconds(), m.h.requestRec...)
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
			var cycle requestCycle
			b.ReportAllocs()
			for b.Loop() {
				if phases == 5 {
					otelomniRequest(in, &benchRequests[cycle.next()])
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
				f := newFloor(tp)
				one := func(i int) { otelomniRequest(in, &benchRequests[i]) }
				if who == "floor" {
					one = f.request
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
					// Each goroutine its own part of the cycle.
					cycle := requestCycle{i: g * benchCycle / goroutines}
					wg.Go(func() {
						for range share {
							one(cycle.next())
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
