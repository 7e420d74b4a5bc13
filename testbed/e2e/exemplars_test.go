// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/testbed/internal/fleet"
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
	t.Logf("%d exemplars of the kept choice (OTELOMNI_EXEMPLARS=kept), all leading to a kept trace; the SDK's choice: %d exemplars, %d of them to a trace the tier dropped", ours, sdk, sdkNowhere)
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

// TestExemplarsLeadToKeptTracesUnderASmallValueLimit runs the multi-stage
// example's replicas through the shipped tier under thresholds that keep
// every image and audio request as slow (1 ms) and no other request by
// its length: one replica with OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT=4,
// under which the exported request span's modality reads "imag" or
// "audi", another modality to the tier, and one without. Every exemplar
// Prometheus holds must name a trace the backend holds: a choice made on
// the modality as measured ("image"), not as exported, would give every
// image request of the first replica an exemplar of a trace the tier
// drops.
func TestExemplarsLeadToKeptTracesUnderASmallValueLimit(t *testing.T) {
	settings := fleet.DemoSettings()
	maps.Copy(settings, map[string]string{"OMNI_SLOW_IMAGE_MS": "1", "OMNI_SLOW_AUDIO_MS": "1",
		"OMNI_SLOW_OTHER_MS": "86400000", "OMNI_SLOW_VIDEO_MS": "86400000"})
	tier := startTier(t, settings)
	prom := startPrometheus(t, tier.Collector.Prometheus)
	env, err := fleet.EngineEnv(settings)
	if err != nil {
		t.Fatal(err)
	}
	limited := maps.Clone(env)
	limited["OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"] = "4"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mix := "normal=3,slow=1,saturated=1,failing=1"
	from := time.Now().Add(-time.Second)
	var reqs []fleet.Request
	for i, e := range []map[string]string{limited, env} {
		r, err := fleet.RunReplicas(ctx, bin["omni"], tier.Collector.OTLPEndpoint(), t.TempDir(), fleet.Traffic{Replicas: 1, Requests: 24,
			Concurrency: 6, Mix: mix, Slow: fleet.DemoSlow, QueueWait: fleet.DemoQueueWait, Service: fmt.Sprintf("limit-%d", i), Env: e, Seed: 1 + 50*i})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r...)
	}
	tally, err := tier.Collector.WaitDecided(ctx, len(reqs), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, 2*time.Minute, func() bool {
		s, err := prom.Query(ctx, `sum(gen_ai_server_request_duration_seconds_count)`)
		return err == nil && len(s) == 1 && int(s[0].Value) == len(reqs)
	}); err != nil {
		t.Fatalf("Prometheus never counted the %d requests: %v", len(reqs), err)
	}
	// Every kept trace has its gateway's spans: the backend holds them all
	// once each gateway's search finds as many traces as the tier kept.
	held := map[string]bool{}
	if err := until(ctx, 2*time.Minute, func() bool {
		for _, svc := range []string{"limit-0", "limit-1"} {
			ss, err := tier.Backend.Client().Search(ctx, svc, from, time.Now().Add(time.Minute), 4*len(reqs))
			if err != nil {
				return false
			}
			for _, s := range ss {
				held[s.TraceID] = true
			}
		}
		return len(held) >= tally.Kept
	}); err != nil {
		t.Fatalf("the backend holds %d traces, the tier kept %d: %v", len(held), tally.Kept, err)
	}
	exs, err := prom.QueryExemplars(ctx, histogramsWithExemplars, from, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	perJob := map[string]int{}
	for _, e := range exs {
		perJob[e.Series["job"]]++
		if id := e.Labels["trace_id"]; !held[id] {
			t.Errorf("an exemplar of %s %v names trace %s, which the tier dropped", e.Series["__name__"], e.Series, id)
		}
	}
	if perJob["limit-0"] == 0 || perJob["limit-1"] == 0 {
		t.Errorf("exemplars per process %v: want some of each gateway", perJob)
	}
	t.Logf("%d requests, %d traces kept; %d exemplars (per process %v), each naming a trace the backend holds", len(reqs), tally.Kept, len(exs), perJob)
}
