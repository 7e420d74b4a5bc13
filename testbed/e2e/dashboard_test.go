// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/testbed/fleet"
	"github.com/otelomni/otelomni/testbed/jaeger"
)

// dashboardPanel is what the test reads of a panel of the shipped
// dashboard.
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr     string `json:"expr"`
		Exemplar bool   `json:"exemplar"`
	} `json:"targets"`
}

// dashboardQuery fills a panel's query as Grafana would, for an instant
// query over the whole run: every modality and phase, the default budget.
var dashboardVars = strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h",
	"$modality", ".*", "$phase", ".*", "$queue_budget", "2.5")

// sinceStart turns increase(x[$__range]) into x: the same formula over
// the counters since the processes started, which Prometheus holds
// whole (increase extrapolates, and misses a series' first sample).
var sinceStart = regexp.MustCompile(`increase\(([^\[]+)\[\$__range\]\)`)

// TestDashboardQueriesAnswerFromRealTraffic runs the multi-stage example
// through the shipped tier, keeping every trace, with a real Prometheus
// scraping the tier's OpenMetrics endpoint and its own metrics, and runs
// every query of deploy/grafana/otelomni-fleet.json as Grafana would:
// each returns series, and the share of requests where a phase was not
// measured equals what the traces in the backend show. Every trace being
// kept, every series of otelomni's histograms received measurements of kept
// requests, and each must carry an exemplar.
func TestDashboardQueriesAnswerFromRealTraffic(t *testing.T) {
	root, err := jaeger.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/grafana/otelomni-fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if len(dash.Panels) < 7 {
		t.Fatalf("the dashboard has %d panels", len(dash.Panels))
	}

	settings := fleet.DemoSettings()
	settings["OMNI_SAMPLE_PERCENT"] = "100"
	tier := startTier(t, settings)
	prom := startPrometheus(t, tier.Collector.Prometheus, tier.Collector.Telemetry)
	env, err := fleet.EngineEnv(settings)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tr := fleet.Traffic{Replicas: 1, Requests: 24, Concurrency: 6, Mix: "normal=3,slow=1,saturated=1,failing=1",
		Slow: fleet.DemoSlow, QueueWait: fleet.DemoQueueWait, Service: "e2e-dashboard", Env: env}
	from := time.Now().Add(-time.Second)
	reqs, err := fleet.RunReplicas(ctx, bin["omni"], tier.Collector.OTLPEndpoint(), t.TempDir(), tr)
	if err != nil {
		t.Fatal(err)
	}
	tally, err := tier.Collector.WaitDecided(ctx, len(reqs), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if tally.Kept != len(reqs) {
		t.Fatalf("the tier kept %d of %d traces, want all", tally.Kept, len(reqs))
	}
	rep, err := fleet.WaitStored(ctx, tier.Backend.Client(), from, time.Now().Add(time.Minute), reqs, len(reqs), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// What the traces show: per phase, how many of its spans.
	spansOf := map[string]int{}
	for _, o := range rep.Outcomes {
		ss, err := tier.Backend.Client().Trace(ctx, o.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			if p := s.Str("omni.phase"); p != "" {
				spansOf[p]++
			}
		}
	}
	if err := until(ctx, 2*time.Minute, func() bool {
		s, err := prom.Query(ctx, `sum(gen_ai_server_request_duration_seconds_count)`)
		if err != nil || len(s) != 1 || int(s[0].Value) != len(reqs) {
			return false
		}
		s, err = prom.Query(ctx, `sum({__name__=~"otelcol_processor_tail_sampling_count_traces_sampled(_total)?"})`)
		return err == nil && len(s) == 1 && int(s[0].Value) > 0
	}); err != nil {
		t.Fatalf("Prometheus never held the run's counts: %v", err)
	}

	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := dashboardVars.Replace(tg.Expr)
			got, err := prom.Query(ctx, q)
			if err != nil {
				t.Errorf("%s: %v", p.Title, err)
				continue
			}
			if len(got) == 0 {
				t.Errorf("%s: %s returns no series", p.Title, q)
			}
			if !strings.Contains(tg.Expr, "$__range") {
				continue
			}
			whole, err := prom.Query(ctx, dashboardVars.Replace(sinceStart.ReplaceAllString(tg.Expr, "$1")))
			if err != nil {
				t.Fatalf("%s over the whole run: %v", p.Title, err)
			}
			if len(whole) == 0 {
				t.Errorf("%s over the whole run returns no series", p.Title)
			}
			for _, s := range whole {
				phase := s.Labels["omni_phase"]
				want := math.Max(0, 1-float64(spansOf[phase])/float64(len(reqs)))
				if math.Abs(s.Value-want) > 1e-9 {
					t.Errorf("%s: %s not measured in %.4f of the requests; the traces show %.4f (%d spans, %d requests)",
						p.Title, phase, s.Value, want, spansOf[phase], len(reqs))
				}
			}
			t.Logf("%s: %d phases, each share equal to the traces'", p.Title, len(whole))
		}
	}

	// Every trace is kept here, so every series of otelomni's histograms
	// received measurements of kept requests: each carries an exemplar.
	exs, err := prom.QueryExemplars(ctx, histogramsWithExemplars, from, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	withExemplar := map[string]bool{}
	for _, e := range exs {
		withExemplar[seriesKey(e.Series, "_bucket")] = true
	}
	series, err := prom.Query(ctx, `{__name__=~"(omni_phase_duration|omni_stage_duration|gen_ai_server_request_duration|gen_ai_server_time_to_first_token)_seconds_count"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) == 0 {
		t.Fatal("no series of otelomni's histograms")
	}
	for _, s := range series {
		if k := seriesKey(s.Labels, "_count"); !withExemplar[k] {
			t.Errorf("series %s received %v measurements of kept requests and carries no exemplar", k, s.Value)
		}
	}
	t.Logf("%d series of otelomni's histograms, each with an exemplar", len(series))
}

// seriesKey names a histogram series by its metric and labels, less the
// bucket bound and the suffix of its sample.
func seriesKey(labels map[string]string, suffix string) string {
	var kv []string
	for k, v := range labels {
		switch k {
		case "le":
		case "__name__":
			kv = append(kv, k+"="+strings.TrimSuffix(v, suffix))
		default:
			kv = append(kv, k+"="+v)
		}
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
