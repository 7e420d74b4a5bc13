// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"fmt"
	"os"
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

// processCPU is the CPU time of the process, every thread's (user and
// system), to the microsecond.
func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
			ID: fmt.Sprintf("chatcmpl-%016x", splitmix64(uint64(i))), Model: "Qwen/Qwen-Image", Modality: attrs.ModalityImage,
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
//     running engine's has, the provider without it warmed the same way);
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
	// Both variants first make as many requests as take a journal once
	// round its ring (about 12 records of 150 bytes a request), so that
	// the journal's pages are in memory, as a running engine's are, and
	// both processes' heaps have seen the same work.
	warm := func(tel *otelsetup.Telemetry, in *otelomni.Instrumenter) {
		for i := range journal.DefaultSize / (12 * 150) {
			cycleRequest(in, &journalRequests[i%len(journalRequests)])
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
