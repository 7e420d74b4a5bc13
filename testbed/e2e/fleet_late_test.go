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
	"github.com/otelomni/otelomni/testbed/internal/fleet"
)

// TestFleetRequestOutlivingTheMaximumWaitFollowsItsEarlySpans sends a
// request's phase spans, waits until the collector has decided the trace
// on them, and only then sends its request span, as happens to a request
// that outlives OMNI_DECISION_WAIT_MAX (5 s here). The late span follows
// the decision remembered in the decision cache: a request whose early
// spans matched a policy is kept whole; one whose failure only its request
// span shows is dropped whole, failure and all, and never stored as a
// partial trace.
func TestFleetRequestOutlivingTheMaximumWaitFollowsItsEarlySpans(t *testing.T) {
	settings := maps.Clone(policySettings)
	settings["OMNI_DECISION_WAIT_MAX"] = "5s"
	tier := startTier(t, settings)
	p := newProducer(t, tier.Collector.OTLPEndpoint(), "fleet-late", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cases := []struct {
		name string
		req  synthRequest
		kept bool
	}{
		{"FailureShownOnlyByTheLateRequestSpanIsDroppedWhole", synth(attrs.ModalityAudio, time.Second, 10*time.Millisecond, otelomni.ErrStageError), false},
		{"SaturatedQueueSeenEarlyKeepsTheLateRequestSpan", synth(attrs.ModalityAudio, 2*time.Second, 1200*time.Millisecond, nil), true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := tier.Collector.Tally(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id, end, err := p.Start(c.req)
			if err != nil {
				t.Fatal(err)
			}
			p.flush(t)
			decided, err := tier.Collector.WaitDecided(ctx, i+1, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if kept := decided.Kept - before.Kept; kept != b2i(c.kept) || decided.NewTraces != i+1 {
				t.Fatalf("decided on the early spans: kept %d of %d new traces, want kept %v", kept, decided.NewTraces-before.NewTraces, c.kept)
			}
			if err := end(); err != nil {
				t.Fatal(err)
			}
			p.flush(t)
			late, err := tier.Collector.WaitTally(ctx, time.Minute, func(n fleet.Tally) bool {
				return n.LateKept+n.LateDropped > before.LateKept+before.LateDropped
			})
			if err != nil {
				t.Fatal(err)
			}
			if late.NewTraces != i+1 {
				t.Errorf("the late request span started a trace of its own: %d traces, want %d", late.NewTraces, i+1)
			}
			if c.kept {
				if late.LateKept != before.LateKept+1 {
					t.Errorf("late spans kept: %d, want %d", late.LateKept, before.LateKept+1)
				}
				readWhole(ctx, t, tier.Backend.Client(), id, p.spans()[id])
				return
			}
			if late.LateDropped != before.LateDropped+1 {
				t.Errorf("late spans dropped: %d, want %d", late.LateDropped, before.LateDropped+1)
			}
			if got, err := tier.Backend.Client().Trace(ctx, id); err != nil || len(got) != 0 {
				t.Errorf("dropped, yet the backend has %d of its spans (%v)", len(got), err)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
