// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// slowProcessor costs what a heavy span processor costs: it sleeps in
// OnStart and OnEnd, between the reading of a span's time and the span's
// start or end in the SDK.
type slowProcessor struct{ d time.Duration }

func (p slowProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) { time.Sleep(p.d) }
func (p slowProcessor) OnEnd(sdktrace.ReadOnlySpan)                     { time.Sleep(p.d) }
func (slowProcessor) Shutdown(context.Context) error                    { return nil }
func (slowProcessor) ForceFlush(context.Context) error                  { return nil }

// TestMeasurementsAreTheSpansOwnDurations: every measurement is its span's
// duration to the nanosecond, whatever the span processors cost, on the
// live path and the record path: otelomni reads the clock once per edge
// and gives the same reading to the span and to the histogram. Each
// measurement has an attribute set of its own here, so that each data
// point holds exactly one sample.
func TestMeasurementsAreTheSpansOwnDurations(t *testing.T) {
	for _, path := range []string{"live", "record"} {
		t.Run(path, func(t *testing.T) {
			m := newMetered(t, true, sdktrace.WithSpanProcessor(slowProcessor{2 * time.Millisecond}))
			ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", NumInferenceSteps: 4,
				Modality: attrs.ModalityImage})
			if path == "live" {
				req.StartPhase(ctx, spans.Preprocess).End(nil)
				exec := req.StartPhase(ctx, spans.Exec)
				req.StartPhase(ctx, spans.QueueWait).End(nil)
				fwd := req.StartPhase(exec.Context(), spans.Forward)
				req.StartPhase(fwd.Context(), spans.DenoiseStep, attrs.StepKey.Int(0)).End(nil)
				fwd.End(nil)
				req.StartPhase(exec.Context(), spans.VAEDecode) // open: ended with exec
				exec.End(nil)
				req.StartPhase(ctx, spans.Postprocess).End(nil)
				req.End(nil)
			} else {
				t0 := time.Now()
				ms := func(n int) time.Time { return t0.Add(time.Duration(n)*time.Millisecond + 7) }
				rec := &spans.DiffusionRecord{Preprocess: spans.Between(ms(0), ms(3)), Exec: spans.Between(ms(3), ms(40)),
					QueueWait: spans.Between(ms(4), ms(5)), Forward: spans.Between(ms(6), ms(30)),
					VAEDecode: spans.Between(ms(31), ms(39)), Postprocess: spans.Between(ms(40), ms(41))}
				if err := req.Record(rec); err != nil {
					t.Fatal(err)
				}
				if err := req.EndAt(ms(42), nil); err != nil {
					t.Fatal(err)
				}
			}
			byPhase := map[string]time.Duration{}
			var request, exec time.Duration
			for _, s := range m.rec.Ended() {
				d := s.EndTime().Sub(s.StartTime())
				switch v, ok := attr(s, attrs.PhaseKey); {
				case s.Name() == spans.RequestSpanName:
					request = d
				case ok:
					byPhase[v.AsString()] = d
					if s.Name() == spans.Exec.SpanName() {
						exec = d
					}
				}
			}
			if len(byPhase) < 6 {
				t.Fatalf("phases %v", byPhase)
			}
			h := m.histograms(t)
			seen := 0
			for _, dp := range h["omni.phase.duration"] {
				v, _ := dp.Attributes.Value(attrs.PhaseKey)
				d, ok := byPhase[v.AsString()]
				if !ok || dp.Count != 1 {
					t.Errorf("phase %s: %d samples, span %v", v.AsString(), dp.Count, d)
					continue
				}
				seen++
				if dp.Sum != d.Seconds() {
					t.Errorf("phase %s: measured %v s, its span lasts %v s", v.AsString(), dp.Sum, d.Seconds())
				}
			}
			if seen != len(byPhase) {
				t.Errorf("%d phases measured, %d spans", seen, len(byPhase))
			}
			one := func(name string, want float64) {
				t.Helper()
				dps := h[name]
				if len(dps) != 1 || dps[0].Count != 1 || dps[0].Sum != want {
					t.Errorf("%s: %+v, want one sample of %v", name, dps, want)
				}
			}
			one("gen_ai.server.request.duration", request.Seconds())
			one("omni.diffusion.exec_per_step", exec.Seconds()/4)
		})
	}
}

// TestASpansTimesAreOneClock: on the live path a span's wall-clock times
// differ by exactly the monotonic duration measured, so that a step of the
// wall clock cannot make the exported span and its measurement differ.
func TestASpansTimesAreOneClock(t *testing.T) {
	m := newMetered(t, true)
	ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
	p := req.StartPhase(ctx, spans.Exec, attribute.String("k", "v"))
	p.End(nil)
	req.End(nil)
	for _, s := range m.rec.Ended() {
		wall := time.Duration(s.EndTime().UnixNano() - s.StartTime().UnixNano())
		if mono := s.EndTime().Sub(s.StartTime()); wall != mono {
			t.Errorf("%s: wall-clock times %v apart, monotonic %v", s.Name(), wall, mono)
		}
	}
}
