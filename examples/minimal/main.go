// Command minimal traces a few simulated diffusion requests with otelomni
// and prints their spans to the terminal; it needs no server.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

func main() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	in := otelomni.New(otelomni.WithTracerProvider(tp))

	for i, withPre := range []bool{true, false} {
		ctx, req := in.Start(context.Background(), otelomni.RequestInfo{
			ID: fmt.Sprintf("chatcmpl-demo-%d", i), Model: "Qwen/Qwen-Image", Modality: attrs.ModalityImage,
		})
		if withPre {
			_ = req.Run(ctx, spans.Preprocess, sleep(3*time.Millisecond))
		}
		exec := req.StartPhase(spans.Exec)
		_ = req.Run(ctx, spans.QueueWait, sleep(time.Millisecond))
		_ = req.Run(ctx, spans.Forward, sleep(20*time.Millisecond))
		_ = req.Run(ctx, spans.VAEDecode, sleep(5*time.Millisecond))
		exec.End()
		_ = req.Run(ctx, spans.Postprocess, sleep(2*time.Millisecond))
		req.End(nil)
	}
	for _, s := range rec.Ended() {
		fmt.Fprintf(os.Stdout, "%-34s %8.3f ms\n", s.Name(), float64(s.EndTime().Sub(s.StartTime()))/1e6)
	}
}

func sleep(d time.Duration) func(context.Context) error {
	return func(context.Context) error { time.Sleep(d); return nil }
}
