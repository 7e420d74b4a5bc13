// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/otelsetup/internal/journal"
	"github.com/otelomni/otelomni/spans"
)

// costCycle is how many distinct requests BenchmarkJournalCost cycles
// through: no request repeats soon enough for a cache to keep it.
const costCycle = 4096

var costGuidance = [...]float64{2.5, 4, 5, 7.5}

// costRequests are the requests of the cycle: each its own id, steps,
// size and guidance scale, for one model, modality and stage.
var costRequests = func() []otelomni.RequestInfo {
	steps := [...]int{20, 28, 30, 40, 50}
	sizes := [...][2]int{{1024, 1024}, {1328, 1328}, {768, 1344}, {512, 512}}
	out := make([]otelomni.RequestInfo, costCycle)
	for i := range out {
		size := sizes[i%len(sizes)]
		out[i] = otelomni.RequestInfo{
			ID: fmt.Sprintf("chatcmpl-%016x", costMix(uint64(i))), Model: benchInfo.Model, Modality: attrs.ModalityImage,
			NumInferenceSteps: steps[i%len(steps)], GuidanceScale: &costGuidance[i/len(steps)%len(costGuidance)],
			Height: size[0], Width: size[1],
			Stage: otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion, ReplicaID: "dit-0"},
		}
	}
	return out
}()

// costMix is a bijection of the uint64s (splitmix64's finalizer): the
// cycle's ids are distinct.
func costMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// costRequest is a request span and its five diffusion phases.
func costRequest(in *otelomni.Instrumenter, info *otelomni.RequestInfo) {
	ctx, req := in.Start(context.Background(), *info)
	p := req.StartPhase(ctx, spans.Preprocess)
	p.End(nil)
	exec := req.StartPhase(ctx, spans.Exec)
	q := req.StartPhase(ctx, spans.QueueWait)
	q.End(nil)
	exec.End(nil)
	w := req.StartPhase(ctx, spans.OutputReadyWait)
	w.End(nil)
	post := req.StartPhase(ctx, spans.Postprocess)
	post.End(nil)
	req.End(nil)
}

// BenchmarkJournalCost measures otelomni's sampled live path on the
// provider otelsetup builds, on a cycle of 4 096 distinct requests, without
// and with the crash journal (in JOURNAL_BENCH_DIR, else a temporary
// directory; its default size, gone once round its ring first, as a
// running engine's has, the provider without it warmed the same way),
// and an SDK provider without and with a processor
// that only reads each span through the accessors the journal reads it
// through (sdk, sdk+read), one variant a sub-benchmark: with -count N each
// of the N runs is a round that runs both once, to be paired by round.
func BenchmarkJournalCost(b *testing.B) {
	run := func(b *testing.B, in *otelomni.Instrumenter) {
		b.ReportAllocs()
		i := 0
		cpu0 := processCPU()
		for b.Loop() {
			costRequest(in, &costRequests[i])
			i = (i + 1) % len(costRequests)
		}
		// Every thread's CPU time, the batcher's and the collector's
		// included: a busy machine's waits for a core are not counted.
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	// Both variants first make as many requests as take a journal once
	// round its ring (about 12 records of 150 bytes a request), so that
	// the journal's pages are in memory, as a running engine's are, and
	// both processes' heaps have seen the same work.
	warm := func(tel *otelsetup.Telemetry, in *otelomni.Instrumenter) {
		for i := range journal.DefaultSize / (12 * 150) {
			costRequest(in, &costRequests[i%len(costRequests)])
		}
		_ = tel.ForceFlush(context.Background())
	}
	b.Run("nojournal", func(b *testing.B) {
		clearBenchEnv(b)
		tel, in := benchTelemetry(b, "")
		warm(tel, in)
		run(b, in)
	})
	b.Run("journal", func(b *testing.B) {
		clearBenchEnv(b)
		dir := b.TempDir()
		if d := os.Getenv("JOURNAL_BENCH_DIR"); d != "" {
			dir = d
		}
		tel, in := benchTelemetry(b, dir)
		warm(tel, in)
		run(b, in)
	})
	// An SDK provider with a batcher, without and with a processor that
	// only reads each span as the journal does: what the journal cannot
	// save however it writes its records.
	sdk := func(b *testing.B, ps ...sdktrace.SpanProcessor) *otelomni.Instrumenter {
		var opts []sdktrace.TracerProviderOption
		for _, p := range ps {
			opts = append(opts, sdktrace.WithSpanProcessor(p))
		}
		tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithBatcher(nilExporter{}, sdktrace.WithBlocking()))...)
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return otelomni.New(otelomni.WithTracerProvider(tp))
	}
	b.Run("sdk", func(b *testing.B) { run(b, sdk(b)) })
	b.Run("sdk+read", func(b *testing.B) { run(b, sdk(b, readOnly{})) })
}

// BenchmarkJournalCostInterleaved measures what BenchmarkJournalCost does
// within one process: blocks of 256 of the cycle's requests on the
// provider without and with the journal in turn, the order alternating,
// each block flushed to the exporter before it is timed as done, so that
// a neighbour's load falls on both alike. It reports the median of the
// blocks' paired ratios of the process's CPU time (every thread's: the
// exporter's confirmations included) and of wall time.
func BenchmarkJournalCostInterleaved(b *testing.B) {
	clearBenchEnv(b)
	dir := b.TempDir()
	if d := os.Getenv("JOURNAL_BENCH_DIR"); d != "" {
		dir = d
	}
	plainTel, plain := benchTelemetry(b, "")
	journalTel, journalled := benchTelemetry(b, dir)
	tels := [2]interface{ ForceFlush(context.Context) error }{plainTel, journalTel}
	ins := [2]*otelomni.Instrumenter{plain, journalled}
	for i := range journal.DefaultSize / (12 * 150) {
		costRequest(journalled, &costRequests[i%len(costRequests)])
	}
	for i := range 4096 {
		costRequest(plain, &costRequests[i])
	}
	_ = plainTel.ForceFlush(context.Background())
	_ = journalTel.ForceFlush(context.Background())
	const block = 256
	var cpuRatios, wallRatios []float64
	var spent, cpu [2]time.Duration
	next := 0
	for i := 0; b.Loop(); i++ {
		var blockWall, blockCPU [2]time.Duration
		for k := range 2 {
			w := (i + k) % 2
			t0, c0 := time.Now(), processCPUPrecise()
			for range block {
				costRequest(ins[w], &costRequests[next])
				next = (next + 1) % len(costRequests)
			}
			_ = tels[w].ForceFlush(context.Background())
			blockCPU[w], blockWall[w] = processCPUPrecise()-c0, time.Since(t0)
			spent[w] += blockWall[w]
			cpu[w] += blockCPU[w]
		}
		cpuRatios = append(cpuRatios, float64(blockCPU[1])/float64(blockCPU[0]))
		wallRatios = append(wallRatios, float64(blockWall[1])/float64(blockWall[0]))
	}
	b.StopTimer()
	n := float64(b.N) * block
	b.ReportMetric(float64(cpu[0].Nanoseconds())/n, "nojournal-cpu-ns/req")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/n, "journal-cpu-ns/req")
	b.ReportMetric(median(cpuRatios), "median-cpu-ratio")
	b.ReportMetric(median(wallRatios), "median-ratio")
}

// processCPUPrecise is the CPU time of the process, every thread's, to
// the nanosecond.
func processCPUPrecise() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}
