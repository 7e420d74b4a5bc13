// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command fleet runs the collector tier of deploy/ on loopback: the backend
// Jaeger storing in Badger (a temporary folder), the tail-sampling
// collector, and replicas of the multi-stage example (each stage its own
// process) sending a mix of normal, slow, saturated and failing requests
// through it. It prints what was kept and dropped, per scenario and per
// policy, and where to look. `make fleet`; KEEP=1 leaves it running.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/testbed/internal/fleet"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

func main() {
	tr := fleet.Traffic{Service: "omni"}
	flag.IntVar(&tr.Replicas, "replicas", 2, "copies of the multi-stage example")
	flag.IntVar(&tr.Requests, "requests", 60, "requests per replica")
	flag.IntVar(&tr.Concurrency, "concurrency", 8, "requests in flight per replica")
	flag.StringVar(&tr.Mix, "mix", "normal=6,slow=1,saturated=1,failing=1", "the scenarios' cycle")
	flag.DurationVar(&tr.Slow, "slow", fleet.DemoSlow, "extra time of a slow request: above every slow threshold")
	flag.DurationVar(&tr.QueueWait, "queue-wait", fleet.DemoQueueWait, "queue wait of a saturated request: above the budget")
	percent := flag.String("percent", "10", "share of the other traces kept, percent")
	keep := flag.Bool("keep", false, "leave everything running until interrupted")
	rate := flag.Float64("rate", 0, "measure the tier's throughput instead: offer this many synthetic requests per second")
	duration := flag.Duration("duration", 30*time.Second, "with -rate: how long to offer them")
	flag.Parse()
	log.SetFlags(0)
	if *rate > 0 {
		if err := throughput(os.Stdout, *rate, *duration); err != nil {
			log.Fatal(err)
		}
		return
	}
	settings := fleet.DemoSettings()
	settings["OMNI_SAMPLE_PERCENT"] = *percent
	if err := run(os.Stdout, tr, settings, *keep); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer, tr fleet.Traffic, settings map[string]string, keep bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pol, err := fleet.ParsePolicies(settings)
	if err != nil {
		return err
	}
	tier, dir, undo, err := setUp(ctx, settings)
	if err != nil {
		return err
	}
	defer undo()
	promBin, err := fleet.PrometheusBinary()
	if err != nil {
		return err
	}
	prom, err := fleet.StartPrometheus(ctx, promBin, dir, tier.Collector.Prometheus, tier.Collector.Telemetry)
	if err != nil {
		return err
	}
	defer prom.Stop()
	// The engines keep their exemplars for the traces the tier keeps, by
	// the thresholds the collector reads.
	if tr.Env, err = fleet.EngineEnv(settings); err != nil {
		return err
	}
	example, err := fleet.BuildExample(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "otelomni fleet: backend Jaeger (Badger in %s), tail-sampling collector (deploy/collector.yaml)\n", dir)
	fmt.Fprintf(out, "  engines send to   %s (OTLP/HTTP), %s (OTLP/gRPC)\n", tier.Collector.OTLPEndpoint(), tier.Collector.OTLPGRPC)
	fmt.Fprintf(out, "  metrics           http://%s/metrics (engine histograms, span metrics)\n", tier.Collector.Prometheus)
	fmt.Fprintf(out, "  decisions         http://%s/metrics (the collector's own)\n", tier.Collector.Telemetry)
	fmt.Fprintf(out, "  Prometheus        http://%s/ (scrapes both each second; exemplar storage on)\n", prom.Addr)
	fmt.Fprintf(out, "  query API         http://%s/api/v3/ (this Jaeger build has no web UI; a released Jaeger binary serves it there)\n", tier.Backend.Query)
	fmt.Fprintf(out, "policies: error; slow image > %v, audio > %v, video > %v, other > %v; queue wait > %v; baseline %v%%; decided %s after the request span (at most %s after the first span)\n",
		pol.Slow["image"], pol.Slow["audio"], pol.Slow["video"], pol.Slow[""], pol.Queue, pol.Percent, settings["OMNI_DECISION_WAIT"], settings["OMNI_DECISION_WAIT_MAX"])

	from := time.Now().Add(-time.Second)
	began := time.Now()
	reqs, err := fleet.RunReplicas(ctx, example, tier.Collector.OTLPEndpoint(), dir, tr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "served %d requests in %.1fs: %d replicas, each a gateway and %d stage processes\n\n",
		len(reqs), time.Since(began).Seconds(), tr.Replicas, stageProcesses())

	// Failure deadlines only: what is reported is what was counted.
	tally, err := tier.Collector.WaitDecided(ctx, len(reqs), 2*time.Minute)
	if err != nil {
		return err
	}
	rep, err := fleet.WaitStored(ctx, tier.Backend.Client(), from, time.Now().Add(time.Minute), reqs, tally.Kept, time.Minute)
	if err != nil {
		return err
	}
	counts, err := tier.Collector.WaitCounts(ctx, "gen_ai.server.request.duration", len(reqs), rep.Kept(), time.Minute)
	if err != nil {
		return err
	}
	tally, err = tier.Collector.Tally(ctx)
	if err != nil {
		return err
	}
	printReport(out, rep, pol, tally, counts, tier.Backend.Query)
	exemplarLine, err := exemplars(ctx, prom, from, rep)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, exemplarLine)
	q := url.Values{
		"query.service_name":   {tr.Service},
		"query.start_time_min": {from.UTC().Format(time.RFC3339)},
		"query.start_time_max": {from.Add(time.Hour).UTC().Format(time.RFC3339)},
		"query.num_traces":     {strconv.Itoa(len(reqs))},
	}
	fmt.Fprintf(out, "every kept trace:\n  http://%s/api/v3/traces?%s\n", tier.Backend.Query, q.Encode())
	bad := missed(rep)
	if keep {
		fmt.Fprintf(out, "\nrunning (logs in %s); interrupt to stop\n", dir)
		<-ctx.Done()
	}
	if bad != "" {
		return errors.New(bad)
	}
	return nil
}

// requestBuckets is the request-duration histogram's buckets, as
// Prometheus names them.
var requestBuckets = fleet.PromSeconds("gen_ai.server.request.duration") + "_bucket"

// exemplars reads the exemplars Prometheus holds of otelomni's histograms
// and says how many name a trace the backend holds whole; the engines'
// last export reaches Prometheus within a few scrapes.
func exemplars(ctx context.Context, prom *fleet.Prometheus, from time.Time, rep fleet.Report) (string, error) {
	whole := map[string]bool{}
	for _, o := range rep.Outcomes {
		whole[o.TraceID] = o.Kept && len(o.Problems) == 0
	}
	const query = `{__name__=~"(omni_phase_duration|omni_stage_duration|gen_ai_server_request_duration|gen_ai_server_time_to_first_token)_seconds_bucket"}`
	var exs []fleet.Exemplar
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if exs, err = prom.QueryExemplars(ctx, query, from, time.Now().Add(time.Minute)); err != nil {
			return "", err
		}
		if len(exs) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	kept := 0
	example := ""
	// The example shown is a request's own exemplar when there is one.
	sort.SliceStable(exs, func(i, j int) bool {
		return exs[i].Series["__name__"] == requestBuckets && exs[j].Series["__name__"] != requestBuckets
	})
	for _, e := range exs {
		if whole[e.Labels["trace_id"]] {
			kept++
			if example == "" {
				example = fmt.Sprintf("%s %.3fs -> trace %s", e.Series["__name__"], e.Value, e.Labels["trace_id"])
				if p := e.Series["omni_phase"]; p != "" {
					example = fmt.Sprintf("%s{omni_phase=%q} %.3fs -> trace %s", e.Series["__name__"], p, e.Value, e.Labels["trace_id"])
				}
			}
		}
	}
	line := fmt.Sprintf("\nexemplars in Prometheus: %d of otelomni's histograms, %d naming a trace the backend holds whole", len(exs), kept)
	if example != "" {
		line += "\n  e.g. " + example
	}
	if kept != len(exs) {
		return "", fmt.Errorf("%s; %d lead nowhere", line, len(exs)-kept)
	}
	return line, nil
}

// setUp starts the tier with settings in a new temporary folder; undo
// stops it and removes the folder.
func setUp(ctx context.Context, settings map[string]string) (tier *fleet.Tier, dir string, undo func(), err error) {
	bin, err := jaeger.Binary()
	if err != nil {
		return nil, "", nil, err
	}
	if dir, err = fleet.TempDir(); err != nil {
		return nil, "", nil, err
	}
	if tier, err = fleet.StartTier(ctx, bin, dir, settings); err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	return tier, dir, func() { tier.Stop(); os.RemoveAll(dir) }, nil
}

func stageProcesses() int {
	n := 0
	for _, st := range pipeline.Pipelines {
		n += len(st)
	}
	return n
}

func printReport(out io.Writer, rep fleet.Report, pol fleet.Policies, t fleet.Tally, n fleet.Counts, query string) {
	type row struct{ requests, kept, complete int }
	rows := map[pipeline.Special]*row{}
	example := map[pipeline.Special]string{}
	for _, o := range rep.Outcomes {
		sc := o.Scenario()
		if rows[sc] == nil {
			rows[sc] = &row{}
		}
		r := rows[sc]
		r.requests++
		if o.Kept {
			r.kept++
			if len(o.Problems) == 0 {
				r.complete++
				if example[sc] == "" {
					example[sc] = o.TraceID
				}
			}
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\trequests\tkept\tdropped\tkept complete\t")
	for _, sc := range []pipeline.Special{pipeline.Normal, pipeline.Slow, pipeline.Saturated, pipeline.Failing} {
		if r := rows[sc]; r != nil {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t\n", sc, r.requests, r.kept, r.requests-r.kept, r.complete)
		}
	}
	_ = w.Flush()

	var policies []string
	for p := range t.Matched {
		policies = append(policies, p)
	}
	sort.Strings(policies)
	fmt.Fprintln(out, "\nper policy, as the collector counted (a trace can match several):")
	for _, p := range policies {
		fmt.Fprintf(out, "  %-11s kept %d, did not match %d\n", p, t.Matched[p], t.NewTraces-t.Matched[p])
	}
	baseline := 0
	for _, o := range rep.Outcomes {
		if o.Kept && pol.Rule(o) == "" {
			baseline++
		}
	}
	fmt.Fprintf(out, "  kept by the baseline share alone: %d\n", baseline)
	fmt.Fprintf(out, "\ncollector: %d traces, kept %d, dropped %d; spans in %d, sent to the backend %d, refused %d, failed to send %d; traces evicted before their decision %d; late spans kept %d, dropped %d\n",
		t.NewTraces, t.Kept, t.Dropped, t.SpansIn, t.SpansOut, t.SpansRefused, t.SpansFailed, t.TooEarly, t.LateKept, t.LateDropped)
	fmt.Fprintf(out, "backend: %d traces; %d not one whole request\n", rep.Traces, len(rep.Strays))
	fmt.Fprintf(out, "metrics: the engines' %s counts %d requests (all); span metrics count %d request spans (kept traces only)\n",
		"gen_ai.server.request.duration", n.Engine, n.Spans)
	fmt.Fprintln(out, "\na kept trace of each scenario:")
	for _, sc := range []pipeline.Special{pipeline.Normal, pipeline.Slow, pipeline.Saturated, pipeline.Failing} {
		if id := example[sc]; id != "" {
			fmt.Fprintf(out, "  %-10s http://%s/api/v3/traces/%s\n", sc, query, id)
		}
	}
}

// missed says what went wrong, or "": a failing, slow or saturated request
// that was not kept, a kept trace that is incomplete, a stray trace.
func missed(rep fleet.Report) string {
	for _, o := range rep.Outcomes {
		if o.Scenario() != pipeline.Normal && !o.Kept {
			return fmt.Sprintf("the %s request %s was not kept", o.Scenario(), o.ID)
		}
		if o.Kept && len(o.Problems) > 0 {
			return fmt.Sprintf("request %s: incomplete trace: %v", o.ID, o.Problems)
		}
	}
	if len(rep.Strays) > 0 {
		return "the backend holds a partial trace: " + rep.Strays[0]
	}
	return ""
}
