// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// exemplarsOf returns, per instrument, the trace ids its exemplars name,
// and how many measurements its histograms counted.
func exemplarsOf(t *testing.T, r *sdkmetric.ManualReader) (map[string]map[trace.TraceID]bool, map[string]uint64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ex, counts := map[string]map[trace.TraceID]bool{}, map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			ex[m.Name] = map[trace.TraceID]bool{}
			for _, dp := range h.DataPoints {
				counts[m.Name] += dp.Count
				for _, e := range dp.Exemplars {
					ex[m.Name][trace.TraceID(e.TraceID)] = true
				}
			}
		}
	}
	return ex, counts
}

// TestExemplarsNameOnlyTracesTheTierKeeps: with no baseline share, a
// normal request's measurements carry no exemplar, while a failed one's,
// a slow one's and a saturated one's do, from the measurement that made it
// kept on; every measurement is counted either way.
func TestExemplarsNameOnlyTracesTheTierKeeps(t *testing.T) {
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	t.Setenv("OMNI_SLOW_IMAGE_MS", "10000")
	t.Setenv("OMNI_QUEUE_BUDGET_MS", "1000")
	reader := sdkmetric.NewManualReader()
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider()),
		otelomni.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	t0 := time.Now().Add(-time.Hour)
	request := func(queue, exec time.Duration, err error) trace.TraceID {
		rctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: t0})
		if e := r.RecordPhase(spans.QueueWait, spans.Lasting(t0, queue), nil); e != nil {
			t.Fatal(e)
		}
		if e := r.RecordPhase(spans.Exec, spans.Lasting(t0.Add(queue), exec), nil); e != nil {
			t.Fatal(e)
		}
		if e := r.EndAt(t0.Add(queue+exec), err); e != nil {
			t.Fatal(e)
		}
		return trace.SpanContextFromContext(rctx).TraceID()
	}
	normal := request(100*time.Millisecond, time.Second, nil)
	failed := request(100*time.Millisecond, time.Second, otelomni.ErrStageError)
	slow := request(100*time.Millisecond, 11*time.Second, nil)
	saturated := request(1001*time.Millisecond, time.Second, nil)

	ex, counts := exemplarsOf(t, reader)
	req, phase := ex["gen_ai.server.request.duration"], ex["omni.phase.duration"]
	if req[normal] || phase[normal] {
		t.Error("a normal request, outside the baseline share, carries an exemplar")
	}
	if !req[failed] || phase[failed] {
		t.Errorf("a failed request: exemplar of its duration %v, of its phases %v; want its duration only (it failed at its end)", req[failed], phase[failed])
	}
	if !req[slow] || !phase[slow] {
		t.Errorf("a slow request: exemplar of its duration %v, of its exec %v; want both (exec ended past the threshold)", req[slow], phase[slow])
	}
	if !req[saturated] || !phase[saturated] {
		t.Errorf("a saturated request: exemplar of its duration %v, of its queue wait %v; want both", req[saturated], phase[saturated])
	}
	if counts["gen_ai.server.request.duration"] != 4 || counts["omni.phase.duration"] != 8 {
		t.Errorf("counted %v, want every request and phase", counts)
	}
}

// TestAFailedPhaseCarriesItsExemplar: a phase that fails keeps its trace,
// so its own measurement carries the exemplar.
func TestAFailedPhaseCarriesItsExemplar(t *testing.T) {
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	reader := sdkmetric.NewManualReader()
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider()),
		otelomni.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	ctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image"})
	p := r.StartPhase(ctx, spans.Exec)
	p.End(errors.New("CUDA out of memory"))
	r.End(otelomni.ErrStageError)
	ex, _ := exemplarsOf(t, reader)
	if id := trace.SpanContextFromContext(ctx).TraceID(); !ex["omni.phase.duration"][id] {
		t.Error("the failed exec carries no exemplar")
	}
}

// TestEveryShareAndTheSDKsChoice: a share of 100 vouches for every trace,
// and OTELOMNI_EXEMPLARS=sampled offers every measurement, as the SDK does.
func TestEveryShareAndTheSDKsChoice(t *testing.T) {
	for _, env := range [][2]string{{"OMNI_SAMPLE_PERCENT", "100"}, {"OTELOMNI_EXEMPLARS", "sampled"}} {
		t.Run(env[0], func(t *testing.T) {
			t.Setenv("OMNI_SAMPLE_PERCENT", "0")
			t.Setenv(env[0], env[1])
			reader := sdkmetric.NewManualReader()
			in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider()),
				otelomni.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
			t0 := time.Now().Add(-time.Minute)
			rctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: t0})
			if err := r.RecordPhase(spans.Exec, spans.Lasting(t0, time.Second), nil); err != nil {
				t.Fatal(err)
			}
			if err := r.EndAt(t0.Add(time.Second), nil); err != nil {
				t.Fatal(err)
			}
			ex, _ := exemplarsOf(t, reader)
			id := trace.SpanContextFromContext(rctx).TraceID()
			if !ex["omni.phase.duration"][id] || !ex["gen_ai.server.request.duration"][id] {
				t.Errorf("%s=%s: exemplars %v", env[0], env[1], ex)
			}
		})
	}
}

// slowRequests runs n requests of the modality, each lasting d, ended at
// their own times, and returns how many of their durations carry an
// exemplar. It reads the histograms after each request: the exemplar of a
// bucket is its last measurement offered.
func slowRequests(t *testing.T, in *otelomni.Instrumenter, reader *sdkmetric.ManualReader, n int, modality string, d time.Duration, after func(*otelomni.Request)) int {
	t.Helper()
	t0 := time.Now().Add(-time.Hour)
	got := 0
	for i := 0; i < n; i++ {
		rctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: modality, Start: t0})
		if after != nil {
			after(r)
		}
		if err := r.EndAt(t0.Add(d), nil); err != nil {
			t.Fatal(err)
		}
		if ex, _ := exemplarsOf(t, reader); ex["gen_ai.server.request.duration"][trace.SpanContextFromContext(rctx).TraceID()] {
			got++
		}
	}
	return got
}

// TestARefusedVariableVouchesForNoTraceByItsRule: the collector reads a
// value the engine refuses in its own way (OMNI_SAMPLE_PERCENT=-5 is a
// share of none there), so the engine vouches for no trace by that
// variable's rule, and still follows the variables it accepts.
func TestARefusedVariableVouchesForNoTraceByItsRule(t *testing.T) {
	for _, bad := range []string{"-5", "1e-300", "0x10", "500"} {
		t.Run(bad, func(t *testing.T) {
			t.Setenv("OMNI_SAMPLE_PERCENT", bad)
			t.Setenv("OMNI_SLOW_OTHER_MS", "60000")
			reader := sdkmetric.NewManualReader()
			in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider()),
				otelomni.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
			// 30 s of text: under OMNI_SLOW_OTHER_MS, and no baseline share.
			if got := slowRequests(t, in, reader, 200, "text", 30*time.Second, nil); got != 0 {
				t.Errorf("OMNI_SAMPLE_PERCENT=%s, OMNI_SLOW_OTHER_MS=60000: %d of 200 requests of 30 s carry an exemplar, want none", bad, got)
			}
		})
	}
	t.Run("threshold", func(t *testing.T) {
		t.Setenv("OMNI_SAMPLE_PERCENT", "0")
		t.Setenv("OMNI_SLOW_IMAGE_MS", "1e5") // refused: its rule vouches for no trace
		reader := sdkmetric.NewManualReader()
		in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider()),
			otelomni.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
		if got := slowRequests(t, in, reader, 20, "image", 30*time.Second, nil); got != 0 {
			t.Errorf("OMNI_SLOW_IMAGE_MS=1e5: %d of 20 image requests of 30 s carry an exemplar, want none", got)
		}
		// The other thresholds still hold.
		if got := slowRequests(t, in, reader, 20, "text", 30*time.Second, nil); got != 20 {
			t.Errorf("OMNI_SLOW_IMAGE_MS=1e5: %d of 20 text requests of 30 s carry an exemplar, want all", got)
		}
	})
}
