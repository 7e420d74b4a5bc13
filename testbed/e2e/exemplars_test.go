// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/testbed/fleet"
)

// histogramsWithExemplars are the Prometheus names of otelomni's
// histograms whose exemplars must lead to a kept trace.
const histogramsWithExemplars = `{__name__=~"(omni_phase_duration|omni_stage_duration|gen_ai_server_request_duration|gen_ai_server_time_to_first_token)_seconds_bucket"}`

func startPrometheus(t *testing.T, targets ...string) *fleet.Prometheus {
	t.Helper()
	bin, err := fleet.PrometheusBinary()
	if err != nil {
		if os.Getenv("OTELOMNI_REQUIRE_JAEGER") == "1" {
			t.Fatalf("Prometheus is required: %v", err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	p, err := fleet.StartPrometheus(context.Background(), bin, dir, targets...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("Prometheus's log:\n%s", p.Logs())
		}
	})
	return p
}

// TestEveryExemplarLeadsToAKeptTrace runs replicas of the multi-stage
// example under normal, slow, saturated and failing requests through the
// shipped tier into the Badger backend, with a real Prometheus scraping the
// tier's OpenMetrics endpoint, and checks that:
//   - every exemplar Prometheus returns for otelomni's histograms names a
//     trace the backend holds, whole;
//   - the failed requests' error.type series and the slow requests' buckets
//     carry exemplars;
//   - the histograms still count every request;
//   - beside them, a replica left to the SDK's choice (OTELOMNI_EXEMPLARS
//     unset) has exemplars that lead nowhere, which the test reports.
func TestEveryExemplarLeadsToAKeptTrace(t *testing.T) {
	settings := fleet.DemoSettings()
	tier := startTier(t, settings)
	prom := startPrometheus(t, tier.Collector.Prometheus)
	pol, err := fleet.ParsePolicies(settings)
	if err != nil {
		t.Fatal(err)
	}
	// The engines keep their exemplars for the traces the tier keeps, by
	// the thresholds the collector reads; one replica is left to the
	// SDK's choice.
	env, err := fleet.EngineEnv(settings)
	if err != nil {
		t.Fatal(err)
	}
	sdkEnv := maps.Clone(env)
	delete(sdkEnv, "OTELOMNI_EXEMPLARS")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mix := "normal=3,slow=1,saturated=1,failing=1"
	runs := []fleet.Traffic{
		{Replicas: 2, Requests: 24, Concurrency: 6, Mix: mix, Slow: fleet.DemoSlow, QueueWait: fleet.DemoQueueWait, Service: "e2e-exemplars", Env: env},
		{Replicas: 1, Requests: 24, Concurrency: 6, Mix: mix, Slow: fleet.DemoSlow, QueueWait: fleet.DemoQueueWait, Service: "sdk-exemplars", Env: sdkEnv, Seed: 101},
	}
	from := time.Now().Add(-time.Second)
	var (
		mu   sync.Mutex
		reqs []fleet.Request
		errs []error
		wg   sync.WaitGroup
	)
	for _, tr := range runs {
		wg.Go(func() {
			r, err := fleet.RunReplicas(ctx, bin["omni"], tier.Collector.OTLPEndpoint(), t.TempDir(), tr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			reqs = append(reqs, r...)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	tally, err := tier.Collector.WaitDecided(ctx, len(reqs), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := fleet.WaitStored(ctx, tier.Backend.Client(), from, time.Now().Add(time.Minute), reqs, tally.Kept, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	whole := map[string]*fleet.Outcome{}
	for _, o := range rep.Outcomes {
		if o.Kept && len(o.Problems) == 0 {
			whole[o.TraceID] = o
		}
	}

	// Prometheus holds the final counts: every request of both runs.
	count := `sum(gen_ai_server_request_duration_seconds_count)`
	var total float64
	if err := until(ctx, 2*time.Minute, func() bool {
		s, err := prom.Query(ctx, count)
		if err != nil || len(s) != 1 {
			return false
		}
		total = s[0].Value
		return int(total) == len(reqs)
	}); err != nil {
		t.Fatalf("Prometheus counts %v requests, %d were made: %v", total, len(reqs), err)
	}

	exs, err := prom.QueryExemplars(ctx, histogramsWithExemplars, from, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ours, sdk, sdkNowhere := 0, 0, 0
	failedSeries := map[string]bool{}
	slowExemplar := map[string]bool{}
	for _, e := range exs {
		id := e.Labels["trace_id"]
		if strings.HasPrefix(e.Series["job"], "sdk-exemplars") {
			sdk++
			if whole[id] == nil {
				sdkNowhere++
			}
			continue
		}
		ours++
		o := whole[id]
		if o == nil {
			for _, o := range rep.Outcomes {
				if o.TraceID == id {
					t.Logf("trace %s: request %s (%s, %s), kept %v, problems %v", id, o.ID, o.Pipeline, o.Scenario(), o.Kept, o.Problems)
				}
			}
			t.Errorf("an exemplar of %s %v names trace %s, which the backend does not hold whole", e.Series["__name__"], e.Series, id)
			continue
		}
		if e.Series["__name__"] == "gen_ai_server_request_duration_seconds_bucket" {
			if et := e.Series["error_type"]; et != "" {
				failedSeries[et] = true
			}
			if o.Duration > pol.Slow[pipeline.Modality(o.Pipeline)] {
				slowExemplar[o.Pipeline] = true
			}
		}
	}
	if ours == 0 {
		req, _ := http.NewRequest("GET", "http://"+tier.Collector.Prometheus+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			n := 0
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, " # {") && n < 5 {
					t.Logf("DEBUG %s", l)
					n++
				}
			}
			t.Logf("DEBUG content-type %s, %d bytes, %d exemplar lines; total exemplars %d", resp.Header.Get("Content-Type"), len(b), strings.Count(string(b), " # {"), len(exs))
		}
		t.Fatal("Prometheus returned no exemplar of otelomni's histograms")
	}
	// Every error.type a failed request of ours was counted under carries
	// an exemplar, and so do the slow requests of each pipeline.
	failed, err := prom.Query(ctx, `sum by (error_type) (gen_ai_server_request_duration_seconds_count{error_type!="", job!~"sdk-exemplars.*"})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) == 0 {
		t.Error("no failed request was counted")
	}
	for _, s := range failed {
		if !failedSeries[s.Labels["error_type"]] {
			t.Errorf("the request durations of error.type %s carry no exemplar", s.Labels["error_type"])
		}
	}
	for _, p := range []string{"speech", "image"} {
		if !slowExemplar[p] {
			t.Errorf("no exemplar of a slow %s request's duration", p)
		}
	}
	t.Logf("%d exemplars of otelomni's choice, all leading to a kept trace; the SDK's choice: %d exemplars, %d of them to a trace the tier dropped", ours, sdk, sdkNowhere)
}

// until calls done every 250 ms until it is true, within a failure
// deadline.
func until(ctx context.Context, within time.Duration, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}
