// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
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

var benchInfo = otelomni.RequestInfo{ID: "chatcmpl-ac59cea85b422f04", Model: "Qwen/Qwen-Image"}

// benchRequest is otelomni's BenchmarkRequest/otelomni request: its span
// and five diffusion phases, started and ended around the engine's calls.
func benchRequest(in *otelomni.Instrumenter) {
	_, req := in.Start(context.Background(), benchInfo)
	p := req.StartPhase(context.Background(), spans.Preprocess)
	p.End(nil)
	exec := req.StartPhase(context.Background(), spans.Exec)
	q := req.StartPhase(context.Background(), spans.QueueWait)
	q.End(nil)
	exec.End(nil)
	w := req.StartPhase(context.Background(), spans.OutputReadyWait)
	w.End(nil)
	post := req.StartPhase(context.Background(), spans.Postprocess)
	post.End(nil)
	req.End(nil)
}

// benchTelemetry is Setup with an exporter that discards and a batch
// processor that waits rather than drops (every span of every iteration
// is processed), with the crash journal in dir, or without one.
func benchTelemetry(b *testing.B, dir string) (*otelsetup.Telemetry, *otelomni.Instrumenter) {
	opts := []otelsetup.Option{otelsetup.WithSpanExporter(nilExporter{}), otelsetup.WithoutGlobal(),
		otelsetup.WithFallbackExporter(nil), otelsetup.WithBatchOptions(sdktrace.WithBlocking())}
	if dir != "" {
		opts = append(opts, otelsetup.WithJournal(dir))
	}
	tel, err := otelsetup.Setup(context.Background(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel, otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
}

// BenchmarkJournalRequest measures otelomni's sampled live path, a request
// of six spans on the provider otelsetup builds, without and with the
// crash journal, side by side: one request on each in turn, the order
// alternating, so that the load of a shared machine falls on both alike.
// It reports each one's time a request and their ratio. The journal is
// on a disk directory (JOURNAL_BENCH_DIR, say /dev/shm/..., to choose),
// its default size, gone once round its ring first, as a running
// engine's has: its pages are in memory.
func BenchmarkJournalRequest(b *testing.B) {
	clearBenchEnv(b)
	dir := b.TempDir()
	if d := os.Getenv("JOURNAL_BENCH_DIR"); d != "" {
		dir = d
	}
	plainTel, plain := benchTelemetry(b, "")
	journalTel, journalled := benchTelemetry(b, dir)
	ins := [2]*otelomni.Instrumenter{plain, journalled}
	// About 12 records of 150 bytes a request: once round the ring.
	for range journal.DefaultSize / (12 * 150) {
		benchRequest(journalled)
	}
	for range 1000 {
		benchRequest(plain)
	}
	_ = plainTel.ForceFlush(context.Background())
	_ = journalTel.ForceFlush(context.Background())
	b.ReportAllocs()
	// The request goroutine keeps its thread, so that the thread's CPU
	// time is the requests' own: time spent waiting for a core on a busy
	// machine is not counted, time in the kernel (a page fault) is.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	var spent, cpu [2]time.Duration
	var wallRatios, cpuRatios []float64
	for i := 0; b.Loop(); i++ {
		// A block of requests on each provider in turn, the order
		// alternating, so that neither always follows the other's garbage;
		// each pair of blocks gives a ratio.
		var blockWall, blockCPU [2]time.Duration
		for k := range 2 {
			w := (i + k) % 2
			t0, c0 := time.Now(), threadCPU()
			for range benchBlock {
				benchRequest(ins[w])
			}
			blockCPU[w] = threadCPU() - c0
			blockWall[w] = time.Since(t0)
			spent[w] += blockWall[w]
			cpu[w] += blockCPU[w]
		}
		wallRatios = append(wallRatios, float64(blockWall[1])/float64(blockWall[0]))
		if blockCPU[0] > 0 {
			cpuRatios = append(cpuRatios, float64(blockCPU[1])/float64(blockCPU[0]))
		}
	}
	b.StopTimer()
	n := float64(b.N) * benchBlock
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "nojournal-ns/req")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "journal-ns/req")
	b.ReportMetric(float64(cpu[0].Nanoseconds())/n, "nojournal-cpu-ns/req")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/n, "journal-cpu-ns/req")
	b.ReportMetric(median(wallRatios), "median-ratio")
	b.ReportMetric(median(cpuRatios), "median-cpu-ratio")
}

// benchBlock is how many requests run on one provider before the other's
// turn: enough that reading the clocks costs nothing next to them.
const benchBlock = 32

// processCPU is the CPU time of the process, every thread's (user and
// system), to the microsecond.
func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the CPU time of the calling thread (user and system), to
// the nanosecond.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// clearBenchEnv unsets the variables that would change what Setup builds.
func clearBenchEnv(b *testing.B) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "OTELOMNI_JOURNAL_") {
			b.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// readOnly is a span processor that reads a span through the SDK's
// accessors the journal's processor reads it through, at its start and at
// its end, and writes nothing: the part of the journal's cost that is
// the SDK's.
type readOnly struct{}

var readSink int

func (readOnly) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	n := int(s.SpanContext().TraceFlags()) + int(s.Parent().SpanID()[0]) + int(s.SpanKind()) + len(s.Name()) +
		s.StartTime().Nanosecond() + len(s.Attributes()) + len(s.Links()) + s.DroppedAttributes() + s.DroppedLinks() +
		len(s.InstrumentationScope().Name)
	if s.Resource() != nil {
		n++
	}
	readSink += n
}

func (readOnly) OnEnd(s sdktrace.ReadOnlySpan) {
	readSink += int(s.SpanContext().TraceFlags()) + len(s.Name()) + s.EndTime().Nanosecond() + len(s.Attributes()) +
		len(s.Links()) + len(s.Events()) + int(s.Status().Code) + s.DroppedAttributes() + s.DroppedEvents() +
		s.DroppedLinks() + s.ChildSpanCount()
}

func (readOnly) Shutdown(context.Context) error   { return nil }
func (readOnly) ForceFlush(context.Context) error { return nil }

// BenchmarkJournalReadFloor measures, as BenchmarkJournalRequest does
// (paired blocks, thread CPU), otelomni's request on an SDK provider with
// a batcher over an exporter that discards, without and with a processor
// that only reads each span as the journal does: what the journal cannot
// save however it writes its records.
func BenchmarkJournalReadFloor(b *testing.B) {
	provider := func(ps ...sdktrace.SpanProcessor) *otelomni.Instrumenter {
		var opts []sdktrace.TracerProviderOption
		for _, p := range ps {
			opts = append(opts, sdktrace.WithSpanProcessor(p))
		}
		tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithBatcher(nilExporter{}, sdktrace.WithBlocking()))...)
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return otelomni.New(otelomni.WithTracerProvider(tp))
	}
	ins := [2]*otelomni.Instrumenter{provider(), provider(readOnly{})}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpuRatios []float64
	for i := 0; b.Loop(); i++ {
		var blockCPU [2]time.Duration
		for k := range 2 {
			w := (i + k) % 2
			c0 := threadCPU()
			for range benchBlock {
				benchRequest(ins[w])
			}
			blockCPU[w] = threadCPU() - c0
		}
		if blockCPU[0] > 0 {
			cpuRatios = append(cpuRatios, float64(blockCPU[1])/float64(blockCPU[0]))
		}
	}
	b.ReportMetric(median(cpuRatios), "median-cpu-ratio")
}

// journalCycle is how many distinct requests BenchmarkJournal cycles
// through, as otelomni's BenchmarkRequest does: no request repeats soon
// enough for a cache to keep it.
const journalCycle = 4096

// journalGuidance are the guidance scales of the cycle's requests.
var journalGuidance = [...]float64{2.5, 4, 5, 7.5}

// journalRequests are the requests of the cycle, those of otelomni's
// BenchmarkRequest: each its own id, steps, size and guidance scale, for
// one model, modality and stage.
var journalRequests = func() []otelomni.RequestInfo {
	steps := [...]int{20, 28, 30, 40, 50}
	sizes := [...][2]int{{1024, 1024}, {1328, 1328}, {768, 1344}, {512, 512}}
	out := make([]otelomni.RequestInfo, journalCycle)
	for i := range out {
		size := sizes[i%len(sizes)]
		out[i] = otelomni.RequestInfo{
			ID: fmt.Sprintf("chatcmpl-%016x", splitmix64(uint64(i))), Model: benchInfo.Model, Modality: attrs.ModalityImage,
			NumInferenceSteps: steps[i%len(steps)], GuidanceScale: &journalGuidance[i/len(steps)%len(journalGuidance)],
			Height: size[0], Width: size[1],
			Stage: otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion, ReplicaID: "dit-0"},
		}
	}
	return out
}()

// splitmix64 is a bijection of the uint64s that scatters their bits: the
// cycle's ids are distinct.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// cycleRequest is otelomni's BenchmarkRequest/otelomni request: its span
// and five diffusion phases.
func cycleRequest(in *otelomni.Instrumenter, info *otelomni.RequestInfo) {
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

// BenchmarkJournal measures otelomni's sampled live path on the cycle's
// requests, one variant a sub-benchmark, so that a tool running every
// sub-benchmark once a round (testbed/cmd/benchratio) pairs them by round
// as it pairs BenchmarkRequest's:
//
//   - nojournal, journal: the provider otelsetup builds, without and with
//     the crash journal (in JOURNAL_BENCH_DIR, else a temporary
//     directory; its default size, gone once round its ring first, as a
//     running engine's has);
//   - sdk, sdk+read: an SDK provider with a batcher, without and with a
//     processor that only reads each span as the journal does: what the
//     journal cannot save however it writes its records.
//
// Each reports its process's CPU time per request beside the time
// (cpu-ns/op): the journal's writes, the batch processor's and the
// garbage collector's work, whichever thread does it, and no time spent
// waiting for a core.
func BenchmarkJournal(b *testing.B) {
	run := func(b *testing.B, in *otelomni.Instrumenter) {
		b.ReportAllocs()
		c0 := processCPU()
		i := 0
		for b.Loop() {
			cycleRequest(in, &journalRequests[i])
			i = (i + 1) % len(journalRequests)
		}
		b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
	}
	b.Run("nojournal", func(b *testing.B) {
		clearBenchEnv(b)
		_, in := benchTelemetry(b, "")
		run(b, in)
	})
	b.Run("journal", func(b *testing.B) {
		clearBenchEnv(b)
		dir := b.TempDir()
		if d := os.Getenv("JOURNAL_BENCH_DIR"); d != "" {
			dir = d
		}
		tel, in := benchTelemetry(b, dir)
		// About 12 records of 150 bytes a request: once round the ring.
		for i := range journal.DefaultSize / (12 * 150) {
			cycleRequest(in, &journalRequests[i%len(journalRequests)])
		}
		_ = tel.ForceFlush(context.Background())
		run(b, in)
	})
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
