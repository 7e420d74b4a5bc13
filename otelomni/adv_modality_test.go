// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"testing"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Every measurement of a request carries its omni.output.modality. A
// stage this process runs under the request (StartStage with the
// request's context) records the request's phases: its measurements
// (phase durations, the stage's duration, the time to the first token)
// are the request's and carry its modality too.
func TestAdvALocalStagesMeasurementsCarryItsRequestsModality(t *testing.T) {
	m := newMetered(t, true)
	ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "mod", Model: "m", Modality: attrs.ModalityAudio})
	sctx, st := m.in.StartStage(ctx, otelomni.StageInfo{ID: 0, Name: "thinker", Type: attrs.StageLLM, Model: "m"})
	now := time.Now()
	if err := st.RecordPhase(spans.LLMQueue, spans.Between(now, now), nil); err != nil {
		t.Fatal(err)
	}
	st.StartPhase(sctx, spans.LLMPrefill).End(nil)
	st.End(nil)
	req.End(nil)
	for name, dps := range m.histograms(t) {
		for _, dp := range dps {
			if v, ok := dp.Attributes.Value(attrs.OutputModalityKey); !ok || v.AsString() != attrs.ModalityAudio {
				t.Errorf("%s: a measurement of an audio request carries omni.output.modality %q (%v)", name, v.AsString(),
					dp.Attributes.ToSlice())
			}
		}
	}
}
