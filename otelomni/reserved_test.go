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

// TestAttributesOtelomniSetsItselfAreLeftOut: an attribute whose key
// otelomni sets from a call's own arguments (the phase, the request's and
// stage's identity, a transfer's stages, a batch's id and size) is not a
// caller's to give: it is left out, the phase or span made without it,
// the caller's other attributes kept, and each counted in Stats.Misuse. A
// phase's output and step keys are the exception: a per-output phase reads
// its output from them, a denoise step its step, and the span carries what
// was read; on any other phase, or on SetAttributes, they are left out too.
func TestAttributesOtelomniSetsItselfAreLeftOut(t *testing.T) {
	r := newRecorded(t, otelomni.WithDenoiseSteps(true))
	t0 := time.Now()
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Start: t0,
		Attributes: []attribute.KeyValue{omniattr.RequestID("spoofed"), attribute.String("tenant", "a")}})
	misuse := r.in.Stats().Misuse
	if misuse != 1 {
		t.Errorf("Misuse %d after a RequestInfo attribute omni.request.id, want 1", misuse)
	}
	for i := 0; i < 3; i++ {
		iv := spans.Between(t0.Add(time.Duration(i)*time.Millisecond), t0.Add(time.Duration(i+1)*time.Millisecond))
		if err := req.RecordPhase(spans.Postprocess, iv, nil, omniattr.OutputIndex(i), omniattr.OutputFinal(i == 2)); err != nil {
			t.Errorf("RecordPhase of output %d: %v", i, err)
		}
		req.StartPhase(ctx, spans.OutputReadyWait, omniattr.OutputIndex(i), omniattr.OutputFinal(i == 2)).End(nil)
	}
	for _, kv := range []attribute.KeyValue{omniattr.Phase("exec"), omniattr.Step(3), omniattr.StageID(7), omniattr.TransferFromStage(1)} {
		req.StartPhase(ctx, spans.Preprocess, kv, attribute.String("kernel", "k")).End(nil) // the first is kept, the rest measured twice
	}
	exec := req.StartPhase(ctx, spans.Exec)
	exec.SetAttributes(omniattr.OutputFinal(true), omniattr.BatchSize(4), attribute.String("kernel", "flash"))
	req.StartPhase(exec.Context(), spans.Forward, omniattr.OutputIndex(1)).End(nil)
	exec.End(nil)
	req.SetAttributes(omniattr.StageName("spoofed"), attribute.Int("kept", 1))
	// 1 on the preprocess started (the 3 others, measured twice, are
	// refused for that alone), 2 on exec, 1 on forward, 1 on the request.
	if got, want := r.in.Stats().Misuse-misuse, uint64(1+2+1+1); got != want {
		t.Errorf("Misuse counted %d attributes left out, want %d", got, want)
	}
	req.End(nil)

	ended := r.rec.Ended()
	got := byName(ended)
	for _, name := range []string{spans.Postprocess.SpanName(), spans.OutputReadyWait.SpanName()} {
		if len(got[name]) != 3 {
			t.Errorf("%d %s spans, want one per output", len(got[name]), name)
			continue
		}
		for i, s := range got[name] {
			idx, _ := attr(s, attrs.OutputIndexKey)
			fin, _ := attr(s, attrs.OutputFinalKey)
			if idx.AsInt64() != int64(i) || fin.AsBool() != (i == 2) {
				t.Errorf("%s %d carries output %d final %v", name, i, idx.AsInt64(), fin.AsBool())
			}
		}
	}
	pre := one(t, ended, spans.Preprocess.SpanName())
	if v, _ := attr(pre, attrs.PhaseKey); v.AsString() != "preprocess" {
		t.Errorf("preprocess carries omni.phase %q", v.AsString())
	}
	for _, k := range []attribute.Key{attrs.StepKey, attrs.StageIDKey, attrs.TransferFromStageKey} {
		if _, ok := attr(pre, k); ok {
			t.Errorf("preprocess carries %s", k)
		}
	}
	if v, _ := attr(pre, "kernel"); v.AsString() != "k" {
		t.Error("preprocess lost the caller's own attribute")
	}
	if _, ok := attr(one(t, ended, spans.Forward.SpanName()), attrs.OutputIndexKey); ok {
		t.Error("forward, not a per-output phase, carries omni.output.index")
	}
	request := one(t, ended, spans.RequestSpanName)
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
	ex := one(t, ended, spans.Exec.SpanName())
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
