// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Every refusal is counted once, and the line logged for it says what
// happened.

// An output index or a step of another type than an int is refused and
// counted: the log line must say what was given, not a value nobody gave.
func TestAdvTheLogLineOfAnIndexOfTheWrongTypeIsTrue(t *testing.T) {
	for _, c := range []struct {
		name string
		p    spans.Phase
		kv   attribute.KeyValue
	}{
		{"string output index", spans.Postprocess, attrs.OutputIndexKey.String("2")},
		{"float output index", spans.OutputReadyWait, attribute.Float64(string(attrs.OutputIndexKey), 2)},
		{"bool step", spans.DenoiseStep, attribute.Bool(string(attrs.StepKey), true)},
		{"slice step", spans.DenoiseStep, attribute.Int64Slice(string(attrs.StepKey), []int64{3})},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := logLines(t)
			r := newRecorded(t, otelomni.WithDenoiseSteps(true)) // a fresh instrumenter logs its first misuse
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "i"})
			parent := req.StartPhase(ctx, spans.Forward)
			req.StartPhase(ctx, c.p, c.kv).End(nil)
			parent.End(nil)
			req.End(nil)
			if m := r.in.Stats().Misuse; m != 1 {
				t.Errorf("%d misuses counted, want 1", m)
			}
			for _, l := range lines() {
				if strings.HasPrefix(l, "otelomni: otelomni: ") {
					t.Errorf("the log line stutters: %s", l)
				}
				if strings.Contains(l, " -1 is out of range") {
					t.Errorf("given %s = %s (%s), the log line says: %s", c.kv.Key, c.kv.Value.String(), c.kv.Value.Type(), l)
				}
			}
		})
	}
}

// attrs.OutputFinalKey of another type than a bool on a per-output phase
// is neither recorded nor read: it is a refusal like a bad index, and must
// be counted.
func TestAdvAnOutputFinalOfTheWrongTypeIsCounted(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "j"})
	req.StartPhase(ctx, spans.Postprocess, attrs.OutputIndexKey.Int(0), attrs.OutputFinalKey.String("true")).End(nil)
	req.End(nil)
	s := one(t, r.rec.Ended(), spans.Postprocess.SpanName())
	v, _ := attr(s, attrs.OutputFinalKey)
	if m := r.in.Stats().Misuse; m != 1 {
		t.Errorf("omni.output.final given as the string \"true\": exported as %v, %d misuses counted; want it counted once", v.AsInterface(), m)
	}
}

// EndAt with a zero time on a request that has already ended ends
// nothing: it is one refusal (ended twice), and no log line may say
// "ended now".
func TestAdvEndAtAZeroTimeAfterTheEndIsOneRefusal(t *testing.T) {
	lines := logLines(t)
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "e"})
	req.End(nil)
	before := r.in.Stats()
	err := req.EndAt(time.Time{}, nil)
	after := r.in.Stats()
	if !errors.Is(err, otelomni.ErrRequestEnded) {
		t.Fatalf("EndAt after End: %v, want ErrRequestEnded", err)
	}
	if n := after.RejectedIntervals + after.Misuse - before.RejectedIntervals - before.Misuse; n != 1 {
		t.Errorf("one EndAt on an ended request counted %d times (rejected %d, misuse %d)", n,
			after.RejectedIntervals-before.RejectedIntervals, after.Misuse-before.Misuse)
	}
	for _, l := range lines() {
		if strings.Contains(l, "ended now") {
			t.Errorf("nothing was ended, yet the log says: %s", l)
		}
	}
}

// A phase started on a request that has already ended, with an attribute
// whose key otelomni sets itself, is one refused call: counted once.
func TestAdvARefusedPhaseIsCountedOnce(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "x"})
	req.End(nil)
	before := r.in.Stats().Misuse
	req.StartPhase(ctx, spans.Preprocess, attrs.PhaseKey.String("mine")).End(nil)
	if n := r.in.Stats().Misuse - before; n != 1 {
		t.Errorf("one StartPhase on an ended request counted %d times", n)
	}
}

// A stage of this process ends with its request. Its owner's End after
// that does nothing more, as an ActivePhase's End after its request ended
// does: it is no misuse of the owner's, who ended it once.
func TestAdvAStageEndedByItsRequestIsNotEndedTwiceByItsOwner(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "s"})
	sctx, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Type: attrs.StageLLM})
	p := st.StartPhase(sctx, spans.LLMDecode)
	req.End(nil) // ends p and st with it
	before := r.in.Stats().Misuse
	p.End(nil) // nothing, uncounted
	if n := r.in.Stats().Misuse - before; n != 0 {
		t.Fatalf("ActivePhase.End after its request ended counted %d misuses", n)
	}
	st.End(nil)
	if n := r.in.Stats().Misuse - before; n != 0 {
		t.Errorf("the stage's own End after its request ended it counted %d misuses (\"ended twice\")", n)
	}
}

// A transfer recorded on a request that has already ended is refused
// (ErrRequestEnded, counted): nothing of it may be exported, its size
// measurement included.
func TestAdvATransferRefusedAfterTheEndMeasuresNothing(t *testing.T) {
	for _, timed := range []bool{true, false} {
		name := "with its parts"
		if !timed {
			name = "size only"
		}
		t.Run(name, func(t *testing.T) {
			m := newMetered(t, true)
			_, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "t", Model: "m"})
			req.End(nil)
			rec := spans.TransferRecord{FromStage: 0, ToStage: 1, Bytes: 1 << 20, Connector: "shm"}
			if timed {
				now := time.Now()
				rec.Tx = spans.Between(now, now.Add(time.Millisecond))
			}
			before := m.in.Stats().Misuse
			err := req.RecordTransfer(rec)
			counted := m.in.Stats().Misuse - before
			h := m.histograms(t)
			if n := len(h["omni.transfer.size"]); n != 0 {
				t.Errorf("a transfer on an ended request (RecordTransfer: %v, misuse counted %d) still recorded its size: %d data points",
					err, counted, n)
			}
			if !errors.Is(err, otelomni.ErrRequestEnded) || counted != 1 {
				t.Errorf("RecordTransfer on an ended request: %v, %d misuses counted; want ErrRequestEnded, counted once", err, counted)
			}
		})
	}
}

// The time to the first token is the prefill's end: a prefill that
// failed produced no token, and records no time to the first token.
func TestAdvAFailedPrefillRecordsNoTimeToFirstToken(t *testing.T) {
	for _, path := range []string{"record", "live"} {
		t.Run(path, func(t *testing.T) {
			m := newMetered(t, true)
			t0 := time.Now()
			ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "g", Model: "m", Start: t0,
				Stage: otelomni.StageInfo{Type: attrs.StageLLM}})
			oom := errors.New("out of memory")
			if path == "record" {
				if err := req.RecordPhase(spans.LLMPrefill, spans.Between(t0, t0.Add(time.Millisecond)), oom); err != nil {
					t.Fatal(err)
				}
			} else {
				req.StartPhase(ctx, spans.LLMPrefill).End(oom)
			}
			req.End(oom)
			if dps := m.histograms(t)["gen_ai.server.time_to_first_token"]; len(dps) != 0 {
				t.Errorf("a failed prefill recorded a time to the first token: %d samples", dps[0].Count)
			}
		})
	}
}
