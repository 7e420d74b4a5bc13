// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/testbed/internal/fleet"
)

// TestFleetKeepsFailedSlowAndSaturatedRequestsWholeAcrossProcesses runs two
// replicas of the multi-stage example (a gateway and five stage processes
// each) through the shipped collector into the shipped Badger backend, and
// checks that:
//   - every failed, slow and saturated request's trace is kept, complete
//     (every span from every process) and one tree;
//   - the backend holds nothing else: a dropped request left no span;
//   - the collector's per-policy counts equal what the kept traces show;
//   - the baseline keeps its share of the other requests (5 sigma);
//   - the engines' request histogram counts every request, the span
//     metrics only the kept ones.
func TestFleetKeepsFailedSlowAndSaturatedRequestsWholeAcrossProcesses(t *testing.T) {
	settings := fleet.DemoSettings()
	settings["OMNI_SAMPLE_PERCENT"] = "25"
	tier := startTier(t, settings)
	pol, err := fleet.ParsePolicies(settings)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tr := fleet.Traffic{Replicas: 2, Requests: 36, Concurrency: 6, Mix: "normal=3,slow=1,saturated=1,failing=1",
		Slow: fleet.DemoSlow, QueueWait: fleet.DemoQueueWait, Service: "e2e-fleet"}
	from := time.Now().Add(-time.Second)
	reqs, err := fleet.RunReplicas(ctx, bin["omni"], tier.Collector.OTLPEndpoint(), t.TempDir(), tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != tr.Replicas*tr.Requests {
		t.Fatalf("%d requests served, want %d", len(reqs), tr.Replicas*tr.Requests)
	}

	// Failure deadlines only; every assertion below is on counts.
	tally, err := tier.Collector.WaitDecided(ctx, len(reqs), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if tally.NewTraces != len(reqs) || !tally.Decided() || tally.TooEarly > 0 {
		t.Fatalf("the collector saw %d traces and decided %d, want one per request: %d", tally.NewTraces, tally.Kept+tally.Dropped, len(reqs))
	}
	rep, err := fleet.WaitStored(ctx, tier.Backend.Client(), from, time.Now().Add(time.Minute), reqs, tally.Kept, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	perScenario := map[pipeline.Special]map[string]int{}
	eligible, baseline := 0, 0
	for _, o := range rep.Outcomes {
		sc := o.Scenario()
		if perScenario[sc] == nil {
			perScenario[sc] = map[string]int{}
		}
		perScenario[sc][o.Pipeline]++
		if sc != pipeline.Normal && !o.Kept {
			t.Errorf("%s request %s (%s) was not kept", sc, o.ID, o.Pipeline)
		}
		if o.Kept && len(o.Problems) > 0 {
			t.Errorf("%s request %s (%s): kept incomplete: %v", sc, o.ID, o.Pipeline, o.Problems)
		}
		rule := ""
		if o.Kept {
			rule = pol.Rule(o)
		}
		if sc == pipeline.Normal && rule == "" {
			// Neither kept by a rule: left to the baseline.
			eligible++
			if o.Kept {
				baseline++
			}
		}
	}
	for _, sc := range []pipeline.Special{pipeline.Slow, pipeline.Saturated, pipeline.Failing} {
		if perScenario[sc]["speech"] == 0 || perScenario[sc]["image"] == 0 {
			t.Errorf("the mix sent %v %s requests per pipeline, want both pipelines", perScenario[sc], sc)
		}
	}
	for _, s := range rep.Strays {
		t.Errorf("the backend holds what is not one whole request: %s", s)
	}
	if rep.Traces != tally.Kept || rep.Kept() != tally.Kept {
		t.Errorf("the backend holds %d traces (%d requests), the collector kept %d", rep.Traces, rep.Kept(), tally.Kept)
	}

	// Each policy matched exactly the kept traces that show its reason. A
	// trace can match more than one: count each reason on its own.
	failed, saturated := 0, 0
	slow := map[string]int{}
	for _, o := range rep.Outcomes {
		if !o.Kept {
			continue
		}
		if o.Failed {
			failed++
		}
		if o.Queue > pol.Queue {
			saturated++
		}
		if m := pipeline.Modality(o.Pipeline); o.Duration > pol.Slow[m] {
			slow["slow-"+m]++
		}
	}
	checks := map[string]int{"error": failed, "saturated": saturated, "slow-audio": slow["slow-audio"], "slow-image": slow["slow-image"]}
	for policy, want := range checks {
		if tally.Matched[policy] != want {
			t.Errorf("policy %s matched %d traces; the kept traces show %d", policy, tally.Matched[policy], want)
		}
	}
	if want := perScenario[pipeline.Failing]["speech"] + perScenario[pipeline.Failing]["image"]; failed != want {
		t.Errorf("%d kept traces failed, %d requests failed on purpose", failed, want)
	}

	// The baseline share of the rest, within 5 binomial standard deviations.
	p := pol.Percent / 100
	mean, sd := float64(eligible)*p, math.Sqrt(float64(eligible)*p*(1-p))
	if math.Abs(float64(baseline)-mean) > 5*sd {
		t.Errorf("the baseline kept %d of %d other requests, want %.1f ± %.1f", baseline, eligible, mean, 5*sd)
	}

	// Metrics: the engines count every request; span metrics only the kept.
	counts, err := tier.Collector.WaitCounts(ctx, "gen_ai.server.request.duration", len(reqs), tally.Kept, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Engine != len(reqs) {
		t.Errorf("the engines' %s counts %d requests, %d were made", "gen_ai.server.request.duration", counts.Engine, len(reqs))
	}
	if counts.Spans != tally.Kept {
		t.Errorf("span metrics count %d request spans, %d traces were kept", counts.Spans, tally.Kept)
	}
	t.Logf("%d requests: kept %d, dropped %d; policies %v; baseline kept %d of %d others; engine histogram %d, span metrics %d",
		len(reqs), tally.Kept, tally.Dropped, tally.Matched, baseline, eligible, counts.Engine, counts.Spans)
}
