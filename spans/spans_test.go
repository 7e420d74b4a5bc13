package spans_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/spans"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func TestCatalogueMatchesTheDesign(t *testing.T) {
	want := []struct {
		id, name string
		parent   spans.Parent
	}{
		{"queue_wait", "omni.diffusion.queue_wait", spans.ParentScope},
		{"preprocess", "omni.diffusion.preprocess", spans.ParentScope},
		{"exec", "omni.diffusion.exec", spans.ParentScope},
		{"kv_recv", "omni.diffusion.kv_recv", spans.ParentExec},
		{"forward", "omni.diffusion.forward", spans.ParentExec},
		{"denoise_step", "omni.diffusion.denoise_step", spans.ParentForward},
		{"vae_decode", "omni.diffusion.vae_decode", spans.ParentExec},
		{"output_ready_wait", "omni.diffusion.output_ready_wait", spans.ParentScope},
		{"postprocess", "omni.diffusion.postprocess", spans.ParentScope},
		{"llm.queue", "omni.llm.queue", spans.ParentScope},
		{"llm.prefill", "omni.llm.prefill", spans.ParentScope},
		{"llm.decode", "omni.llm.decode", spans.ParentScope},
		{"transfer.tx", "omni.transfer.tx", spans.ParentTransfer},
		{"transfer.in_flight", "omni.transfer.in_flight", spans.ParentTransfer},
		{"transfer.rx_decode", "omni.transfer.rx_decode", spans.ParentTransfer},
	}
	all := spans.Phases()
	if len(all) != len(want) {
		t.Fatalf("%d phases, want %d", len(all), len(want))
	}
	for i, w := range want {
		p := all[i]
		if p.ID() != w.id || p.SpanName() != w.name || p.Parent() != w.parent || p.String() != w.id {
			t.Errorf("phase %d: %q %q %v, want %q %q %v", i, p.ID(), p.SpanName(), p.Parent(), w.id, w.name, w.parent)
		}
		if p.Interval() == "" {
			t.Errorf("%v has no interval statement", p)
		}
		if got, ok := spans.Lookup(w.id); !ok || got != p {
			t.Errorf("Lookup(%q) = %v, %v", w.id, got, ok)
		}
		if got, ok := spans.LookupSpanName(w.name); !ok || got != p {
			t.Errorf("LookupSpanName(%q) = %v, %v", w.name, got, ok)
		}
	}
	if spans.OutputReadyWait.PerOutput() != true || spans.Exec.PerOutput() {
		t.Error("only output-ready wait and postprocess are per output")
	}
	for _, bad := range []spans.Phase{0, spans.Phase(spans.NumPhases), 255} {
		if bad.Valid() || bad.ID() != "" || bad.SpanName() != "" || bad.Parent() != 0 || !strings.HasPrefix(bad.String(), "Phase(") {
			t.Errorf("invalid phase %d is described as valid", bad)
		}
	}
	if _, ok := spans.Lookup("exec_time_ms"); ok {
		t.Error("Lookup of an unknown id succeeded")
	}
}

func TestIntervalTellsUnmeasuredFromZero(t *testing.T) {
	var unset spans.Interval
	zero := spans.Between(ms(5), ms(5))
	if unset.Measured() {
		t.Error("the zero Interval must mean not measured")
	}
	if d, ok := unset.Duration(); ok || d != 0 {
		t.Errorf("unset Duration = %v, %v", d, ok)
	}
	if !zero.Measured() {
		t.Error("Between with equal ends is a measured 0")
	}
	if d, ok := zero.Duration(); !ok || d != 0 {
		t.Errorf("zero Duration = %v, %v", d, ok)
	}
	if unset.String() != "not measured" {
		t.Errorf("unset String = %q", unset.String())
	}
	if err := unset.Validate(); err != nil {
		t.Errorf("an unmeasured interval is not bad input: %v", err)
	}
}

func TestIntervalValidate(t *testing.T) {
	cases := []struct {
		name string
		iv   spans.Interval
		want error
	}{
		{"valid", spans.Between(ms(1), ms(2)), nil},
		{"zero length", spans.Lasting(ms(1), 0), nil},
		{"end before start", spans.Between(ms(2), ms(1)), spans.ErrEndBeforeStart},
		{"negative duration", spans.Lasting(ms(2), -time.Nanosecond), spans.ErrEndBeforeStart},
		{"zero start", spans.Between(time.Time{}, ms(1)), spans.ErrZeroTime},
		{"zero end", spans.Between(ms(1), time.Time{}), spans.ErrZeroTime},
		{"zero start lasting", spans.Lasting(time.Time{}, time.Second), spans.ErrZeroTime},
	}
	for _, tc := range cases {
		if err := tc.iv.Validate(); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: Validate = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestBetweenUsesTheMonotonicClockWhenBothEndsHaveIt(t *testing.T) {
	start := time.Now()
	end := time.Now()
	iv := spans.Between(start, end)
	if got, want := iv.End().Sub(iv.Start()), end.Sub(start); got != want {
		t.Errorf("elapsed %v, want %v", got, want)
	}
	// The end's wall time is the start's plus the monotonic elapsed time.
	if got := iv.End().Round(0).Sub(iv.Start().Round(0)); got < 0 {
		t.Errorf("wall-clock duration %v is negative", got)
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
	plan, err := rec.Plan(nil, spans.PlanOptions{DenoiseSteps: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range plan {
		s := p.Phase.ID()
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
	if !plan[len(plan)-1].Final || plan[len(plan)-2].Final {
		t.Error("only the last output is final")
	}

	plan, _ = rec.Plan(nil, spans.PlanOptions{})
	for _, p := range plan {
		if p.Phase == spans.DenoiseStep {
			t.Error("denoise steps are planned only when switched on")
		}
	}
	var nilRec *spans.DiffusionRecord
	if p, err := nilRec.Plan(nil, spans.PlanOptions{}); len(p) != 0 || err != nil {
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
	plan, err := rec.Plan(nil, spans.PlanOptions{})
	if len(plan) != 1 || plan[0].Phase != spans.Exec {
		t.Fatalf("plan %v, want exec only", plan)
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
