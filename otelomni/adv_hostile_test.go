// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Hostile inputs that otelomni holds against (kept as tests so that they
// keep holding): out-of-range indices of every type, repeated and
// numerous attributes, times at the ends of what a span carries. Each
// refusal is counted once; newRecorded's cleanup checks what was exported.

func TestAdvIndicesOfEveryTypeAndRange(t *testing.T) {
	bad := []attribute.Value{
		attribute.Int64Value(-1), attribute.Int64Value(math.MinInt64), attribute.Int64Value(math.MaxInt32 + 1),
		attribute.Int64Value(math.MaxInt64), attribute.StringValue("2"), attribute.Float64Value(math.NaN()),
		attribute.Float64Value(math.Inf(1)), attribute.BoolValue(true), attribute.Int64SliceValue([]int64{1}),
		attribute.StringSliceValue([]string{"0"}),
	}
	for _, p := range []spans.Phase{spans.Postprocess, spans.OutputReadyWait, spans.DenoiseStep} {
		key := attrs.OutputIndexKey
		if p == spans.DenoiseStep {
			key = attrs.StepKey
		}
		for _, v := range bad {
			r := newRecorded(t, otelomni.WithDenoiseSteps(true))
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "idx"})
			fwd := req.StartPhase(ctx, spans.Forward)
			kv := attribute.KeyValue{Key: key, Value: v}
			now := time.Now()
			req.StartPhase(ctx, p, kv).End(nil)
			err := req.RecordPhase(p, spans.Between(now, now), nil, kv)
			fwd.End(nil)
			req.End(nil)
			if !errors.Is(err, otelomni.ErrInvalidPhase) {
				t.Errorf("%v with %s = %s (%s): RecordPhase returned %v, want ErrInvalidPhase", p, key, v.String(), v.Type(), err)
			}
			if n := len(byName(r.rec.Ended())[p.SpanName()]); n != 0 {
				t.Errorf("%v with %s = %s (%s): %d spans", p, key, v.String(), v.Type(), n)
			}
			if m := r.in.Stats().Misuse; m != 2 {
				t.Errorf("%v with %s = %s (%s): %d misuses counted, want 2 (one per call)", p, key, v.String(), v.Type(), m)
			}
		}
	}
	// The last valid index is taken.
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "max"})
	req.StartPhase(ctx, spans.Postprocess, attrs.OutputIndexKey.Int(math.MaxInt32)).End(nil)
	req.End(nil)
	if v, _ := attr(one(t, r.rec.Ended(), spans.Postprocess.SpanName()), attrs.OutputIndexKey); v.AsInt64() != math.MaxInt32 {
		t.Errorf("index 2^31-1 exported as %v", v.AsInterface())
	}
}

func TestAdvManyAndRepeatedAttributes(t *testing.T) {
	r := newRecorded(t)
	var kv []attribute.KeyValue
	for i := range 10_000 {
		kv = append(kv, attribute.Int("k"+strconv.Itoa(i%50), i), attrs.PhaseKey.String("x"))
	}
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "many", Attributes: kv})
	before := r.in.Stats().Misuse
	p := req.StartPhase(ctx, spans.Preprocess, kv...)
	p.SetAttributes(kv...)
	p.End(nil)
	req.SetAttributes(kv...)
	now := time.Now()
	if err := req.RecordPhase(spans.QueueWait, spans.Between(now, now), nil, kv...); err != nil {
		t.Fatal(err)
	}
	// The last of repeated output keys wins, as for any attribute.
	req.StartPhase(ctx, spans.Postprocess, attrs.OutputIndexKey.Int(0), attrs.OutputIndexKey.Int(7)).End(nil)
	req.End(nil)
	if n := r.in.Stats().Misuse - before; n != 4*10_000 {
		t.Errorf("%d misuses counted for 40 000 reserved attributes", n)
	}
	for _, name := range []string{spans.Preprocess.SpanName(), spans.QueueWait.SpanName(), spans.RequestSpanName} {
		s := one(t, r.rec.Ended(), name)
		if v, _ := attr(s, attrs.PhaseKey); name != spans.RequestSpanName && v.AsString() == "x" {
			t.Errorf("%s: the caller's omni.phase was exported", name)
		}
	}
	if v, _ := attr(one(t, r.rec.Ended(), spans.Postprocess.SpanName()), attrs.OutputIndexKey); v.AsInt64() != 7 {
		t.Errorf("repeated output index: exported %v, want the last (7)", v.AsInterface())
	}
}

func TestAdvTimesAtTheEndsOfTheRange(t *testing.T) {
	first, last := time.Unix(0, 1), time.Unix(0, math.MaxInt64)
	r := newRecorded(t)
	// A request that arrived in 1970 and ends at the last time a span
	// carries, with an output there.
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "range", Start: first})
	req.StartPhase(ctx, spans.Preprocess).End(nil)
	if err := req.MarkOutput(true, last); err != nil {
		t.Fatal(err)
	}
	if err := req.EndAt(first, nil); err == nil {
		t.Error("EndAt before everything: no error")
	}
	s := one(t, r.rec.Ended(), spans.RequestSpanName)
	if !s.EndTime().Equal(last) {
		t.Errorf("the request ends at %v, want its output's %v", s.EndTime(), last)
	}
	// A start at the last time: live phases are refused until then, and
	// the end is no earlier.
	ctx, req = r.in.Start(context.Background(), otelomni.RequestInfo{ID: "future", Start: last})
	conflicts := r.in.Stats().Conflicts
	req.StartPhase(ctx, spans.Exec).End(nil)
	if r.in.Stats().Conflicts != conflicts+1 {
		t.Error("a live phase before its request's start was not counted")
	}
	req.End(nil)
	for _, bad := range []time.Time{time.Unix(0, -1), time.Unix(math.MaxInt64/int64(time.Second)+1, 0), {}} {
		ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "bad", Start: bad})
		req.StartPhase(ctx, spans.Preprocess).End(nil)
		if err := req.EndAt(bad, nil); err == nil {
			t.Errorf("EndAt(%v): no error", bad)
		}
	}
}
