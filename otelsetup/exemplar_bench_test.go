// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup/internal/keep"
	"github.com/otelomni/otelomni/spans"
)

// discard is an exporter that takes every span and keeps none.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkExemplars records a request of five phases with metrics on, with
// the SDK's exemplars and with the kept ones, in one run: the record path,
// with the tier's default thresholds (no request here is slow or failed,
// so the kept choice reads each request span and keeps the baseline
// share's).
func BenchmarkExemplars(b *testing.B) {
	for _, mode := range []string{"sdk", "kept"} {
		b.Run(mode, func(b *testing.B) {
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
					b.Setenv(k, "")
				}
			}
			(tierRules{image: 20000, video: 300000, audio: 15000, other: 10000, queue: 2000, percent: 10, salt: "s"}).env(b)
			b.Setenv(envExemplars, mode)
			b.Setenv("OTEL_METRICS_EXPORTER", "none")
			b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "131072")
			reader := sdkmetric.NewManualReader()
			tel, err := Setup(context.Background(), WithoutGlobal(), withExporter(discard{}), WithMetricReader(reader))
			if err != nil {
				b.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(tel.MeterProvider()))
			phases := []spans.Phase{spans.QueueWait, spans.Preprocess, spans.Exec, spans.OutputReadyWait, spans.Postprocess}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				_, r := in.Start(ctx, otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: start,
					Stage: otelomni.StageInfo{Type: "diffusion"}})
				for j, p := range phases {
					_ = r.RecordPhase(p, func() spans.Interval {
						t := start.Add(time.Duration(j) * time.Millisecond)
						return spans.Between(t, t.Add(time.Millisecond))
					}(), nil)
				}
				_ = r.EndAt(start.Add(10*time.Millisecond), nil)
			}
		})
	}
}

// BenchmarkKeptDecision is the kept choice's decision for one measurement
// under an ended request span that no rule keeps: the costliest path
// (every rule read, the modality among the span's attributes).
func BenchmarkKeptDecision(b *testing.B) {
	res := resource.Default()
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res))
	defer tp.Shutdown(context.Background())
	k := &keptExemplars{exporting: true, maxValue: 4096, resource: res}
	k.policy, _ = keep.FromEnv(func(name string) string {
		if name == "OMNI_SAMPLE_PERCENT" {
			return "0"
		}
		return ""
	})
	ctx, span := tp.Tracer("b").Start(context.Background(), "omni.request", trace.WithAttributes(
		attribute.String("omni.request.id", "r"), attribute.String("gen_ai.request.model", "m"),
		attribute.String("omni.output.modality", "image")))
	span.End()
	b.ReportAllocs()
	for b.Loop() {
		if k.keeps(ctx) {
			b.Fatal("kept")
		}
	}
}
