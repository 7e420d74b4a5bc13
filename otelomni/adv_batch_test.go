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
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithRawSpanLimits(limits))
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

// Past 1024 members, each member a batch cannot link is counted in
// Stats.Conflicts (StartBatch's doc: "a member beyond is linked neither
// way, and counted"), whether it was named at the start or recorded
// later with Batch.Record.
func TestAdvEveryMemberABatchCannotLinkIsCounted(t *testing.T) {
	r := newRecorded(t)
	limits := sdktrace.NewSpanLimits()
	limits.LinkCountLimit = 1024 // as the batch's doc asks
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.rec), sdktrace.WithRawSpanLimits(limits))
	r.in = otelomni.New(otelomni.WithTracerProvider(r.tp))
	const beyond = 6
	var members []*otelomni.Request
	for i := range 1024 + beyond {
		_, m := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "m" + strconv.Itoa(i)})
		members = append(members, m)
	}
	b := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "big"}, members...)
	atStart := r.in.Stats().Conflicts
	var late []*otelomni.Request
	for i := range beyond {
		_, m := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "late" + strconv.Itoa(i)})
		late = append(late, m)
		_ = b.Record(m, &spans.DiffusionRecord{})
	}
	recorded := r.in.Stats().Conflicts - atStart
	b.End(nil)
	for _, m := range append(members, late...) {
		m.End(nil)
	}
	if atStart != beyond {
		t.Errorf("%d members beyond the limit at StartBatch counted %d conflicts, want %d", beyond, atStart, beyond)
	}
	if recorded != beyond {
		t.Errorf("%d members beyond the limit in Batch.Record counted %d conflicts, want %d", beyond, recorded, beyond)
	}
}
