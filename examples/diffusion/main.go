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
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/otelomni/otelomni/examples/diffusion/engine"
	"github.com/otelomni/otelomni/internal/traceview"
	"github.com/otelomni/otelomni/otelomni"
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
		quiet       = flag.Bool("quiet", false, "print the summary only, no waterfalls")
	)
	flag.Parse()
	log.SetFlags(0)
	if err := run(os.Stdout, *requests, *concurrency, *seed, *slots, *scale, *waterfall, *quiet, *manifest); err != nil {
		log.Fatal(err)
	}
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

func run(out io.Writer, requests, concurrency int, seed uint64, slots int, scale float64, waterfall, quiet bool, manifest string) error {
	ctx := context.Background()
	show := waterfall || embedded()

	var mu sync.Mutex
	summary := &traceview.Summary{}
	collector := &traceview.Collector{OnTrace: func(t []traceview.Span) {
		summary.Add(t)
		if !quiet {
			mu.Lock()
			traceview.Waterfall(out, t)
			mu.Unlock()
		}
	}}
	opts := []otelomni.SetupOption{otelomni.WithServiceName("omni-diffusion-demo"), otelomni.WithFallbackExporter(nil)}
	if show {
		opts = append(opts, otelomni.WithSpanProcessor(collector))
	}
	tel, err := otelomni.Setup(ctx, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "otelomni diffusion demo: %d requests, concurrency %d, seed %d; exporting to %s\n\n",
		requests, concurrency, seed, tel.Exporter())

	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	eng := engine.New(engine.Config{Instrumenter: in, Slots: slots, TimeScale: scale})

	var mf *json.Encoder
	if manifest != "" {
		f, err := os.Create(manifest)
		if err != nil {
			return err
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

	if err := tel.Shutdown(ctx); err != nil {
		fmt.Fprintf(out, "shutdown: %v\n", err)
	}
	fmt.Fprintf(out, "served %d requests (%d ended with an error, as their scenarios ask) in %.1fs\n", requests, failed, elapsed.Seconds())
	if show {
		fmt.Fprintln(out, "\nsummary per phase (measured: requests that measured it / all; a phase not measured is not a 0):")
		summary.Write(out)
	}
	st := in.Stats()
	fmt.Fprintf(out, "\nrejected measurements: %d, API misuse: %d\n", st.RejectedIntervals, st.Misuse)
	return nil
}

// requestID makes ids shaped like the reference system's: opaque strings,
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
