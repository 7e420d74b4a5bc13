// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"fmt"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// printTree prints each recorded span with its parent.
func printTree(rec *tracetest.SpanRecorder) {
	ss := rec.Ended()
	for _, s := range ss {
		fmt.Printf("%-34s under %s\n", s.Name(), parentName(ss, s))
	}
}

// The live path: mark each phase around the engine's calls.
func ExampleRequest_StartPhase() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	in := otelomni.New(otelomni.WithTracerProvider(tp))

	ctx, req := in.Start(context.Background(), otelomni.RequestInfo{
		ID: "chatcmpl-ac59cea85b422f04", Model: "Qwen/Qwen-Image",
		Modality: attrs.ModalityImage, NumInferenceSteps: 50,
	})
	// This model has no pre-processor: no preprocess phase, so no span.
	exec := req.StartPhase(ctx, spans.Exec)
	req.StartPhase(ctx, spans.QueueWait).End(nil)        // admitted at once
	fwd := req.StartPhase(exec.Context(), spans.Forward) // a part of exec: a child of the open exec
	// ... the denoising loop, under fwd.Context()
	fwd.End(nil)
	exec.End(nil)
	req.StartPhase(ctx, spans.Postprocess).End(nil)
	req.End(nil)

	printTree(rec)
	// Output:
	// omni.diffusion.queue_wait          under omni.request
	// omni.diffusion.forward             under omni.diffusion.exec
	// omni.diffusion.exec                under omni.request
	// omni.diffusion.postprocess         under omni.request
	// omni.request                       under
}

// The record path: hand over what the engine measured itself.
func ExampleRequest_Record() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	in := otelomni.New(otelomni.WithTracerProvider(tp))

	arrival := time.Date(2025, 1, 30, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return arrival.Add(time.Duration(n) * time.Millisecond) }
	_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "0_501f96ba-7c1d", Start: arrival})
	err := req.Record(&spans.DiffusionRecord{
		Preprocess: spans.Between(ms(1), ms(9)),
		Exec:       spans.Between(ms(9), ms(2109)),
		QueueWait:  spans.Between(ms(10), ms(10)), // measured as 0: a zero-length span
		// Forward, VAE decode: the profiler was off, so not measured.
		Postprocess: spans.Between(ms(2109), ms(2154)),
	})
	fmt.Println("record error:", err)
	_ = req.EndAt(ms(2155), nil)

	for _, s := range rec.Ended() {
		fmt.Printf("%-28s %v\n", s.Name(), s.EndTime().Sub(s.StartTime()))
	}
	// Output:
	// record error: <nil>
	// omni.diffusion.queue_wait    0s
	// omni.diffusion.preprocess    8ms
	// omni.diffusion.exec          2.1s
	// omni.diffusion.postprocess   45ms
	// omni.request                 2.155s
}

// A bad measurement makes no span and an error that names the phase; the
// other phases are kept.
func ExampleRequest_Record_badInterval() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	in := otelomni.New(otelomni.WithTracerProvider(tp))

	t0 := time.Date(2025, 1, 30, 12, 0, 0, 0, time.UTC)
	_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "r1", Start: t0})
	err := req.Record(&spans.DiffusionRecord{
		Exec:        spans.Between(t0, t0.Add(time.Second)),
		Postprocess: spans.Between(t0.Add(time.Second), t0.Add(time.Second-time.Millisecond)),
	})
	req.End(nil)
	fmt.Println(err)
	fmt.Println(len(rec.Ended()), "spans; rejected:", in.Stats().RejectedIntervals)
	// Output:
	// omni: phase postprocess: end before start by 1ms; no span emitted
	// 2 spans; rejected: 1
}

// A forward pass that ran two requests together: one omni.batch span, a
// trace of its own, linked to each member's exec, which links back.
func ExampleInstrumenter_StartBatch() {
	rec := tracetest.NewSpanRecorder()
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))

	ctxA, a := in.Start(context.Background(), otelomni.RequestInfo{ID: "chatcmpl-a", Model: "Qwen/Qwen-Image"})
	ctxB, b := in.Start(context.Background(), otelomni.RequestInfo{ID: "chatcmpl-b", Model: "Qwen/Qwen-Image"})
	execA, execB := a.StartPhase(ctxA, spans.Exec), b.StartPhase(ctxB, spans.Exec)
	batch := in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "step-7", Model: "Qwen/Qwen-Image"}, a, b)
	// ... the forward pass runs both ...
	batch.End(nil)
	execA.End(nil)
	execB.End(nil)
	a.End(nil)
	b.End(nil)

	for _, s := range rec.Ended() {
		if s.Name() == plan.BatchSpanName || s.Name() == spans.Exec.SpanName() {
			fmt.Printf("%-22s links: %d\n", s.Name(), len(s.Links()))
		}
	}
	// Output:
	// omni.batch             links: 2
	// omni.diffusion.exec    links: 1
	// omni.diffusion.exec    links: 1
}
