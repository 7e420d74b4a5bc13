// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package plan_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func TestParentsMatchTheDesign(t *testing.T) {
	want := map[string]plan.Parent{
		"queue_wait": plan.Scope, "preprocess": plan.Scope, "exec": plan.Scope,
		"kv_recv": plan.UnderExec, "forward": plan.UnderExec, "denoise_step": plan.UnderForward,
		"vae_decode": plan.UnderExec, "output_ready_wait": plan.Scope, "postprocess": plan.Scope,
		"llm.queue": plan.Scope, "llm.prefill": plan.Scope, "llm.decode": plan.Scope,
		"transfer.tx": plan.UnderTransfer, "transfer.in_flight": plan.UnderTransfer, "transfer.rx_decode": plan.UnderTransfer,
	}
	all := plan.Phases()
	if len(all) != len(want) || plan.NumPhases != len(all)+1 {
		t.Fatalf("%d phases, NumPhases %d, want %d", len(all), plan.NumPhases, len(want))
	}
	for _, p := range all {
		if got := plan.ParentOf(p); got != want[p.String()] {
			t.Errorf("ParentOf(%v) = %v, want %v", p, got, want[p.String()])
		}
	}
	for p, id := range map[spans.Phase]string{plan.LLMQueue: "llm.queue", plan.LLMPrefill: "llm.prefill", plan.LLMDecode: "llm.decode",
		plan.TransferTx: "transfer.tx", plan.TransferInFlight: "transfer.in_flight", plan.TransferRxDecode: "transfer.rx_decode"} {
		if p.String() != id {
			t.Errorf("plan's %d is %q in the catalogue, want %q", p, p.String(), id)
		}
	}
	for _, bad := range []spans.Phase{0, spans.Phase(plan.NumPhases), 255} {
		if plan.Valid(bad) || plan.ParentOf(bad) != 0 {
			t.Errorf("invalid phase %d has a parent", bad)
		}
	}
	if !plan.MinTime.Equal(time.Unix(0, 0)) || !plan.InRange(plan.MaxTime) || plan.InRange(plan.MaxTime.Add(1)) || !plan.InRange(plan.MinTime) || plan.InRange(plan.MinTime.Add(-1)) {
		t.Error("MinTime and MaxTime are not the range InRange checks")
	}
}

func TestPlanOrderAndAbsence(t *testing.T) {
	rec := spans.DiffusionRecord{
		Exec:         spans.Between(ms(10), ms(100)),
		QueueWait:    spans.Between(ms(11), ms(11)),
		Forward:      spans.Between(ms(20), ms(90)),
		DenoiseSteps: []spans.Interval{spans.Between(ms(20), ms(50)), {}, spans.Between(ms(60), ms(90))},
		Outputs: []spans.OutputTiming{
			{ReadyWait: spans.Between(ms(40), ms(45)), Postprocess: spans.Between(ms(45), ms(50))},
			{Postprocess: spans.Between(ms(100), ms(105)), Final: true},
		},
	}
	ps, err := plan.Diffusion(nil, &rec, plan.Options{DenoiseSteps: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		s := p.Phase.String()
		if p.Output >= 0 {
			s += "#" + string(rune('0'+p.Output))
		}
		if p.Step >= 0 {
			s += "@" + string(rune('0'+p.Step))
		}
		got = append(got, s)
	}
	want := "queue_wait exec forward denoise_step@0 denoise_step@2 output_ready_wait#0 postprocess#0 postprocess#1"
	if strings.Join(got, " ") != want {
		t.Errorf("plan %v, want %v", got, want)
	}
	if !ps[len(ps)-1].Final || ps[len(ps)-2].Final {
		t.Error("only the last output is final")
	}

	ps, _ = plan.Diffusion(nil, &rec, plan.Options{})
	for _, p := range ps {
		if p.Phase == spans.DenoiseStep {
			t.Error("denoise steps are planned only when switched on")
		}
	}
	var nilRec *spans.DiffusionRecord
	if p, err := plan.Diffusion(nil, nilRec, plan.Options{}); len(p) != 0 || err != nil {
		t.Error("a nil record plans nothing")
	}
}

func TestPlanReportsEveryBadPhaseAndKeepsTheRest(t *testing.T) {
	rec := spans.DiffusionRecord{
		Preprocess:  spans.Between(ms(5), ms(1)),
		Exec:        spans.Between(ms(10), ms(100)),
		Postprocess: spans.Between(time.Time{}, ms(1)),
		Outputs:     []spans.OutputTiming{{ReadyWait: spans.Between(ms(3), ms(2))}},
	}
	ps, err := plan.Diffusion(nil, &rec, plan.Options{})
	if len(ps) != 1 || ps[0].Phase != spans.Exec {
		t.Fatalf("plan %v, want exec only", ps)
	}
	var pes []*spans.PhaseError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *spans.PhaseError
		if errors.As(e, &pe) {
			pes = append(pes, pe)
		}
	}
	if len(pes) != 3 {
		t.Fatalf("want 3 phase errors (preprocess, the outputs conflict, output 0's wait), got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"phase preprocess: end before start by 4ms", "phase output_ready_wait (output 0): end before start", "Outputs are set"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}
