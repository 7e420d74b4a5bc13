// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/testbed/internal/fleet"
	"github.com/otelomni/otelomni/testbed/internal/procstat"
)

// throughput offers synthetic requests at rate per second for duration to
// the collector with the shipped settings (only its addresses changed),
// then accounts for every trace and span: what the producer lost, what the
// collector refused, evicted, kept and dropped, what reached the backend;
// and the CPU and peak memory of the collector and the backend.
//
// Each request is an LLM-stage request of 5 spans lasting a second; every
// 50th fails, every 100th waits 3 s in its queue (over the shipped 2 s
// budget), every 100th lasts 20 s (over the shipped audio threshold).
func throughput(out io.Writer, rate float64, duration time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tier, _, undo, err := setUp(ctx, nil)
	if err != nil {
		return err
	}
	defer undo()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			os.Unsetenv(k)
		}
	}
	os.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+tier.Collector.OTLPGRPC)
	os.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	os.Setenv("OTEL_SERVICE_NAME", "omni-throughput")
	// A queue deep enough for a second of spans at the highest rate
	// measured, so that the producer is not what drops.
	os.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "131072")
	os.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2048")
	p, err := fleet.NewProducer(ctx, 1, false)
	if err != nil {
		return err
	}
	cpu0 := [3]float64{cpuSeconds(tier.Collector.Pid()), cpuSeconds(tier.Backend.Pid()), cpuSeconds(os.Getpid())}
	fmt.Fprintf(out, "offering %.0f requests/s (5 spans each) for %v to the collector: the shipped settings and any OMNI_* variable set here\n", rate, duration)

	began := time.Now()
	sent := 0
	tick := time.NewTicker(10 * time.Millisecond)
	for now := range tick.C {
		if now.Sub(began) >= duration || ctx.Err() != nil {
			break
		}
		// Open loop: arrivals follow the clock, not the producer's pace.
		for due := int(now.Sub(began).Seconds() * rate); sent < due; sent++ {
			if _, err := p.Send(request(sent)); err != nil {
				return err
			}
		}
	}
	tick.Stop()
	sendTime := time.Since(began)
	shutdownErr := p.Shutdown(ctx)
	st := p.Stats()

	// The collector decides a trace OMNI_DECISION_WAIT after its request
	// span, which each synthetic request sends with its other spans.
	tally, err := tier.Collector.WaitDecided(ctx, sent, 3*time.Minute)
	if err != nil {
		return err
	}
	// The kept spans reach the backend through a batch and a queue: read
	// again until the count of spans sent on stops moving (a report, not
	// a test: this bound only ends the wait).
	for range 40 {
		time.Sleep(500 * time.Millisecond)
		last, err := tier.Collector.Tally(ctx)
		if err != nil {
			return err
		}
		moved := last.SpansOut+last.SpansFailed != tally.SpansOut+tally.SpansFailed
		tally = last
		if !moved {
			break
		}
	}
	elapsed := time.Since(began)
	cpu := [3]float64{cpuSeconds(tier.Collector.Pid()) - cpu0[0], cpuSeconds(tier.Backend.Pid()) - cpu0[1], cpuSeconds(os.Getpid()) - cpu0[2]}

	fmt.Fprintf(out, "sent %d requests in %.1fs (%.0f/s), %d spans (%.0f/s); the producer lost %d spans (failed %d, dropped %d)\n",
		sent, sendTime.Seconds(), float64(sent)/sendTime.Seconds(), st.Ended, float64(st.Ended)/sendTime.Seconds(), st.Lost(), st.Failed, st.Pending)
	fmt.Fprintf(out, "collector: accepted %d spans, refused %d; %d traces, kept %d, dropped %d, evicted before their decision %d; late spans kept %d, dropped %d\n",
		tally.SpansIn, tally.SpansRefused, tally.NewTraces, tally.Kept, tally.Dropped, tally.TooEarly, tally.LateKept, tally.LateDropped)
	fmt.Fprintf(out, "per policy: %v\n", tally.Matched)
	fmt.Fprintf(out, "to the backend: %d spans sent, %d failed\n", tally.SpansOut, tally.SpansFailed)
	fmt.Fprintf(out, "CPU over %.0fs: collector %.1fs, backend %.1fs, producer %.1fs; peak memory: collector %s, backend %s\n",
		elapsed.Seconds(), cpu[0], cpu[1], cpu[2],
		procstat.Status(tier.Collector.Pid(), "VmHWM:"), procstat.Status(tier.Backend.Pid(), "VmHWM:"))
	if st.Lost() > 0 || tally.SpansRefused > 0 || tally.TooEarly > 0 || tally.SpansFailed > 0 {
		return errors.Join(shutdownErr, errors.New("spans or traces were lost at this rate"))
	}
	return nil
}

// request is the i-th synthetic request of the throughput run.
func request(i int) fleet.Synthetic {
	r := fleet.Synthetic{Modality: attrs.ModalityAudio, Duration: time.Second, Queue: 10 * time.Millisecond}
	switch {
	case i%50 == 49:
		r.Err = otelomni.ErrStageError
	case i%100 == 33:
		r.Queue = 3 * time.Second
		r.Duration = 4 * time.Second
	case i%100 == 66:
		r.Duration = 20 * time.Second
	}
	return r
}

// cpuSeconds is a process's user and system CPU time so far, in seconds
// (Linux counts it in ticks of 1/100 s).
func cpuSeconds(pid int) float64 {
	ticks, _ := procstat.CPU(pid)
	return ticks / 100
}
