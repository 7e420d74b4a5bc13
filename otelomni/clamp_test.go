// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// These tests pin that no request, stage, output or measurement is ever
// negative, whatever times the caller hands over. newRecorded's cleanup
// fails any test that exported a negative span.

func TestRecordPathWithoutArrivalEndsAtItsStartNotBefore(t *testing.T) {
	m := newMetered(t, true)
	// The request starts now, but the record's times are in the past.
	_, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "late"})
	past := time.Now().Add(-time.Hour)
	_ = req.Record(&spans.DiffusionRecord{Exec: spans.Between(past, past.Add(100*time.Millisecond))})
	err := req.EndAt(past.Add(100*time.Millisecond), nil)
	if err == nil {
		t.Error("EndAt before the request's start must say so")
	}
	for _, dp := range m.histograms(t)["gen_ai.server.request.duration"] {
		if dp.Sum < 0 {
			t.Errorf("negative request duration recorded: %v", dp.Sum)
		}
	}
	if st := m.in.Stats(); st.ClampedEnds == 0 || st.Conflicts == 0 {
		t.Errorf("the record before the request and the clamped end must be counted: %+v", st)
	}
}

func TestEndAtNeverPrecedesALivePhaseThatEnded(t *testing.T) {
	r := newRecorded(t)
	t0 := time.Now().Add(-time.Second)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "late-end", Start: t0})
	req.StartPhase(ctx, spans.Exec).End(nil) // now, a second after t0
	if err := req.EndAt(t0.Add(time.Millisecond), nil); err == nil {
		t.Error("EndAt before the end of a phase it holds must say so")
	}
	if r.in.Stats().ClampedEnds != 1 {
		t.Errorf("stats %+v, want the clamped end counted", r.in.Stats())
	}
	// newRecorded's check: exec lies inside the request.
}

func TestLivePhasesUnderAStartLaterThanNowAreRefused(t *testing.T) {
	r := newRecorded(t)
	future := time.Now().Add(10 * time.Second).Round(0) // a wall time from another host, ahead
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "future", Start: future})
	// Live phases start now: under a request that starts in the future,
	// they would lie before their parent.
	req.StartPhase(ctx, spans.Exec).End(nil)
	// A recorded phase with its own times after the start is fine.
	if err := req.RecordPhase(spans.Postprocess, spans.Between(future, future.Add(time.Millisecond)), nil); err != nil {
		t.Fatal(err)
	}
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "talker", Start: future})
	st.StartPhase(ctx, spans.Preprocess).End(nil)
	st.End(nil)
	b := r.in.StartBatch(ctx, otelomni.BatchInfo{ID: "b", Start: future}, req)
	b.End(nil)
	e := r.in.StartEngine(ctx, otelomni.EngineInfo{Start: future})
	e.StartWarmup().End(nil)
	e.End(nil)
	req.End(nil)
	got := byName(r.rec.Ended())
	for _, name := range []string{spans.Exec.SpanName(), spans.Preprocess.SpanName(), plan.EngineWarmupSpanName} {
		if len(got[name]) != 0 {
			t.Errorf("a live %s was started before its parent's start", name)
		}
	}
	if n := len(got[spans.Postprocess.SpanName()]); n != 1 {
		t.Errorf("%d recorded postprocess spans, want 1", n)
	}
	if n := r.in.Stats().Conflicts; n != 3 {
		t.Errorf("%d refused live phases counted, want 3", n)
	}
}

func TestMarkOutputNeverNegative(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "o"})
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 2, Name: "code2wav"})
	if err := st.MarkOutput(false, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkOutput(true, time.Now()); !errors.Is(err, spans.ErrEndBeforeStart) {
		t.Errorf("MarkOutput now after an output an hour from now: %v, want ErrEndBeforeStart", err)
	}
	st.End(nil)
	req.End(nil)
	if n := len(byName(r.rec.Ended())[plan.OutputSpanName]); n != 1 {
		t.Errorf("%d omni.output spans, want the first only", n)
	}
}

// bareProvider wraps the SDK's spans so that they do not expose their
// times, as a decorating provider's would.
type bareProvider struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (b bareProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return bareTracer{Tracer: b.tp.Tracer(name, opts...)}
}

type bareTracer struct{ trace.Tracer }

type bareSpan struct{ trace.Span }

func (b bareTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, s := b.Tracer.Start(ctx, name, opts...)
	bs := bareSpan{s}
	return trace.ContextWithSpan(ctx, bs), bs
}

func TestMetricsWithAProviderThatHidesSpanTimes(t *testing.T) {
	m := newMetered(t, true)
	in := otelomni.New(otelomni.WithTracerProvider(bareProvider{tp: m.tp}), otelomni.WithMeterProvider(meterOf(t, m)))
	_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "bare"})
	p := req.StartPhase(context.Background(), spans.Exec)
	time.Sleep(time.Millisecond)
	p.End(nil)
	req.End(nil)
	for name, dps := range m.histograms(t) {
		for _, dp := range dps {
			if dp.Sum < 0 || dp.Sum > 10 {
				t.Errorf("%s: sum %v s for one short request", name, dp.Sum)
			}
		}
	}
}

func TestTimeToFirstOutputCountsOnce(t *testing.T) {
	m := newMetered(t, true)
	now := time.Now()
	_, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "ttfo", Start: now})
	_ = req.RecordPhase(spans.Postprocess, spans.Between(now.Add(time.Millisecond), now.Add(2*time.Millisecond)), nil, attrs.OutputIndexKey.Int(0))
	req.StartPhase(context.Background(), spans.Postprocess, attrs.OutputIndexKey.Int(0)).End(nil)
	_ = req.MarkOutput(false, now.Add(3*time.Millisecond))
	req.End(nil)
	ttfo := m.histograms(t)["gen_ai.server.time_to_first_token"]
	if len(ttfo) != 1 || ttfo[0].Count != 1 {
		t.Fatalf("time to first output recorded %+v, want once", ttfo)
	}
	if got := ttfo[0].Sum; got < 0.0009 || got > 0.0021 {
		t.Errorf("time to first output %v s, want the first report's 2 ms", got)
	}
}

func TestSenderClockDoesNotStretchTheStage(t *testing.T) {
	r := newRecorded(t)
	base := time.Now()
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "skew", Start: base})
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "dit", Start: base})
	_ = st.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: 1,
		Tx: spans.Between(base.Add(10*time.Second), base.Add(10*time.Second+time.Millisecond))}) // sender 10 s ahead
	if err := st.EndAt(base.Add(200*time.Millisecond), nil); err != nil {
		t.Errorf("a correct stage end was refused: %v", err)
	}
	_ = req.EndAt(base.Add(300*time.Millisecond), nil)
	s := one(t, r.rec.Ended(), spans.StageSpanName)
	if d := s.EndTime().Sub(s.StartTime()); d != 200*time.Millisecond {
		t.Errorf("stage lasts %v, want 200ms", d)
	}
}

func TestRecordPhaseRefusesADenoiseStepWithoutIndex(t *testing.T) {
	r := newRecorded(t, otelomni.WithDenoiseSteps(true))
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "s"})
	err := req.RecordPhase(spans.DenoiseStep, spans.Between(at(0), at(1)), nil)
	req.End(nil)
	if !errors.Is(err, otelomni.ErrInvalidPhase) {
		t.Errorf("err %v, want ErrInvalidPhase", err)
	}
	if n := len(byName(r.rec.Ended())[spans.DenoiseStep.SpanName()]); n != 0 {
		t.Errorf("%d step spans without omni.diffusion.step", n)
	}
}
