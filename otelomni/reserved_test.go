// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// TestAttributesOtelomniSetsItselfAreRefused: an attribute whose key
// otelomni sets from a call's own arguments (the phase, the output, the
// step, the request's and stage's identity, a transfer's stages) is not a
// caller's to give. A phase given one starts or records nothing and the
// call says so (an error where it returns one, Stats.Misuse always); on a
// span's SetAttributes or an Info's Attributes the attribute is left out,
// the others kept, and counted. Outputs are given with StartOutputPhase.
func TestAttributesOtelomniSetsItselfAreRefused(t *testing.T) {
	r := newRecorded(t)
	t0 := time.Now()
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Start: t0,
		Attributes: []attribute.KeyValue{omniattr.RequestID("spoofed"), attribute.String("tenant", "a")}})
	misuse := r.in.Stats().Misuse
	if misuse != 1 {
		t.Errorf("Misuse %d after a RequestInfo attribute omni.request.id, want 1", misuse)
	}
	for i := 0; i < 3; i++ {
		iv := spans.Between(t0.Add(time.Duration(i)*time.Millisecond), t0.Add(time.Duration(i+1)*time.Millisecond))
		if err := req.RecordPhase(spans.Postprocess, iv, nil, omniattr.OutputIndex(i)); err == nil {
			t.Errorf("RecordPhase with omni.output.index %d returned nil", i)
		}
		ph := req.StartPhase(ctx, spans.OutputReadyWait, omniattr.OutputIndex(i), omniattr.OutputFinal(i == 2))
		ph.End(nil)
	}
	for _, kv := range []attribute.KeyValue{omniattr.Phase("exec"), omniattr.Step(3), omniattr.StageID(7), omniattr.TransferFromStage(1)} {
		req.StartPhase(ctx, spans.Preprocess, kv).End(nil)
	}
	exec := req.StartPhase(ctx, spans.Exec)
	exec.SetAttributes(omniattr.OutputFinal(true), omniattr.BatchSize(4), attribute.String("kernel", "flash"))
	exec.End(nil)
	req.SetAttributes(omniattr.StageName("spoofed"), attribute.Int("kept", 1))
	if got, want := r.in.Stats().Misuse-misuse, uint64(3+3+4+2+1); got != want {
		t.Errorf("Misuse counted %d refusals, want %d", got, want)
	}
	// The phases given properly are still recorded.
	if err := req.RecordOutputPhase(spans.Postprocess, spans.Output{Index: 0}, spans.Between(t0, t0.Add(time.Millisecond)), nil); err != nil {
		t.Fatal(err)
	}
	req.End(nil)

	got := byName(r.rec.Ended())
	if n := len(got[spans.OutputReadyWait.SpanName()]) + len(got[spans.Preprocess.SpanName()]); n != 0 {
		t.Errorf("%d phases made with an attribute otelomni sets itself", n)
	}
	if n := len(got[spans.Postprocess.SpanName()]); n != 1 {
		t.Errorf("%d postprocess spans, want the one of RecordOutputPhase", n)
	}
	request := one(t, r.rec.Ended(), spans.RequestSpanName)
	if v, _ := attr(request, attrs.RequestIDKey); v.AsString() != "r" {
		t.Errorf("omni.request.id %q, want the RequestInfo's", v.AsString())
	}
	if _, ok := attr(request, attrs.StageNameKey); ok {
		t.Error("SetAttributes set omni.stage.name")
	}
	for _, k := range []attribute.Key{"tenant", "kept"} {
		if _, ok := attr(request, k); !ok {
			t.Errorf("the caller's own attribute %s was lost", k)
		}
	}
	ex := one(t, r.rec.Ended(), spans.Exec.SpanName())
	if _, ok := attr(ex, attrs.OutputFinalKey); ok {
		t.Error("exec carries omni.output.final")
	}
	if _, ok := attr(ex, attrs.BatchSizeKey); ok {
		t.Error("exec carries omni.batch.size without its batch (StartBatch sets it)")
	}
	if v, _ := attr(ex, "kernel"); v.AsString() != "flash" {
		t.Error("exec lost the caller's own attribute")
	}
}
