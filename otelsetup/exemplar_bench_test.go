// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/otelomni"
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
					_ = r.RecordPhase(p, spans.Lasting(start.Add(time.Duration(j)*time.Millisecond), time.Millisecond), nil)
				}
				_ = r.EndAt(start.Add(10*time.Millisecond), nil)
			}
		})
	}
}
