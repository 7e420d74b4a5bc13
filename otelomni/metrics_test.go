// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"testing"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// metered is an instrumenter with a manual metric reader and, unless
// traces is false, a span recorder.
type metered struct {
	*recorded
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func meterOf(_ *testing.T, m *metered) *sdkmetric.MeterProvider { return m.mp }

func newMetered(t *testing.T, traces bool, tpOpts ...sdktrace.TracerProviderOption) *metered {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	r := newRecorded(t)
	if len(tpOpts) > 0 {
		r.tp = sdktrace.NewTracerProvider(append(tpOpts, sdktrace.WithSpanProcessor(r.rec))...)
	}
	opts := []otelomni.Option{otelomni.WithMeterProvider(mp), otelomni.WithTracerProvider(r.tp)}
	if !traces {
		opts[1] = otelomni.WithTracerProvider(noop.NewTracerProvider())
	}
	r.in = otelomni.New(opts...)
	return &metered{recorded: r, reader: reader, mp: mp}
}

// histograms collects and returns each float histogram's data points by
// instrument name, checking the scope.
func (m *metered) histograms(t *testing.T) map[string][]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]metricdata.HistogramDataPoint[float64]{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelomni.ScopeName || sm.Scope.Version != otelomni.Version {
			t.Errorf("metric scope %+v", sm.Scope)
		}
		for _, mm := range sm.Metrics {
			if h, ok := mm.Data.(metricdata.Histogram[float64]); ok {
				out[mm.Name] = append(out[mm.Name], h.DataPoints...)
			}
			if h, ok := mm.Data.(metricdata.Histogram[int64]); ok {
				for _, dp := range h.DataPoints {
					out[mm.Name] = append(out[mm.Name], metricdata.HistogramDataPoint[float64]{Attributes: dp.Attributes, Count: dp.Count})
				}
			}
		}
	}
	return out
}

// phaseCount returns how many measurements of phase p the phase histogram
// holds.
func phaseCount(dps []metricdata.HistogramDataPoint[float64], p spans.Phase) uint64 {
	var n uint64
	for _, dp := range dps {
		if v, ok := dp.Attributes.Value(attrs.PhaseKey); ok && v.AsString() == p.String() {
			n += dp.Count
		}
	}
	return n
}

func TestPreprocessCountIsTheRequestsThatHadAPreprocessor(t *testing.T) {
	for _, path := range []string{"live", "record"} {
		t.Run(path, func(t *testing.T) {
			m := newMetered(t, true)
			const n, k = 10, 4
			for i := 0; i < n; i++ {
				_, req := m.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "r", Model: "m", Stage: otelomni.StageInfo{Type: attrs.StageDiffusion}})
				if path == "live" {
					if i < k {
						req.StartPhase(context.Background(), spans.Preprocess).End(nil)
					}
					req.StartPhase(context.Background(), spans.Exec).End(nil)
				} else {
					rec := &spans.DiffusionRecord{Exec: spans.Between(at(10), at(20))}
					if i < k {
						rec.Preprocess = spans.Between(at(0), at(10))
					}
					_ = req.Record(rec)
				}
				req.End(nil)
			}
			h := m.histograms(t)
			if got := phaseCount(h["omni.phase.duration"], spans.Preprocess); got != k {
				t.Errorf("preprocess count %d, want %d (the requests that had a pre-processor), not %d", got, k, n)
			}
			if got := phaseCount(h["omni.phase.duration"], spans.Exec); got != n {
				t.Errorf("exec count %d, want %d", got, n)
			}
			if got := phaseCount(h["omni.phase.duration"], spans.QueueWait); got != 0 {
				t.Errorf("queue wait was never measured, count %d", got)
			}
			spansByName := byName(m.rec.Ended())
			for _, p := range []spans.Phase{spans.Preprocess, spans.Exec} {
				if got := phaseCount(h["omni.phase.duration"], p); int(got) != len(spansByName[p.SpanName()]) {
					t.Errorf("%v: %d measurements, %d spans: one measurement must make both", p, got, len(spansByName[p.SpanName()]))
				}
			}
		})
	}
}

func TestMeasuredZeroLandsInTheFirstBucket(t *testing.T) {
	m := newMetered(t, true)
	_, req := m.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "r"})
	_ = req.RecordPhase(spans.QueueWait, spans.Between(at(1), at(1)), nil)
	req.End(nil)
	dps := m.histograms(t)["omni.phase.duration"]
	if len(dps) != 1 {
		t.Fatalf("%d data points, want 1", len(dps))
	}
	for _, dp := range dps {
		if dp.Count != 1 || dp.BucketCounts[0] != 1 || dp.Sum != 0 {
			t.Errorf("a measured 0: count %d, first bucket %d, sum %v", dp.Count, dp.BucketCounts[0], dp.Sum)
		}
		if dp.Bounds[0] != 0.001 || dp.Bounds[len(dp.Bounds)-1] != 300 {
			t.Errorf("buckets %v, want 1 ms to 300 s", dp.Bounds)
		}
	}
}

func TestSynchronousOutputRecordsNoWait(t *testing.T) {
	m := newMetered(t, true)
	_, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "stream", Start: at(0)})
	_ = req.Record(&spans.DiffusionRecord{
		Exec: spans.Between(at(0), at(100)),
		Outputs: []spans.OutputTiming{
			{ReadyWait: spans.Between(at(40), at(45)), Postprocess: spans.Between(at(45), at(50))},
			{Postprocess: spans.Between(at(100), at(110)), Final: true},
		},
	})
	_ = req.EndAt(at(120), nil)
	h := m.histograms(t)
	if got := phaseCount(h["omni.phase.duration"], spans.OutputReadyWait); got != 1 {
		t.Errorf("output-ready wait count %d, want 1 (the synchronous output has none)", got)
	}
	if got := phaseCount(h["omni.phase.duration"], spans.Postprocess); got != 2 {
		t.Errorf("postprocess count %d, want one per output", got)
	}
	ttfo := h["gen_ai.server.time_to_first_token"]
	if len(ttfo) != 1 || ttfo[0].Count != 1 || ttfo[0].Sum != 0.050 {
		t.Errorf("time to first output: %+v, want once, 50 ms (the first output's postprocess end)", ttfo)
	}
	if req := h["gen_ai.server.request.duration"]; len(req) != 1 || req[0].Count != 1 {
		t.Errorf("the request counts once, whatever its outputs: %+v", req)
	}
}

func TestMetricAttributesStayLowCardinality(t *testing.T) {
	m := newMetered(t, true)
	for i, id := range []string{"chatcmpl-1", "chatcmpl-2", "0_501f96ba-7c1d"} {
		ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: id, Model: "m", NumInferenceSteps: 20, Stage: otelomni.StageInfo{Type: attrs.StageDiffusion}})
		req.StartPhase(context.Background(), spans.Exec).End(nil)
		_, st := m.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Type: attrs.StageLLM})
		_ = st.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: 1, Bytes: 1 << 20, Connector: "shm", RxDecode: spans.Between(at(0), at(1))})
		st.End(nil)
		var err error
		if i == 0 {
			err = otelomni.ErrTimeout
		}
		req.End(err)
	}
	allowed := map[attribute.Key]bool{attrs.PhaseKey: true, attrs.StageTypeKey: true, semconv.GenAIRequestModelKey: true,
		semconv.ErrorTypeKey: true, attrs.OutputModalityKey: true, attrs.TransferConnectorKey: true, semconv.GenAIOperationNameKey: true, semconv.GenAIProviderNameKey: true}
	h := m.histograms(t)
	for name, dps := range h {
		for _, dp := range dps {
			for _, kv := range dp.Attributes.ToSlice() {
				if !allowed[kv.Key] {
					t.Errorf("%s carries %s=%v: metrics must stay low-cardinality", name, kv.Key, kv.Value.String())
				}
			}
		}
	}
	for _, name := range []string{"omni.phase.duration", "gen_ai.server.request.duration", "omni.stage.duration",
		"omni.diffusion.exec_per_step", "omni.transfer.size"} {
		if len(h[name]) == 0 {
			t.Errorf("%s recorded nothing", name)
		}
	}
	var failed uint64
	for _, dp := range h["gen_ai.server.request.duration"] {
		if v, ok := dp.Attributes.Value(semconv.ErrorTypeKey); ok && v.AsString() == "timeout" {
			failed += dp.Count
		}
	}
	if failed != 1 {
		t.Errorf("%d failed requests with error.type=timeout, want 1", failed)
	}
}

// TestMeasurementsCarryTheRequestsModality: every measurement of a request
// carries the omni.output.modality it was started with, so that a
// dashboard splits by modality; a value attrs does not define is recorded
// as "_OTHER" (it comes from a client), none as no attribute at all.
func TestMeasurementsCarryTheRequestsModality(t *testing.T) {
	m := newMetered(t, true)
	for _, mod := range []string{attrs.ModalityImage, attrs.ModalityVideo, "hologram-\xff", ""} {
		ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Modality: mod, NumInferenceSteps: 4,
			Attributes: []attribute.KeyValue{attrs.OutputModalityKey.String("audio")}})
		req.StartPhase(ctx, spans.Exec).End(nil)
		req.StartPhase(ctx, spans.Postprocess).End(nil)
		req.SetAttributes(attrs.OutputModalityKey.String("text")) // an identity: refused
		req.End(errors.New("x"))
	}
	h := m.histograms(t)
	for _, name := range []string{"omni.phase.duration", "gen_ai.server.request.duration", "omni.diffusion.exec_per_step"} {
		got := map[string]uint64{}
		for _, dp := range h[name] {
			v, ok := dp.Attributes.Value(attrs.OutputModalityKey)
			k := "(none)"
			if ok {
				k = v.AsString()
			}
			got[k] += dp.Count
		}
		per := uint64(1)
		if name == "omni.phase.duration" {
			per = 2
		}
		want := map[string]uint64{"image": per, "video": per, "_OTHER": per, "(none)": per}
		if len(got) != len(want) {
			t.Errorf("%s by modality: %v, want %v", name, got, want)
			continue
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s by modality: %v, want %v", name, got, want)
				break
			}
		}
	}
	for _, s := range m.rec.Ended() {
		if s.Name() != spans.RequestSpanName {
			continue
		}
		if v, ok := attr(s, attrs.OutputModalityKey); ok && (v.AsString() == "audio" || v.AsString() == "text") {
			t.Errorf("the request span's modality was changed to %q by an attribute: it is the request's identity", v.AsString())
		}
	}
}

func TestMetricsCountEveryRequestWhateverTheSampler(t *testing.T) {
	cases := map[string]*metered{
		"unsampled":      newMetered(t, true, sdktrace.WithSampler(sdktrace.NeverSample())),
		"tracing off":    newMetered(t, false),
		"sampled traces": newMetered(t, true),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < 5; i++ {
				ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", NumInferenceSteps: 10})
				p := req.StartPhase(ctx, spans.Exec)
				req.StartPhase(p.Context(), spans.Forward) // still open when exec ends: ended with it
				p.End(nil)
				p.End(nil) // twice: counted once
				req.StartPhase(ctx, spans.Postprocess).End(nil)
				req.StartPhase(ctx, spans.OutputReadyWait) // still open at the end: ended with the request
				req.End(nil)
				req.End(nil)
			}
			h := m.histograms(t)
			for _, p := range []spans.Phase{spans.Exec, spans.Postprocess, spans.Forward} {
				if got := phaseCount(h["omni.phase.duration"], p); got != 5 {
					t.Errorf("%v count %d, want 5", p, got)
				}
			}
			if r := h["gen_ai.server.request.duration"]; len(r) != 1 || r[0].Count != 5 {
				t.Errorf("request durations %+v", r)
			}
		})
	}
}

// TestExemplarPointsToTheTrace: a measurement is made under its span, so
// the SDK's exemplar reservoir names the request's trace: which
// measurements get one is the SDK's choice (its exemplar filter).
func TestExemplarPointsToTheTrace(t *testing.T) {
	m := newMetered(t, true)
	ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
	req.StartPhase(context.Background(), spans.Exec).End(nil)
	req.End(nil)
	tid := trace.SpanContextFromContext(ctx).TraceID()
	var found bool
	for _, dp := range m.histograms(t)["omni.phase.duration"] {
		for _, ex := range dp.Exemplars {
			if string(ex.TraceID) == string(tid[:]) {
				found = true
			}
		}
	}
	if !found {
		t.Error("no exemplar of the phase histogram points to the request's trace")
	}
}

func TestStageAndTransferMetrics(t *testing.T) {
	m := newMetered(t, true)
	ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
	_, st := m.in.StartStage(ctx, otelomni.StageInfo{ID: 2, Name: "code2wav"})
	_ = st.RecordTransfer(spans.TransferRecord{FromStage: 1, ToStage: 2, Bytes: 3 << 20, Connector: "shm",
		Tx: spans.Between(at(0), at(1)), InFlight: spans.Between(at(1), at(2)), RxDecode: spans.Between(at(2), at(4))})
	time.Sleep(time.Millisecond)
	_ = st.MarkOutput(false, time.Now())
	_ = st.MarkOutput(true, time.Now())
	st.End(errors.New("vocoder failed"))
	req.End(nil)
	h := m.histograms(t)
	for _, p := range []spans.Phase{plan.TransferTx, plan.TransferInFlight, plan.TransferRxDecode} {
		if got := phaseCount(h["omni.phase.duration"], p); got != 1 {
			t.Errorf("%v count %d", p, got)
		}
	}
	if s := h["omni.stage.duration"]; len(s) != 1 || s[0].Count != 1 {
		t.Errorf("stage durations %+v", s)
	} else if v, _ := s[0].Attributes.Value(semconv.ErrorTypeKey); v.AsString() != "_OTHER" {
		t.Errorf("a failed stage carries error.type: %v", s[0].Attributes)
	}
	if s := h["omni.transfer.size"]; len(s) != 1 || s[0].Count != 1 {
		t.Errorf("transfer sizes %+v", s)
	}
	if s := h["gen_ai.server.time_to_first_token"]; len(s) != 1 || s[0].Count != 1 {
		t.Errorf("time to first output %+v", s)
	}
}

func TestTimeToFirstTokenFromAnLLMStagesFirstToken(t *testing.T) {
	m := newMetered(t, true)
	t0 := time.Now()
	ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "llm", Start: t0})
	_, st := m.in.StartStage(ctx, otelomni.StageInfo{ID: 0, Name: "thinker", Type: attrs.StageLLM, Start: t0})
	_ = st.RecordPhase(spans.LLMQueue, spans.Between(t0.Add(time.Millisecond), t0.Add(2*time.Millisecond)), nil)
	_ = st.RecordPhase(spans.LLMPrefill, spans.Between(t0.Add(2*time.Millisecond), t0.Add(40*time.Millisecond)), nil)
	_ = st.RecordPhase(spans.LLMDecode, spans.Between(t0.Add(40*time.Millisecond), t0.Add(90*time.Millisecond)), nil)
	st.End(nil)
	req.End(nil)
	ttft := m.histograms(t)["gen_ai.server.time_to_first_token"]
	if len(ttft) != 1 || ttft[0].Count != 1 || ttft[0].Sum < 0.039 || ttft[0].Sum > 0.041 {
		t.Fatalf("time to first token %+v, want one measurement of 40 ms", ttft)
	}
}

// TestEveryPhasesMeasurementCarriesItsOwnAttributes: with a model, a stage
// type and a modality, each phase's measurement carries those three and
// its own omni.phase, and exec per step the three alone, whatever the
// order the attribute sets were built in.
func TestEveryPhasesMeasurementCarriesItsOwnAttributes(t *testing.T) {
	m := newMetered(t, true)
	ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "Qwen/Qwen-Image", Modality: attrs.ModalityImage,
		NumInferenceSteps: 4, Stage: otelomni.StageInfo{Type: attrs.StageDiffusion}})
	phases := []spans.Phase{spans.Preprocess, spans.Exec, spans.QueueWait, spans.OutputReadyWait, spans.Postprocess}
	for _, p := range phases {
		req.StartPhase(ctx, p).End(nil)
	}
	req.End(nil)
	want := func(p spans.Phase) string {
		kv := []attribute.KeyValue{semconv.GenAIRequestModelKey.String("Qwen/Qwen-Image"), attrs.StageTypeKey.String(attrs.StageDiffusion),
			attrs.OutputModalityKey.String(attrs.ModalityImage)}
		if p != 0 {
			kv = append(kv, attrs.PhaseKey.String(p.String()))
		}
		s := attribute.NewSet(kv...)
		return s.Encoded(attribute.DefaultEncoder())
	}
	h := m.histograms(t)
	got := map[string]bool{}
	for _, dp := range h["omni.phase.duration"] {
		got[dp.Attributes.Encoded(attribute.DefaultEncoder())] = true
	}
	for _, p := range phases {
		if !got[want(p)] {
			t.Errorf("no %v measurement with {%s}; the phase histogram holds %v", p, want(p), got)
		}
	}
	var perStep []string
	for _, dp := range h["omni.diffusion.exec_per_step"] {
		perStep = append(perStep, dp.Attributes.Encoded(attribute.DefaultEncoder()))
	}
	if len(perStep) != 1 || perStep[0] != want(0) {
		t.Errorf("exec per step: data points with %q; want one, with {%s}", perStep, want(0))
	}
}
