// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// heapAfterGC returns the live heap.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// What otelomni holds for one open request must be a formula of its
// settings, not of how many outputs or steps an engine (or a client
// asking for many steps) hands it: each is exported (or measured) and
// forgotten. Measured here on a request that records metrics only, so
// that no span is held by an SDK; the spans, if any, are the SDK's to
// bound.
func TestAdvWhatARequestHoldsDoesNotGrowWithItsOutputsOrSteps(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	in := otelomni.New(otelomni.WithTracerProvider(noop.NewTracerProvider()), otelomni.WithMeterProvider(mp),
		otelomni.WithDenoiseSteps(true))
	for _, c := range []struct {
		name string
		p    spans.Phase
	}{
		{"outputs", spans.Postprocess},
		{"steps", spans.DenoiseStep},
	} {
		t.Run(c.name, func(t *testing.T) {
			held := func(n int) int64 {
				_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "mem", Model: "m"})
				t0 := time.Now()
				iv := spans.Between(t0, t0)
				before := heapAfterGC()
				for i := range n {
					key := attrs.OutputIndexKey
					if c.p == spans.DenoiseStep {
						key = attrs.StepKey
					}
					// Beyond its bound (16 384 per request) a part is
					// refused and counted, not held.
					if err := req.RecordPhase(c.p, iv, nil, key.Int(i)); err != nil && i < 16384 {
						t.Fatal(err)
					}
				}
				after := heapAfterGC()
				runtime.KeepAlive(req)
				req.End(nil)
				return int64(after) - int64(before)
			}
			small, large := held(1_000), held(200_000)
			t.Logf("held by one request: %d bytes after 1 000 %s, %d bytes after 200 000", small, c.name, large)
			if large-small > 256<<10 {
				t.Errorf("one request holds %d bytes more after 200 000 %s than after 1 000: what it holds grows with its input",
					large-small, c.name)
			}
		})
	}
}
