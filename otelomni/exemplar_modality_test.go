// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// TestTheSpansModalityPicksTheThreshold: the tier picks a request's slow
// threshold by the omni.output.modality its request span ends with, as
// written (bounded) and as set later by SetAttributes; so does the engine.
func TestTheSpansModalityPicksTheThreshold(t *testing.T) {
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	newIn := func(opts ...otelomni.Option) (*otelomni.Instrumenter, *sdkmetric.ManualReader) {
		reader := sdkmetric.NewManualReader()
		return otelomni.New(append(opts, otelomni.WithTracerProvider(sdktrace.NewTracerProvider()),
			otelomni.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))...), reader
	}
	// Set later: a video (300 s) of 30 s is not slow, whatever it started
	// as (text: 10 s; image: 20 s).
	for _, first := range []string{"", "image"} {
		in, reader := newIn()
		if got := slowRequests(t, in, reader, 10, first, 30*time.Second, func(r *otelomni.Request) {
			r.SetAttributes(omniattr.OutputModality("video"))
		}); got != 0 {
			t.Errorf("started as %q, set to video: %d of 10 requests of 30 s carry an exemplar, want none", first, got)
		}
	}
	// Given among RequestInfo.Attributes: the span holds the last value.
	in, reader := newIn()
	t0 := time.Now().Add(-time.Hour)
	got := 0
	for i := 0; i < 10; i++ {
		rctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: t0,
			Attributes: []attribute.KeyValue{omniattr.OutputModality("video")}})
		if err := r.EndAt(t0.Add(30*time.Second), nil); err != nil {
			t.Fatal(err)
		}
		if ex, _ := exemplarsOf(t, reader); ex["gen_ai.server.request.duration"][trace.SpanContextFromContext(rctx).TraceID()] {
			got++
		}
	}
	if got != 0 {
		t.Errorf("image, with video among its attributes: %d of 10 requests of 30 s carry an exemplar, want none", got)
	}
	// And the threshold the span names holds: an image of 30 s is slow.
	in, reader = newIn()
	if got := slowRequests(t, in, reader, 10, "video", 30*time.Second, func(r *otelomni.Request) {
		r.SetAttributes(omniattr.OutputModality("image"))
	}); got != 10 {
		t.Errorf("video set to image: %d of 10 requests of 30 s carry an exemplar, want all", got)
	}
	t.Run("other", func(t *testing.T) {
		t.Setenv("OMNI_SLOW_OTHER_MS", "60000")
		// A modality set later that is not a string: the tier's other
		// threshold, 60 s.
		in, reader := newIn()
		if got := slowRequests(t, in, reader, 10, "image", 30*time.Second, func(r *otelomni.Request) {
			r.SetAttributes(attrs.OutputModalityKey.Int(1))
		}); got != 0 {
			t.Errorf("image, then an int modality: %d of 10 requests of 30 s carry an exemplar, want none", got)
		}
		// Bounded: "image" cut to "imag" at a value limit of 4 is another
		// modality.
		in, reader = newIn(otelomni.WithValueLimit(4))
		if got := slowRequests(t, in, reader, 10, "image", 30*time.Second, nil); got != 0 {
			t.Errorf("image cut to imag: %d of 10 requests of 30 s carry an exemplar, want none", got)
		}
	})
}

// TestDecidingAllocatesNothing: a request with a modality, its phases and
// its end allocate no more than one without: the engine keeps the modality
// its slow threshold follows without a copy.
func TestDecidingAllocatesNothing(t *testing.T) {
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider()),
		otelomni.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	allocs := map[string]float64{}
	for _, modality := range []string{"", "image", "speech"} {
		info := otelomni.RequestInfo{ID: "r", Model: "m", Modality: modality}
		allocs[modality] = testing.AllocsPerRun(200, func() {
			ctx, r := in.Start(context.Background(), info)
			p := r.StartPhase(ctx, spans.QueueWait)
			p.End(nil)
			r.End(nil)
		})
	}
	if allocs["image"] > allocs[""] || allocs["speech"] > allocs[""] {
		t.Errorf("a request allocates %v times with no modality, %v as an image, %v as speech", allocs[""], allocs["image"], allocs["speech"])
	}
}
