// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// fullRecord measures every diffusion phase once, queue wait inside exec.
func fullRecord() *spans.DiffusionRecord {
	return &spans.DiffusionRecord{
		Preprocess:      spans.Between(at(0), at(10)),
		Exec:            spans.Between(at(10), at(2110)),
		QueueWait:       spans.Between(at(11), at(23)),
		KVRecv:          spans.Between(at(23), at(30)),
		Forward:         spans.Between(at(30), at(2000)),
		VAEDecode:       spans.Between(at(2000), at(2100)),
		OutputReadyWait: spans.Between(at(2110), at(2115)),
		Postprocess:     spans.Between(at(2115), at(2160)),
	}
}

// wantParent is the contract's tree for a single-stage diffusion pipeline (docs/phases.md).
var wantParent = map[string]string{
	"omni.request":                     "",
	"omni.diffusion.queue_wait":        "omni.request",
	"omni.diffusion.preprocess":        "omni.request",
	"omni.diffusion.exec":              "omni.request",
	"omni.diffusion.kv_recv":           "omni.diffusion.exec",
	"omni.diffusion.forward":           "omni.diffusion.exec",
	"omni.diffusion.denoise_step":      "omni.diffusion.forward",
	"omni.diffusion.vae_decode":        "omni.diffusion.exec",
	"omni.diffusion.output_ready_wait": "omni.request",
	"omni.diffusion.postprocess":       "omni.request",
}

func TestEachMeasuredPhaseMakesOneSpanWithNameParentAndPhase(t *testing.T) {
	for _, path := range []string{"live", "record"} {
		t.Run(path, func(t *testing.T) {
			r := newRecorded(t)
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "req-1", Model: "Qwen/Qwen-Image"})
			if path == "record" {
				if err := req.Record(fullRecord()); err != nil {
					t.Fatal(err)
				}
			} else {
				req.StartPhase(ctx, spans.Preprocess).End(nil)
				exec := req.StartPhase(ctx, spans.Exec)
				req.StartPhase(ctx, spans.QueueWait).End(nil)
				for _, p := range []spans.Phase{spans.KVRecv, spans.Forward, spans.VAEDecode} {
					req.StartPhase(exec.Context(), p).End(nil)
				}
				exec.End(nil)
				req.StartPhase(context.Background(), spans.OutputReadyWait).End(nil)
				req.StartPhase(ctx, spans.Postprocess).End(nil)
			}
			req.End(nil)

			ended := r.rec.Ended()
			if len(ended) != 9 {
				t.Fatalf("want 9 spans (request and 8 phases), got %d: %v", len(ended), names(ended))
			}
			for _, s := range ended {
				want, ok := wantParent[s.Name()]
				if !ok {
					t.Errorf("unexpected span %s", s.Name())
					continue
				}
				if got := parentName(ended, s); got != want {
					t.Errorf("%s: parent %q, want %q", s.Name(), got, want)
				}
				if s.InstrumentationScope().Name != otelomni.ScopeName || s.InstrumentationScope().Version != otelomni.Version {
					t.Errorf("%s: scope %+v", s.Name(), s.InstrumentationScope())
				}
				if s.Name() == spans.RequestSpanName {
					continue
				}
				p, _ := plan.LookupSpanName(s.Name())
				if v, ok := attr(s, attrs.PhaseKey); !ok || v.AsString() != p.String() {
					t.Errorf("%s: omni.phase = %v, want %q", s.Name(), v.String(), p.String())
				}
				if v, _ := attr(s, semconv.GenAIRequestModelKey); v.AsString() != "Qwen/Qwen-Image" {
					t.Errorf("%s: gen_ai.request.model = %q", s.Name(), v.AsString())
				}
			}
		})
	}
}

func TestUnmeasuredPhaseProducesNoSpan(t *testing.T) {
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "no-preprocessor"})
	// A model with no pre-processor, the profiler off, no upstream KV, a
	// synchronous output: only exec, queue wait and postprocess measured.
	rec := &spans.DiffusionRecord{
		Exec:        spans.Between(at(0), at(100)),
		QueueWait:   spans.Between(at(1), at(5)),
		Postprocess: spans.Between(at(100), at(110)),
	}
	if err := req.Record(rec); err != nil {
		t.Fatal(err)
	}
	req.End(nil)
	got := byName(r.rec.Ended())
	for _, absent := range []spans.Phase{spans.Preprocess, spans.KVRecv, spans.Forward, spans.VAEDecode, spans.OutputReadyWait, spans.DenoiseStep} {
		if n := len(got[absent.SpanName()]); n != 0 {
			t.Errorf("%v was not measured but made %d span(s)", absent, n)
		}
	}
	for _, present := range []spans.Phase{spans.Exec, spans.QueueWait, spans.Postprocess} {
		if n := len(got[present.SpanName()]); n != 1 {
			t.Errorf("%v was measured but made %d span(s)", present, n)
		}
	}
}

func TestMeasuredZeroMakesZeroLengthSpan(t *testing.T) {
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: at(-10), ID: "zero-wait"})
	rec := &spans.DiffusionRecord{
		Exec:      spans.Between(at(0), at(100)),
		QueueWait: spans.Between(at(1), at(1)), // admitted at once: a real 0
	}
	if err := req.Record(rec); err != nil {
		t.Fatal(err)
	}
	if err := req.RecordPhase(spans.Preprocess, spans.Between(at(-3), at(-3).Add(0)), nil); err != nil {
		t.Fatal(err)
	}
	req.End(nil)
	for _, p := range []spans.Phase{spans.QueueWait, spans.Preprocess} {
		s := one(t, r.rec.Ended(), p.SpanName())
		if !s.EndTime().Equal(s.StartTime()) {
			t.Errorf("%v measured as 0: span lasts %v, want end == start", p, s.EndTime().Sub(s.StartTime()))
		}
	}
}

func TestBadIntervalMakesNoSpanAndAnErrorNamingThePhase(t *testing.T) {
	cases := []struct {
		name  string
		bad   func(*spans.DiffusionRecord)
		phase spans.Phase
		want  error
	}{
		{"end before start", func(r *spans.DiffusionRecord) { r.Preprocess = spans.Between(at(10), at(5)) }, spans.Preprocess, spans.ErrEndBeforeStart},
		{"negative duration", func(r *spans.DiffusionRecord) { r.VAEDecode = spans.Between(at(10), at(10).Add(-time.Millisecond)) }, spans.VAEDecode, spans.ErrEndBeforeStart},
		{"zero start", func(r *spans.DiffusionRecord) { r.QueueWait = spans.Between(time.Time{}, at(5)) }, spans.QueueWait, spans.ErrZeroTime},
		{"zero end", func(r *spans.DiffusionRecord) { r.Forward = spans.Between(at(30), time.Time{}) }, spans.Forward, spans.ErrZeroTime},
		{"zero time lasting", func(r *spans.DiffusionRecord) {
			r.KVRecv = func() spans.Interval { t := time.Time{}; return spans.Between(t, t.Add(time.Second)) }()
		}, spans.KVRecv, spans.ErrZeroTime},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorded(t)
			_, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "bad"})
			rec := fullRecord()
			tc.bad(rec)
			err := req.Record(rec)
			req.End(nil)
			var pe *spans.PhaseError
			if !errors.As(err, &pe) || pe.Phase != tc.phase || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want a PhaseError for %v wrapping %v", err, tc.phase, tc.want)
			}
			got := byName(r.rec.Ended())
			if n := len(got[tc.phase.SpanName()]); n != 0 {
				t.Errorf("bad %v made %d span(s)", tc.phase, n)
			}
			if len(r.rec.Ended()) != 8 {
				t.Errorf("the 7 good phases and the request should still be emitted, got %v", names(r.rec.Ended()))
			}
			if s := r.in.Stats(); s.RejectedIntervals != 1 {
				t.Errorf("RejectedIntervals = %d, want 1", s.RejectedIntervals)
			}
		})
	}
}

func TestRecordPhaseRejectsBadIntervalOnTheLivePath(t *testing.T) {
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "live-bad"})
	now := time.Now()
	err := req.RecordPhase(spans.QueueWait, spans.Between(now, now.Add(-time.Millisecond)), nil)
	if !errors.Is(err, spans.ErrEndBeforeStart) {
		t.Fatalf("err = %v, want ErrEndBeforeStart", err)
	}
	if err := req.RecordPhase(spans.QueueWait, spans.Interval{}, nil); err != nil {
		t.Fatalf("an unmeasured interval is not an error: %v", err)
	}
	req.End(nil)
	if n := len(byName(r.rec.Ended())[spans.QueueWait.SpanName()]); n != 0 {
		t.Fatalf("queue wait: %d spans, want 0", n)
	}
}

func TestAsyncThenSyncOutputMakesExactlyOneWait(t *testing.T) {
	check := func(t *testing.T, ss []sdktrace.ReadOnlySpan) {
		t.Helper()
		waits := byName(ss)[spans.OutputReadyWait.SpanName()]
		if len(waits) != 1 {
			t.Fatalf("want one output-ready wait, got %d", len(waits))
		}
		if v, _ := attr(waits[0], attrs.OutputIndexKey); v.AsInt64() != 0 {
			t.Errorf("the wait belongs to output %d, want 0", v.AsInt64())
		}
		posts := byName(ss)[spans.Postprocess.SpanName()]
		if len(posts) != 2 {
			t.Fatalf("want a postprocess per output, got %d", len(posts))
		}
		for _, p := range posts {
			i, _ := attr(p, attrs.OutputIndexKey)
			final, ok := attr(p, attrs.OutputFinalKey)
			if !ok || final.AsBool() != (i.AsInt64() == 1) {
				t.Errorf("output %d: omni.output.final = %v", i.AsInt64(), final.String())
			}
		}
	}
	t.Run("record", func(t *testing.T) {
		r := newRecorded(t)
		_, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "stream"})
		rec := &spans.DiffusionRecord{
			Exec: spans.Between(at(0), at(500)),
			Outputs: []spans.OutputTiming{
				{ReadyWait: spans.Between(at(200), at(230)), Postprocess: spans.Between(at(230), at(240))},
				{Postprocess: spans.Between(at(500), at(520)), Final: true},
			},
		}
		if err := req.Record(rec); err != nil {
			t.Fatal(err)
		}
		req.End(nil)
		check(t, r.rec.Ended())
	})
	t.Run("live", func(t *testing.T) {
		r := newRecorded(t)
		_, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "stream"})
		exec := req.StartPhase(context.Background(), spans.Exec)
		req.StartPhase(context.Background(), spans.OutputReadyWait, attrs.OutputIndexKey.Int(0)).End(nil)
		req.StartPhase(context.Background(), spans.Postprocess, attrs.OutputIndexKey.Int(0)).End(nil)
		exec.End(nil)
		req.StartPhase(context.Background(), spans.Postprocess, attrs.OutputIndexKey.Int(1), attrs.OutputFinalKey.Bool(true)).End(nil)
		req.End(nil)
		check(t, r.rec.Ended())
	})
}

func TestQueueWaitOverlapsExecWithRealTimesAndNothingIsSummed(t *testing.T) {
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "overlap"})
	rec := fullRecord()
	if err := req.Record(rec); err != nil {
		t.Fatal(err)
	}
	req.End(nil)
	ss := r.rec.Ended()
	q := one(t, ss, spans.QueueWait.SpanName())
	e := one(t, ss, spans.Exec.SpanName())
	if !q.StartTime().Equal(rec.QueueWait.Start()) || !q.EndTime().Equal(rec.QueueWait.End()) {
		t.Errorf("queue wait %v..%v, want the record's %v", q.StartTime(), q.EndTime(), rec.QueueWait)
	}
	if !e.StartTime().Equal(rec.Exec.Start()) || !e.EndTime().Equal(rec.Exec.End()) {
		t.Errorf("exec %v..%v, want the record's %v", e.StartTime(), e.EndTime(), rec.Exec)
	}
	if !(q.StartTime().After(e.StartTime()) && q.EndTime().Before(e.EndTime())) {
		t.Errorf("queue wait should lie inside exec in time")
	}
	if parentName(ss, q) != spans.RequestSpanName {
		t.Errorf("queue wait hangs under %s, want the request span", parentName(ss, q))
	}
	// Nothing adds phases: the request span holds no duration attributes.
	req1 := one(t, ss, spans.RequestSpanName)
	for _, kv := range req1.Attributes() {
		switch kv.Key {
		case attrs.RequestIDKey, semconv.GenAIOperationNameKey:
		default:
			t.Errorf("request span carries %s: nothing should be derived from the phases", kv.Key)
		}
	}
}

func TestRequestIDIsKeptExactly(t *testing.T) {
	for _, id := range []string{"chatcmpl-ac59cea85b422f04", "0_501f96ba-7c1d", "0_501f96ba-7c1d-cfg", "00042", "", "id with spaces ☃"} {
		r := newRecorded(t)
		_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: id})
		req.End(nil)
		s := one(t, r.rec.Ended(), spans.RequestSpanName)
		if v, ok := attr(s, attrs.RequestIDKey); !ok || v.Type().String() != "STRING" || v.AsString() != id {
			t.Errorf("omni.request.id = %v (%s), want %q as a string", v.String(), v.Type(), id)
		}
	}
}

func TestRequestAttributesOnlyWhenKnown(t *testing.T) {
	r := newRecorded(t)
	zero := 0.0
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{
		ID: "sdxl-turbo", Model: "stabilityai/sdxl-turbo", Modality: attrs.ModalityImage,
		NumInferenceSteps: 1, GuidanceScale: &zero, Height: 512, Width: 512,
		Stage: otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion, ReplicaID: "dit-0"},
	})
	req.End(nil)
	s := one(t, r.rec.Ended(), spans.RequestSpanName)
	want := map[string]any{
		"omni.request.id": "sdxl-turbo", "gen_ai.request.model": "stabilityai/sdxl-turbo",
		"gen_ai.operation.name": "generate_content", "omni.output.modality": "image", "gen_ai.output.type": "image",
		"omni.diffusion.num_inference_steps": int64(1), "omni.diffusion.guidance_scale": 0.0,
		"omni.diffusion.height": int64(512), "omni.diffusion.width": int64(512),
		"omni.stage.id": int64(0), "omni.stage.name": "dit", "omni.stage.type": "diffusion", "omni.replica.id": "dit-0",
	}
	got := map[string]any{}
	for _, kv := range s.Attributes() {
		got[string(kv.Key)] = kv.Value.AsInterface()
	}
	if len(got) != len(want) {
		t.Errorf("attributes %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v (%T), want %v (%T)", k, got[k], got[k], v, v)
		}
	}
	if _, ok := got["omni.diffusion.num_frames"]; ok {
		t.Error("num_frames was not given and must not be recorded")
	}
	if s.SpanKind() != trace.SpanKindServer {
		t.Errorf("kind %v, want SERVER", s.SpanKind())
	}
}

func TestRequestUnderLocalParentIsInternal(t *testing.T) {
	r := newRecorded(t)
	ctx, gw := r.tp.Tracer("gateway").Start(context.Background(), "gateway")
	_, req := r.in.Start(ctx, otelomni.RequestInfo{ID: "x"})
	req.End(nil)
	gw.End()
	s := one(t, r.rec.Ended(), spans.RequestSpanName)
	if s.SpanKind() != trace.SpanKindInternal || s.Parent().SpanID() != gw.SpanContext().SpanID() {
		t.Errorf("kind %v parent %v, want INTERNAL under the gateway span", s.SpanKind(), s.Parent().SpanID())
	}
}

func TestFailedRequestHasErrorStatusAndType(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{otelomni.ErrClientAbort, "client_abort"},
		{otelomni.ErrClientDisconnect, "client_disconnect"},
		{otelomni.ErrStageError, "stage_error"},
		{otelomni.ErrTimeout, "timeout"},
		{context.DeadlineExceeded, "timeout"},
		{context.Canceled, "client_disconnect"},
		{errors.New("cuda: out of memory"), "_OTHER"},
		{&oomError{}, "*otelomni_test.oomError"},
	}
	for _, tc := range cases {
		r := newRecorded(t)
		_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "failed"})
		req.End(tc.err)
		s := one(t, r.rec.Ended(), spans.RequestSpanName)
		if s.Status().Code != codes.Error || s.Status().Description != tc.err.Error() {
			t.Errorf("%v: status %+v", tc.err, s.Status())
		}
		if v, _ := attr(s, semconv.ErrorTypeKey); v.AsString() != tc.want {
			t.Errorf("%v: error.type = %q, want %q", tc.err, v.AsString(), tc.want)
		}
	}
}

type oomError struct{}

func (*oomError) Error() string { return "out of memory" }

func TestAbortedBeforeAdmissionHasNoQueueWait(t *testing.T) {
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "aborted"})
	req.StartPhase(context.Background(), spans.Preprocess).End(nil)
	req.End(otelomni.ErrClientAbort)
	got := byName(r.rec.Ended())
	if len(got[spans.QueueWait.SpanName()]) != 0 || len(got[spans.Exec.SpanName()]) != 0 {
		t.Error("a request aborted before admission has no queue wait and no exec")
	}
	if v, _ := attr(got[spans.RequestSpanName][0], semconv.ErrorTypeKey); v.AsString() != "client_abort" {
		t.Errorf("error.type = %q", v.AsString())
	}
}
