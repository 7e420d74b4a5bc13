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

// SetStepsRun, called before exec ends, gives the exec span its mean step
// duration (its doc): on the live path and on every record path alike,
// RecordPhase(spans.Exec, ...) included, as the exec-per-step histogram
// does.
func TestAdvStepsRunGiveEveryExecItsMeanStepDuration(t *testing.T) {
	for _, path := range []string{"live", "live, ended with its request", "Record", "RecordPhase"} {
		t.Run(path, func(t *testing.T) {
			r := newRecorded(t)
			t0 := time.Now()
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "steps", Start: t0, NumInferenceSteps: 8})
			req.SetStepsRun(4)
			iv := spans.Between(t0, t0.Add(8*time.Millisecond))
			switch path {
			case "live":
				req.StartPhase(ctx, spans.Exec).End(nil)
			case "live, ended with its request":
				req.StartPhase(ctx, spans.Exec) // ended by req.End
			case "Record":
				if err := req.Record(&spans.DiffusionRecord{Exec: iv}); err != nil {
					t.Fatal(err)
				}
			case "RecordPhase":
				if err := req.RecordPhase(spans.Exec, iv, nil); err != nil {
					t.Fatal(err)
				}
			}
			req.End(nil)
			if _, ok := attr(one(t, r.rec.Ended(), spans.Exec.SpanName()), attrs.MeanStepDurationKey); !ok {
				t.Errorf("SetStepsRun(4) before exec ended: the exec span (%s) has no %s", path, attrs.MeanStepDurationKey)
			}
		})
	}
}
