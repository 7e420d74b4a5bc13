// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Every int a caller hands otelomni that becomes an attribute or a count
// has a documented range (docs/reliability.md). One out of its range is
// not recorded, is counted in Stats.Misuse, and is reported by the call's
// error when it returns one; one inside it is recorded as it is.
// newRecorded's check fails any exported int attribute out of its range.

const maxIndex = math.MaxInt32

func TestIntsOutOfTheirRangeAreRefusedAndCounted(t *testing.T) {
	iv := func() spans.Interval { now := time.Now(); return spans.Between(now, now) }
	cases := []struct {
		name string
		// do makes the call with v on a request (started with ctx) and
		// returns its error, if it returns one.
		do func(in *otelomni.Instrumenter, ctx context.Context, req *otelomni.Request, v int) error
		// key, on span, carries v when it is in range.
		span string
		key  attribute.Key
		bad  []int
		good []int
		// errs: the call returns an error for a bad v.
		errs bool
	}{
		{"StartOutputPhase index", func(_ *otelomni.Instrumenter, ctx context.Context, req *otelomni.Request, v int) error {
			req.StartPhase(ctx, spans.Postprocess, attrs.OutputIndexKey.Int(v)).End(nil)
			return nil
		}, spans.Postprocess.SpanName(), attrs.OutputIndexKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, false},
		{"RecordOutputPhase index", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			return req.RecordPhase(spans.Postprocess, iv(), nil, attrs.OutputIndexKey.Int(v))
		}, spans.Postprocess.SpanName(), attrs.OutputIndexKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, true},
		{"StartStep index", func(_ *otelomni.Instrumenter, ctx context.Context, req *otelomni.Request, v int) error {
			f := req.StartPhase(ctx, spans.Forward)
			req.StartPhase(f.Context(), spans.DenoiseStep, attrs.StepKey.Int(v)).End(nil)
			f.End(nil)
			return nil
		}, spans.DenoiseStep.SpanName(), attrs.StepKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, false},
		{"StageInfo.ID of a stage", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			_, st := in.StartStage(ctx, otelomni.StageInfo{ID: v, Name: "dit"})
			st.End(nil)
			return nil
		}, spans.StageSpanName, attrs.StageIDKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, false},
		{"StageInfo.ID of a single-stage request", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			_, q := in.Start(ctx, otelomni.RequestInfo{ID: "one", Stage: otelomni.StageInfo{ID: v, Type: attrs.StageDiffusion}})
			q.End(nil)
			return nil
		}, "", attrs.StageIDKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, false},
		{"StageInfo.ID of a stage's initialisation", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			e := in.StartEngine(ctx, otelomni.EngineInfo{})
			e.StartStageInit(otelomni.StageInfo{ID: v}).End(nil)
			e.End(nil)
			return nil
		}, plan.EngineStageInitSpanName, attrs.StageIDKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, false},
		{"RequestInfo.NumInferenceSteps", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			_, q := in.Start(ctx, otelomni.RequestInfo{ID: "n", NumInferenceSteps: v})
			q.End(nil)
			return nil
		}, "", attrs.NumInferenceStepsKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
		{"RequestInfo.Height", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			_, q := in.Start(ctx, otelomni.RequestInfo{ID: "n", Height: v})
			q.End(nil)
			return nil
		}, "", attrs.HeightKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
		{"RequestInfo.Width", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			_, q := in.Start(ctx, otelomni.RequestInfo{ID: "n", Width: v})
			q.End(nil)
			return nil
		}, "", attrs.WidthKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
		{"RequestInfo.NumFrames", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			_, q := in.Start(ctx, otelomni.RequestInfo{ID: "n", NumFrames: v})
			q.End(nil)
			return nil
		}, "", attrs.NumFramesKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
		{"SetUsage input tokens", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			req.SetUsage(v, 1)
			return nil
		}, spans.RequestSpanName, semconv.GenAIUsageInputTokensKey, []int{-1, math.MinInt}, []int{0, math.MaxInt}, false},
		{"SetUsage output tokens", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			req.SetUsage(1, v)
			return nil
		}, spans.RequestSpanName, semconv.GenAIUsageOutputTokensKey, []int{-1, math.MinInt}, []int{0, math.MaxInt}, false},
		{"SetStepsRun", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			req.SetStepsRun(v)
			return nil
		}, spans.RequestSpanName, attrs.StepsRunKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
		{"DiffusionRecord.StepsRun", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			return req.Record(&spans.DiffusionRecord{Exec: iv(), StepsRun: v})
		}, spans.RequestSpanName, attrs.StepsRunKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, true},
		{"TransferRecord.FromStage", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			return req.RecordTransfer(spans.TransferRecord{FromStage: v, ToStage: 1, RxDecode: iv()})
		}, plan.TransferSpanName, attrs.TransferFromStageKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, true},
		{"TransferRecord.ToStage", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			return req.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: v, RxDecode: iv()})
		}, plan.TransferSpanName, attrs.TransferToStageKey, []int{-1, math.MinInt, maxIndex + 1, math.MaxInt}, []int{0, maxIndex}, true},
		{"TransferRecord.Bytes", func(_ *otelomni.Instrumenter, _ context.Context, req *otelomni.Request, v int) error {
			return req.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: 1, Bytes: int64(v), RxDecode: iv()})
		}, plan.TransferSpanName, attrs.TransferBytesKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, true},
		{"LoadInfo.WeightBytes", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			e := in.StartEngine(ctx, otelomni.EngineInfo{})
			e.StartLoad(otelomni.LoadInfo{WeightBytes: int64(v)}).End(nil)
			e.End(nil)
			return nil
		}, plan.EngineLoadSpanName, attrs.EngineWeightBytesKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
		{"LoadInfo.DeviceCount", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			e := in.StartEngine(ctx, otelomni.EngineInfo{})
			e.StartLoad(otelomni.LoadInfo{DeviceCount: v}).End(nil)
			e.End(nil)
			return nil
		}, plan.EngineLoadSpanName, attrs.EngineDeviceCountKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
		{"EnginePhase.SetAcceleratorMemory", func(in *otelomni.Instrumenter, ctx context.Context, _ *otelomni.Request, v int) error {
			e := in.StartEngine(ctx, otelomni.EngineInfo{})
			l := e.StartLoad(otelomni.LoadInfo{})
			l.SetAcceleratorMemory(int64(v))
			l.End(nil)
			e.End(nil)
			return nil
		}, plan.EngineLoadSpanName, attrs.EngineAcceleratorMemoryKey, []int{-1, math.MinInt}, []int{1, math.MaxInt}, false},
	}
	for _, tc := range cases {
		for _, v := range append(append([]int(nil), tc.bad...), tc.good...) {
			good := v >= 0 && !contains(tc.bad, v)
			t.Run(fmt.Sprintf("%s=%d", tc.name, v), func(t *testing.T) {
				r := newRecorded(t, otelomni.WithDenoiseSteps(true))
				ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "ints", Start: time.Now()})
				before := r.in.Stats().Misuse
				err := tc.do(r.in, ctx, req, v)
				req.End(nil)
				misuse := r.in.Stats().Misuse - before
				var got []attribute.Value
				for _, s := range r.rec.Ended() {
					if tc.span != "" && s.Name() != tc.span {
						continue
					}
					if a, ok := attr(s, tc.key); ok {
						got = append(got, a)
					}
				}
				if good {
					if err != nil || misuse != 0 {
						t.Errorf("in range: err %v, %d misuse counted; want neither", err, misuse)
					}
					if len(got) != 1 || got[0].AsInt64() != int64(v) {
						t.Errorf("%s = %v, want %d", tc.key, got, v)
					}
					return
				}
				if misuse != 1 {
					t.Errorf("out of range: %d misuse counted, want 1", misuse)
				}
				if tc.errs && err == nil {
					t.Error("out of range: the call returned no error")
				}
				if len(got) != 0 {
					t.Errorf("out of range: %s = %v recorded", tc.key, got)
				}
			})
		}
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestOptionsTakeAnyInt(t *testing.T) {
	for _, n := range []int{math.MinInt, -1, 0, 1, 1 << 61, math.MaxInt} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := newRecorded(t, otelomni.WithContentCapture(n), otelomni.WithMetricModelLimit(n))
			_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: invalid, Model: invalid, Prompt: invalid})
			req.End(errors.New(invalid))
			if len(r.rec.Ended()) != 1 {
				t.Fatal("the request span must be exported")
			}
			id, _ := attr(r.rec.Ended()[0], attrs.RequestIDKey)
			if want := strings.ToValidUTF8(invalid, "\uFFFD"); id.AsString() != want {
				t.Errorf("omni.request.id %q, want %q", id.AsString(), want)
			}
			// newRecorded's check: every string valid, within the limit.
		})
	}
}
