// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/otelomni"
)

// policySettings are thresholds for synthetic requests: every modality has
// its own slow threshold, and no baseline share, so that a trace is kept
// if and only if a policy matched it. A synthetic trace's spans leave in
// one flush, milliseconds apart, its request span with them; the decision
// wait after the request span leaves seconds to spare.
var policySettings = map[string]string{
	"OMNI_DECISION_WAIT":     "5s",
	"OMNI_DECISION_WAIT_MAX": "10m",
	"OMNI_SLOW_IMAGE_MS":     "2000",
	"OMNI_SLOW_VIDEO_MS":     "20000",
	"OMNI_SLOW_AUDIO_MS":     "5000",
	"OMNI_SLOW_OTHER_MS":     "3000",
	"OMNI_QUEUE_BUDGET_MS":   "1000",
	"OMNI_SAMPLE_PERCENT":    "0",
	"OMNI_SPANMETRICS_FLUSH": "1s",
}

// TestFleetPoliciesKeepByModalityErrorAndQueueWait sends one synthetic
// trace per case through the shipped collector and checks that exactly the
// traces a policy matches reach the backend, whole, and that the others
// leave no span there.
func TestFleetPoliciesKeepByModalityErrorAndQueueWait(t *testing.T) {
	tier := startTier(t, policySettings)
	const ms = time.Millisecond
	cases := []struct {
		name   string
		req    synthRequest
		policy string // "" when no policy keeps it
	}{
		{"FailedShortRequestIsKept", synth(attrs.ModalityImage, 500*ms, 10*ms, otelomni.ErrStageError), "error"},
		{"ImageSlowerThanImageThresholdIsKept", synth(attrs.ModalityImage, 2500*ms, 10*ms, nil), "slow-image"},
		{"ImageUnderImageThresholdIsDropped", synth(attrs.ModalityImage, 1500*ms, 10*ms, nil), ""},
		{"VideoOverImageButUnderVideoThresholdIsDropped", synth(attrs.ModalityVideo, 10000*ms, 10*ms, nil), ""},
		{"VideoSlowerThanVideoThresholdIsKept", synth(attrs.ModalityVideo, 25000*ms, 10*ms, nil), "slow-video"},
		{"AudioOverImageButUnderAudioThresholdIsDropped", synth(attrs.ModalityAudio, 3000*ms, 10*ms, nil), ""},
		{"AudioSlowerThanAudioThresholdIsKept", synth(attrs.ModalityAudio, 6000*ms, 10*ms, nil), "slow-audio"},
		{"TextSlowerThanOtherThresholdIsKept", synth(attrs.ModalityText, 3500*ms, 10*ms, nil), "slow-other"},
		{"TextUnderOtherThresholdIsDropped", synth(attrs.ModalityText, 2500*ms, 10*ms, nil), ""},
		{"DiffusionQueueWaitOverBudgetIsKept", synth(attrs.ModalityImage, 1500*ms, 1200*ms, nil), "saturated"},
		{"LLMQueueOverBudgetIsKept", synth(attrs.ModalityAudio, 1500*ms, 1200*ms, nil), "saturated"},
		{"QueueWaitUnderBudgetIsDropped", synth(attrs.ModalityImage, 1500*ms, 800*ms, nil), ""},
	}
	p := newProducer(t, tier.Collector.OTLPEndpoint(), "fleet-policies", 1)
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = p.send(t, c.req)
	}
	p.flush(t)
	made := p.spans()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tally, err := tier.Collector.WaitDecided(ctx, len(cases), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !tally.Decided() || tally.TooEarly > 0 || tally.NewTraces != len(cases) {
		t.Fatalf("the collector saw %d traces and decided %d, want %d", tally.NewTraces, tally.Kept+tally.Dropped, len(cases))
	}
	wantMatched := map[string]int{}
	for _, c := range cases {
		if c.policy != "" {
			wantMatched[c.policy]++
		}
	}
	for _, policy := range []string{"error", "slow-image", "slow-video", "slow-audio", "slow-other", "saturated", "baseline"} {
		if tally.Matched[policy] != wantMatched[policy] {
			t.Errorf("policy %s matched %d traces, want %d", policy, tally.Matched[policy], wantMatched[policy])
		}
	}

	// Every kept trace, whole; then every dropped one is absent: its
	// decision is final once the collector has decided every trace.
	c := tier.Backend.Client()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []traceview.Span
			if tc.policy != "" {
				deadline := time.Now().Add(time.Minute)
				for len(got) < made[ids[i]] && time.Now().Before(deadline) {
					if got, err = c.Trace(ctx, ids[i]); err != nil {
						t.Fatal(err)
					}
					if len(got) < made[ids[i]] {
						time.Sleep(250 * time.Millisecond)
					}
				}
				if len(got) != made[ids[i]] {
					t.Fatalf("kept by %s: the backend has %d of its %d spans", tc.policy, len(got), made[ids[i]])
				}
				if roots, _ := traceview.Trees(got); len(roots) != 1 {
					t.Errorf("kept trace in %d trees, want one", len(roots))
				}
				return
			}
			if got, err = c.Trace(ctx, ids[i]); err != nil {
				t.Fatal(err)
			}
			if len(got) != 0 {
				t.Errorf("dropped, yet the backend has %d of its spans", len(got))
			}
		})
	}
}

// TestFleetBaselineKeepsTheConfiguredShareOfOtherTraces sends many short,
// successful requests, which no policy matches, through a collector
// keeping 20% of them. The trace ids come from a seeded generator and the
// baseline decision is a hash of the id, so the kept count is the same on
// every run; the tolerance is 5 binomial standard deviations (a random
// seed would fail it with probability below 1e-6).
func TestFleetBaselineKeepsTheConfiguredShareOfOtherTraces(t *testing.T) {
	const (
		n       = 3000
		percent = 20.0
	)
	settings := map[string]string{}
	for k, v := range policySettings {
		settings[k] = v
	}
	settings["OMNI_SAMPLE_PERCENT"] = "20"
	tier := startTier(t, settings)
	p := newProducer(t, tier.Collector.OTLPEndpoint(), "fleet-baseline", 7)
	from := time.Now().Add(-time.Minute)
	for i := range n {
		p.send(t, synth(attrs.ModalityImage, 200*time.Millisecond, 5*time.Millisecond, nil))
		if i%300 == 299 { // within the span queue's 2048
			p.flush(t)
		}
	}
	p.flush(t)
	made := p.spans()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tally, err := tier.Collector.WaitDecided(ctx, n, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !tally.Decided() || tally.TooEarly > 0 || tally.NewTraces != n {
		t.Fatalf("the collector saw %d traces and decided %d, want %d", tally.NewTraces, tally.Kept+tally.Dropped, n)
	}
	mean := n * percent / 100
	tol := 5 * math.Sqrt(n*percent/100*(1-percent/100))
	if math.Abs(float64(tally.Kept)-mean) > tol {
		t.Errorf("kept %d of %d, want %.0f ± %.0f (%.0f%% ± 5 sigma)", tally.Kept, n, mean, tol, percent)
	}
	if tally.Matched["baseline"] != tally.Kept {
		t.Errorf("the baseline matched %d traces, yet %d were kept", tally.Matched["baseline"], tally.Kept)
	}

	// The backend holds exactly the kept traces, each whole.
	var traces map[string][]traceview.Span
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ss, err := tier.Backend.Client().Search(ctx, "fleet-baseline", from, time.Now().Add(time.Minute), 2*n)
		if err != nil {
			t.Fatal(err)
		}
		traces = traceview.ByTrace(ss)
		if spansIn(traces) >= tally.Kept*made[firstKey(made)] || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(traces) != tally.Kept {
		t.Errorf("the backend holds %d traces, the collector kept %d", len(traces), tally.Kept)
	}
	for id, tr := range traces {
		if len(tr) != made[id] {
			t.Errorf("trace %s: %d of its %d spans", id, len(tr), made[id])
		}
	}
	t.Logf("kept %d of %d (%.1f%%; configured %.0f%%, tolerance ±%.0f traces)", tally.Kept, n, 100*float64(tally.Kept)/n, percent, tol)
}

func spansIn(traces map[string][]traceview.Span) int {
	n := 0
	for _, tr := range traces {
		n += len(tr)
	}
	return n
}

// firstKey returns one key of m; every synthetic request of a test makes
// as many spans as any other.
func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}
