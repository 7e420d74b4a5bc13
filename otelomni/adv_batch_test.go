// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// A batch links at most 1024 members, as many links as the SDK is told to
// keep on a span, so that every link has its reverse. The reverse links
// land on the members: a request with no exec of its own in a batch (an
// LLM request in continuous batching, one batch per decode step) is
// linked by its request span to every batch it ran in. Past the SDK's
// limit on that span, the SDK evicts the oldest: those batches link a
// request that no longer links them.
func TestAdvARequestInMoreBatchesThanItsSpanKeepsLinksIsLinkedBothWays(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	limits := sdktrace.NewSpanLimits()
	limits.LinkCountLimit = 1024 // as the batch's doc asks
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSpanLimits(limits))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	in := otelomni.New(otelomni.WithTracerProvider(tp))
	ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "decode"})
	p := req.StartPhase(ctx, spans.LLMDecode)
	for i := range limits.LinkCountLimit + 1 {
		in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "step-" + strconv.Itoa(i)}, req).End(nil)
	}
	p.End(nil)
	req.End(nil)
	f := &firstError{TB: t}
	if !assertNoNegativeSpan(f, rec.Ended()) {
		t.Errorf("%d batches linked the request: %s", limits.LinkCountLimit+1, f.first)
	}
}
