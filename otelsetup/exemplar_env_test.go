// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

func init() {
	for _, name := range []string{"OMNI_SLOW_IMAGE_MS", "OMNI_SLOW_VIDEO_MS", "OMNI_SLOW_AUDIO_MS", "OMNI_SLOW_OTHER_MS", "OMNI_QUEUE_BUDGET_MS"} {
		observers[name] = observeKeepThreshold
	}
}

// exemplarTraces returns the trace ids of the exemplars of one histogram.
func exemplarTraces(t *testing.T, r *sdkmetric.ManualReader, name string) map[string]bool {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T", name, m.Data)
			}
			for _, dp := range h.DataPoints {
				for _, ex := range dp.Exemplars {
					ids[string(ex.TraceID)] = true
				}
			}
		}
	}
	return ids
}

// observeKeepThreshold checks that a slow threshold (or the queue budget)
// is the one the engine's exemplars follow: with no baseline share, a
// request (or queue wait) lasting exactly want milliseconds gets no
// exemplar, one a millisecond longer gets one.
func observeKeepThreshold(t *testing.T, name, _ string, want int64) {
	t.Helper()
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	modality := map[string]string{"OMNI_SLOW_IMAGE_MS": "image", "OMNI_SLOW_VIDEO_MS": "video",
		"OMNI_SLOW_AUDIO_MS": "audio", "OMNI_SLOW_OTHER_MS": "text", "OMNI_QUEUE_BUDGET_MS": "image"}[name]
	if name == "OMNI_QUEUE_BUDGET_MS" {
		t.Setenv("OMNI_SLOW_IMAGE_MS", "86400000")
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider()
	in := otelomni.New(otelomni.WithTracerProvider(tp), otelomni.WithMeterProvider(mp))
	threshold := time.Duration(want) * time.Millisecond
	start := time.Now().Add(-threshold - time.Hour)
	traceOf := map[time.Duration]string{}
	for _, d := range []time.Duration{threshold, threshold + time.Millisecond} {
		rctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: modality, Start: start})
		id := trace.SpanContextFromContext(rctx).TraceID()
		traceOf[d] = string(id[:])
		if name == "OMNI_QUEUE_BUDGET_MS" {
			if err := r.RecordPhase(spans.QueueWait, spans.Lasting(start, d), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.EndAt(start.Add(d), nil); err != nil {
			t.Fatal(err)
		}
	}
	instrument := "gen_ai.server.request.duration"
	if name == "OMNI_QUEUE_BUDGET_MS" {
		instrument = "omni.phase.duration"
	}
	got := exemplarTraces(t, reader, instrument)
	if len(got) != 1 || !got[traceOf[threshold+time.Millisecond]] {
		t.Fatalf("%s=%d: %d traces have an exemplar (the one over it among them: %v), want that one only",
			name, want, len(got), got[traceOf[threshold+time.Millisecond]])
	}
}
