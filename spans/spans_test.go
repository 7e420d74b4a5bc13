// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package spans_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/spans"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func TestCatalogueMatchesTheDesign(t *testing.T) {
	want := []struct{ id, name string }{
		{"queue_wait", "omni.diffusion.queue_wait"},
		{"preprocess", "omni.diffusion.preprocess"},
		{"exec", "omni.diffusion.exec"},
		{"kv_recv", "omni.diffusion.kv_recv"},
		{"forward", "omni.diffusion.forward"},
		{"denoise_step", "omni.diffusion.denoise_step"},
		{"vae_decode", "omni.diffusion.vae_decode"},
		{"output_ready_wait", "omni.diffusion.output_ready_wait"},
		{"postprocess", "omni.diffusion.postprocess"},
		{"llm.queue", "omni.llm.queue"},
		{"llm.prefill", "omni.llm.prefill"},
		{"llm.decode", "omni.llm.decode"},
		{"transfer.tx", "omni.transfer.tx"},
		{"transfer.in_flight", "omni.transfer.in_flight"},
		{"transfer.rx_decode", "omni.transfer.rx_decode"},
	}
	var all []spans.Phase
	for p := spans.Phase(1); p.SpanName() != ""; p++ {
		all = append(all, p)
	}
	if len(all) != len(want) {
		t.Fatalf("%d phases, want %d", len(all), len(want))
	}
	for i, w := range want {
		p := all[i]
		if p.SpanName() != w.name || p.String() != w.id {
			t.Errorf("phase %d: %q %q, want %q %q", i, p.String(), p.SpanName(), w.id, w.name)
		}
	}
	for _, bad := range []spans.Phase{0, spans.Phase(len(want) + 1), 255} {
		if bad.SpanName() != "" || !strings.HasPrefix(bad.String(), "Phase(") {
			t.Errorf("invalid phase %d is described as valid", bad)
		}
	}
}

func TestInRangeBounds(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want bool
	}{
		{time.Unix(0, 0), true},
		{time.Unix(0, -1), false},
		{time.Unix(0, math.MaxInt64), true},
		{time.Unix(0, math.MaxInt64).Add(time.Nanosecond), false},
		{time.Time{}, false},
	} {
		// The range a span can carry, as Validate checks it (a zero time
		// is refused as a zero time).
		err := spans.Between(c.t, c.t).Validate()
		if got := err == nil; got != c.want || !c.want && !c.t.IsZero() && !errors.Is(err, spans.ErrOutOfRange) {
			t.Errorf("Validate of %v: %v, want in range %v", c.t, err, c.want)
		}
	}
}

func TestPhaseErrorOfAnOutput(t *testing.T) {
	err := &spans.PhaseError{Output: 3, Interval: spans.Between(ms(2), ms(1)), Err: spans.ErrEndBeforeStart}
	if got := err.Error(); got != "omni: output 3: end before start by 1ms; no span emitted" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, spans.ErrEndBeforeStart) {
		t.Error("the reason does not unwrap")
	}
}

func TestIntervalTellsUnmeasuredFromZero(t *testing.T) {
	var unset spans.Interval
	zero := spans.Between(ms(5), ms(5))
	if unset.Measured() {
		t.Error("the zero Interval must mean not measured")
	}
	if !zero.Measured() {
		t.Error("Between with equal ends is a measured 0")
	}
	if zero.End() != zero.Start() {
		t.Errorf("zero interval %v ends after its start", zero)
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
		{"zero length", spans.Between(ms(1), ms(1).Add(0)), nil},
		{"end before start", spans.Between(ms(2), ms(1)), spans.ErrEndBeforeStart},
		{"negative duration", spans.Between(ms(2), ms(2).Add(-time.Nanosecond)), spans.ErrEndBeforeStart},
		{"zero start", spans.Between(time.Time{}, ms(1)), spans.ErrZeroTime},
		{"zero end", spans.Between(ms(1), time.Time{}), spans.ErrZeroTime},
		{"zero start lasting", func() spans.Interval { t := time.Time{}; return spans.Between(t, t.Add(time.Second)) }(), spans.ErrZeroTime},
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
