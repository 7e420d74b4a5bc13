// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command load drives the diffusion demo's engine at a set request rate,
// for a bounded time, through the real OTLP exporter into a real Jaeger on
// loopback (started here, from tools/bin/jaeger), and reports requests/s,
// spans/s, spans dropped and failed, and the peak memory of this process and
// of Jaeger, with Jaeger's share of the CPU.
//
//	go run ./testbed/cmd/load -rate 300 -duration 60s
//
// It exits with status 1 when any span was dropped or failed to export, so
// that a script can search for the highest rate sustained without loss.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelomni/otelomni/examples/diffusion/engine"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
	"github.com/otelomni/otelomni/testbed/internal/procstat"
)

func main() {
	rate := flag.Float64("rate", 200, "requests per second (open loop: arrivals do not wait for completions)")
	duration := flag.Duration("duration", 60*time.Second, "how long to send requests")
	scale := flag.Float64("scale", 0.02, "time scale of the simulated engine (1 is the demo's speed)")
	queue := flag.Int("queue", 0, "the batch processor's queue size (0: otelomni's default)")
	batch := flag.Int("batch", 0, "the batch processor's export batch size (0: otelomni's default)")
	protocol := flag.String("protocol", "grpc", "OTLP protocol: grpc or http/protobuf")
	flag.Parse()
	log.SetFlags(0)
	ok, err := run(*rate, *duration, *scale, *queue, *batch, *protocol)
	if err != nil {
		log.Fatal(err)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(rate float64, duration time.Duration, scale float64, queue, batch int, protocol string) (bool, error) {
	ctx := context.Background()
	bin, err := jaeger.Binary()
	if err != nil {
		return false, err
	}
	j, err := jaeger.Start(ctx, bin)
	if err != nil {
		return false, err
	}
	defer j.Stop()
	for k, v := range map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": j.OTLPEndpoint(protocol), "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
		"OTEL_SERVICE_NAME": "omni-load", "OTEL_METRICS_EXPORTER": "none", "OTEL_TRACES_SAMPLER": "always_on",
	} {
		os.Setenv(k, v)
	}
	// The batch processor as an engine's operator sets it.
	if queue > 0 {
		os.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", strconv.Itoa(queue))
	}
	if batch > 0 {
		os.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", strconv.Itoa(batch))
	}
	tel, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithShutdownTimeout(30*time.Second))
	if err != nil {
		return false, err
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(tel.MeterProvider()))
	eng := engine.New(engine.Config{Instrumenter: in, Slots: 100000, TimeScale: scale, BatchWindow: -1})

	fmt.Printf("load: %.0f requests/s for %v into Jaeger (pid %d) over OTLP %s; queue %s, batch %s; GOMAXPROCS %d\n",
		rate, duration, j.Pid(), protocol, orDefault(queue, 2048), orDefault(batch, 512),
		runtime.GOMAXPROCS(0))
	cpu0, _ := procstat.CPU(j.Pid())
	self0, _ := procstat.CPU(os.Getpid())
	start := time.Now()
	var sent, done atomic.Int64
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	next := start
	progress := start.Add(10 * time.Second)
	for i := 0; time.Since(start) < duration; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		s := engine.Scenarios[i%len(engine.Scenarios)]
		id := fmt.Sprintf("load-%08d", i)
		sent.Add(1)
		wg.Go(func() {
			_ = eng.Serve(ctx, id, s, uint64(i))
			done.Add(1)
		})
		if time.Now().After(progress) {
			st := tel.ExportStats()
			fmt.Printf("  %3.0fs: %d requests sent, %d done; spans ended %d, exported %d, failed %d, queued or dropped %d\n",
				time.Since(start).Seconds(), sent.Load(), done.Load(), st.Ended, st.Exported, st.Failed, st.Pending)
			progress = progress.Add(10 * time.Second)
		}
	}
	sendWindow := time.Since(start)
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, _ := procstat.CPU(j.Pid())
	self1, _ := procstat.CPU(os.Getpid())
	jaegerRSS := procstat.Status(j.Pid(), "VmHWM:")
	if err := tel.Shutdown(ctx); err != nil {
		fmt.Printf("shutdown: %v\n", err)
	}
	st := tel.ExportStats()
	clk := 100.0 // USER_HZ on Linux
	jaegerCPU := (cpu1 - cpu0) / clk / elapsed.Seconds()
	// The rate sustained is the arrivals' rate: requests sent over the time
	// they were sent in. The last ones finish a little later.
	achieved := float64(sent.Load()) / sendWindow.Seconds()
	fmt.Printf("\nrequests: %d sent in %.1fs = %.1f/s; all done %.1fs after the first\n", sent.Load(), sendWindow.Seconds(), achieved, elapsed.Seconds())
	fmt.Printf("spans:    %d ended = %.0f/s; exported %d, failed to export %d, dropped %d\n",
		st.Ended, float64(st.Ended)/elapsed.Seconds(), st.Exported, st.Failed, st.Pending)
	fmt.Printf("memory:   this process peak RSS %s; Jaeger peak RSS %s\n", procstat.Status(os.Getpid(), "VmHWM:"), jaegerRSS)
	selfCPU := (self1 - self0) / clk / elapsed.Seconds()
	fmt.Printf("cpu:      Jaeger used %.2f cores (%.0f%% of this %d-core machine); this process (engine simulation, SDK, exporter) %.2f cores\n",
		jaegerCPU, 100*jaegerCPU/float64(runtime.NumCPU()), runtime.NumCPU(), selfCPU)
	switch {
	case st.Lost() > 0:
		fmt.Printf("RESULT: LOSS at %.0f requests/s: %d spans did not reach Jaeger\n", rate, st.Lost())
		return false, nil
	case achieved < 0.98*rate:
		fmt.Printf("RESULT: NOT SUSTAINED: %.0f requests/s asked, %.0f achieved (the machine, not the exporter, is the limit); no loss\n", rate, achieved)
		return false, nil
	}
	fmt.Printf("RESULT: sustained %.0f requests/s with no loss\n", rate)
	return true, nil
}

func orDefault(v, def int) string {
	if v > 0 {
		return strconv.Itoa(v)
	}
	return strconv.Itoa(def) + " (default)"
}
