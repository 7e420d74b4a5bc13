// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
)

// longSettings are the policy settings with a short decision wait after the
// request span (2 s) and a long limit from a trace's first span (10 min),
// and a video threshold under the requests' lengths below.
func longSettings() map[string]string {
	s := maps.Clone(policySettings)
	s["OMNI_DECISION_WAIT"] = "2s"
	s["OMNI_DECISION_WAIT_MAX"] = "10m"
	s["OMNI_SLOW_VIDEO_MS"] = "4000"
	return s
}

// TestFleetRequestLongerThanTheDecisionWaitIsDecidedOnItsRequestSpan sends
// video requests whose request span reaches the collector 2.5 and 10 times
// the decision wait after their other spans, as a long request's does: the
// phase spans leave when they end, the request span when the request ends.
// The test sets the gap by waiting between the two flushes, so the request
// span is late by construction whatever the machine's speed. The collector
// must hold each trace until its request span has come (and the decision
// wait after it), then decide on the whole trace: the slow and the failed
// ones are kept with every span, the fast one is dropped with every span,
// and no span arrives after its trace's decision.
func TestFleetRequestLongerThanTheDecisionWaitIsDecidedOnItsRequestSpan(t *testing.T) {
	settings := longSettings()
	tier := startTier(t, settings)
	p := newProducer(t, tier.Collector.OTLPEndpoint(), "fleet-long", 11)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const wait = 2 * time.Second // OMNI_DECISION_WAIT above
	cases := []struct {
		name   string
		req    synthRequest
		late   time.Duration // how long after its phase spans the request span is sent
		policy string        // "" when no policy keeps it
	}{
		{"SlowVideoLasting2.5TimesTheWait", synth(attrs.ModalityVideo, 5*time.Second, 10*time.Millisecond, nil), 5 * wait / 2, "slow-video"},
		{"VideoFailingAfter2.5TimesTheWait", synth(attrs.ModalityVideo, 3*time.Second, 10*time.Millisecond, otelomni.ErrStageError), 5 * wait / 2, "error"},
		{"FastVideoLasting2.5TimesTheWaitIsDropped", synth(attrs.ModalityVideo, 3*time.Second, 10*time.Millisecond, nil), 5 * wait / 2, ""},
		{"SlowVideoLasting10TimesTheWait", synth(attrs.ModalityVideo, 20*time.Second, 10*time.Millisecond, nil), 10 * wait, "slow-video"},
	}
	ids := make([]string, len(cases))
	ends := make([]func() error, len(cases))
	for i, c := range cases {
		var err error
		if ids[i], ends[i], err = p.Start(c.req); err != nil {
			t.Fatal(err)
		}
	}
	p.flush(t)
	sent := time.Now()
	// Each request span leaves once its gap has passed, shortest first.
	for _, late := range []time.Duration{5 * wait / 2, 10 * wait} {
		time.Sleep(time.Until(sent.Add(late)))
		during, err := tier.Collector.Tally(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for i, c := range cases {
			if c.late >= late {
				open++
			}
			if c.late == late {
				if err := ends[i](); err != nil {
					t.Fatal(err)
				}
			}
		}
		if decided := during.Kept + during.Dropped + during.TooEarly; decided > len(cases)-open {
			t.Fatalf("%v after the phase spans: %d traces decided while %d request spans were still to come", late, decided, open)
		}
		p.flush(t)
	}
	made := p.spans()

	tally, err := tier.Collector.WaitDecided(ctx, len(cases), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if tally.NewTraces != len(cases) || !tally.Decided() || tally.TooEarly > 0 {
		t.Fatalf("the collector saw %d traces and decided %d (evicted %d), want %d", tally.NewTraces, tally.Kept+tally.Dropped, tally.TooEarly, len(cases))
	}
	if tally.LateKept+tally.LateDropped != 0 {
		t.Errorf("spans that arrived after their trace's decision: %d kept, %d dropped; want none", tally.LateKept, tally.LateDropped)
	}
	want := map[string]int{}
	for _, c := range cases {
		if c.policy != "" {
			want[c.policy]++
		}
	}
	for _, policy := range []string{"error", "slow-video", "baseline"} {
		if tally.Matched[policy] != want[policy] {
			t.Errorf("policy %s matched %d traces, want %d", policy, tally.Matched[policy], want[policy])
		}
	}
	c := tier.Backend.Client()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.policy != "" {
				readWhole(ctx, t, c, ids[i], made[ids[i]])
				return
			}
			// Its decision is final once every trace is decided.
			if got, err := c.Trace(ctx, ids[i]); err != nil || len(got) != 0 {
				t.Errorf("dropped, yet the backend has %d of its spans (%v)", len(got), err)
			}
		})
	}
}
