// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command diffusion runs a simulated diffusion server instrumented with
// otelomni: a stream of text-to-image, image-to-image and text-to-video
// requests at some concurrency, covering every branch of the phase model.
//
// With none of OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// and OTEL_TRACES_EXPORTER set, it needs no server: it prints each request's
// waterfall and a summary per phase. With one set, it exports over OTLP
// there (-waterfall still prints).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/examples/diffusion/engine"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

func main() {
	var (
		requests    = flag.Int("requests", 28, "requests to serve")
		concurrency = flag.Int("concurrency", 4, "requests in flight at once")
		seed        = flag.Uint64("seed", 1, "seed of the scenario mix and the simulated durations")
		slots       = flag.Int("slots", 2, "requests the scheduler runs at once")
		scale       = flag.Float64("scale", 1, "multiplies every simulated duration")
		waterfall   = flag.Bool("waterfall", false, "print waterfalls and the summary even when exporting")
		manifest    = flag.String("manifest", "", "write each request's id and scenario to this file (JSON lines)")
		quiet       = flag.Bool("quiet", false, "in the terminal view (no OTLP endpoint set, or -waterfall): print the summary only, no waterfalls")
		linger      = flag.Duration("linger", 0, "keep the process (and a Prometheus endpoint) up this long after the run")
		crash       = flag.Bool("crash", false, "run the engine as a child process with a crash journal, kill it mid-request, and show what the next start recovers")
		crashChild  = flag.Bool("crash-child", false, "the engine of -crash (internal)")
	)
	flag.Parse()
	log.SetFlags(0)
	cfg := config{requests: *requests, concurrency: *concurrency, seed: *seed, slots: *slots, scale: *scale,
		waterfall: *waterfall, quiet: *quiet, manifest: *manifest, linger: *linger, crashChild: *crashChild}
	if *crash {
		if err := crashDemo(os.Stdout, cfg); err != nil {
			log.Fatal(err)
		}
		return
	}
	if _, err := run(os.Stdout, cfg); err != nil {
		log.Fatal(err)
	}
}

type config struct {
	requests, concurrency, slots int
	seed                         uint64
	scale                        float64
	waterfall, quiet             bool
	manifest                     string
	linger                       time.Duration
	crashChild                   bool
}

// result is what a run measured, twice: the spans (per summary row) and the
// phase histogram's counts (per omni.phase), from the same measurements.
type result struct {
	spans   map[string]int
	metrics map[string]uint64
}

// embedded reports whether the environment names no exporter and no
// endpoint: then the demo needs no server.
func embedded() bool {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		if os.Getenv(k) != "" {
			return false
		}
	}
	return true
}

func run(out io.Writer, cfg config) (result, error) {
	requests, concurrency, seed := cfg.requests, cfg.concurrency, cfg.seed
	ctx := context.Background()
	show := cfg.waterfall || embedded()
	quiet := cfg.quiet

	// The terminal view is an exporter like any other: the fallback when
	// the environment names no OTLP endpoint, or a second destination
	// beside it with -waterfall.
	var viewOpts []traceview.ExporterOption
	if quiet {
		viewOpts = append(viewOpts, traceview.WithoutWaterfalls())
	}
	view := traceview.NewExporter(out, viewOpts...)
	// The demo reads its own instruments too, to show that the summary of
	// the spans and the histograms agree.
	reader := sdkmetric.NewManualReader()
	opts := []otelsetup.Option{otelsetup.WithServiceName("omni-diffusion-demo"), otelsetup.WithMetricReader(reader),
		// The engine's configuration, once, on every span and metric.
		otelsetup.WithResourceAttributes(attrs.EngineTensorParallelKey.Int(1), attrs.EngineDTypeKey.String("bfloat16"),
			attrs.EngineSchedulingModeKey.String("continuous"), attrs.EngineDeviceKindKey.String("cuda"), attrs.EngineDeviceCountKey.Int(1))}
	switch {
	case cfg.crashChild:
		// The engine of -crash exports to the terminal through the batch
		// processor, so that the crash journal (on only when spans are
		// exported) confirms what was shown.
		opts = append(opts, otelsetup.WithFallbackExporter(view))
	case show:
		// A simple processor shows each request as it completes.
		opts = append(opts, otelsetup.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(view)))
	}
	if embedded() && !cfg.crashChild {
		opts = append(opts, otelsetup.WithFallbackExporter(nil))
	}
	h, err := newHooks()
	if err != nil {
		return result{}, err
	}
	if h != nil {
		opts = append(opts, otelsetup.WithSpanProcessor(h))
	}
	tel, err := otelsetup.Setup(ctx, opts...)
	if err != nil {
		return result{}, err
	}
	summary := view.Summary()
	var mu sync.Mutex
	dest := tel.Exporter()
	if embedded() {
		dest = "this terminal (no OTLP endpoint set)"
	}
	fmt.Fprintf(out, "otelomni diffusion demo: %d requests, concurrency %d, seed %d; traces to %s; metrics to %s\n\n",
		requests, concurrency, seed, dest, tel.MetricsExporter())

	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(tel.MeterProvider()))
	// The engine logs warnings and errors to stderr with the trace and span
	// of the request they happened in; with OTEL_LOGS_EXPORTER set, every
	// record is exported over OTLP beside the traces too, through the
	// OpenTelemetry slog bridge and the logger provider Setup installed.
	logs := slog.NewMultiHandler(withTraceIDs{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})},
		otelslog.NewHandler("omni-diffusion-demo", otelslog.WithVersion(otelomni.Version)))
	eng := engine.New(engine.Config{Instrumenter: in, Slots: cfg.slots, TimeScale: cfg.scale, Logger: slog.New(logs)})
	eng.Start(ctx, engine.Models())

	var mf *json.Encoder
	if cfg.manifest != "" {
		f, err := os.Create(cfg.manifest)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		mf = json.NewEncoder(f)
	}

	// The mix: every scenario at least once, then a seeded random choice.
	rng := rand.New(rand.NewPCG(seed, 1))
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	var failed int
	for w := 0; w < max(concurrency, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				s := engine.Scenarios[i%len(engine.Scenarios)]
				if i >= len(engine.Scenarios) {
					s = engine.Scenarios[pick(seed, i)%uint64(len(engine.Scenarios))]
				}
				id := requestID(seed, i)
				if mf != nil {
					mu.Lock()
					_ = mf.Encode(map[string]string{"id": id, "scenario": s.Name})
					mu.Unlock()
				}
				if err := eng.Serve(ctx, id, s, seed*1000+uint64(i)); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < requests; i++ {
		jobs <- i
		// Arrivals are spread out a little, as from real clients.
		time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)

	res := result{spans: summary.Spans(), metrics: phaseCounts(ctx, reader)}
	fmt.Fprintf(out, "served %d requests (%d ended with an error, as their scenarios ask) in %.1fs\n", requests, failed, elapsed.Seconds())
	if cfg.linger > 0 {
		fmt.Fprintf(out, "lingering %v (metrics to %s)\n", cfg.linger, tel.MetricsExporter())
		time.Sleep(cfg.linger)
	}
	if err := tel.Shutdown(ctx); err != nil {
		fmt.Fprintf(out, "shutdown: %v\n(a trace-only backend such as Jaeger refuses metrics: set OTEL_METRICS_EXPORTER=none or prometheus)\n", err)
	}
	if show {
		fmt.Fprintln(out, "\nsummary per phase (measured: requests that measured it / all; a phase not measured is not a 0):")
		summary.Write(out)
		fmt.Fprintln(out, "\nthe same measurements as metrics (omni.phase.duration count per omni.phase, beside the spans above):")
		writeAgreement(out, res)
	}
	st := in.Stats()
	fmt.Fprintf(out, "\nrejected measurements: %d, API misuse: %d\n", st.RejectedIntervals, st.Misuse)
	return res, nil
}

// phaseCounts reads the phase histogram's count per omni.phase.
func phaseCounts(ctx context.Context, reader *sdkmetric.ManualReader) map[string]uint64 {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return nil
	}
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok || m.Name != "omni.phase.duration" {
				continue
			}
			for _, dp := range h.DataPoints {
				if v, ok := dp.Attributes.Value(attrs.PhaseKey); ok {
					out[v.AsString()] += dp.Count
				}
			}
		}
	}
	return out
}

// writeAgreement prints, per phase, the spans and the histogram count.
func writeAgreement(out io.Writer, r result) {
	fmt.Fprintf(out, "%-20s %8s %10s\n", "phase", "spans", "histogram")
	for p := spans.QueueWait; p <= spans.Postprocess; p++ { // the diffusion phases
		n, m := r.spans[p.String()], r.metrics[p.String()]
		if n == 0 && m == 0 && p == spans.DenoiseStep {
			continue
		}
		mark := ""
		if uint64(n) != m {
			mark = "  DISAGREE"
		}
		fmt.Fprintf(out, "%-20s %8d %10d%s\n", p.String(), n, m, mark)
	}
}

// requestID makes ids shaped like vLLM-Omni's: opaque strings,
// never numbers.
func requestID(seed uint64, i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("chatcmpl-%016x", pick(seed, i))
	}
	return fmt.Sprintf("%d_%08x-%04x", i%4, uint32(pick(seed, i)), uint16(pick(seed, i)>>32))
}

func pick(seed uint64, i int) uint64 {
	return rand.New(rand.NewPCG(seed, uint64(i)+7)).Uint64()
}
