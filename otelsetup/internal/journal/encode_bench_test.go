// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// cycleAttrs are the request attributes of a cycle of 4 096 distinct
// requests of otelomni's diffusion request: a server span with thirteen
// attributes, its own id, steps and size among them.
var cycleAttrs = func() [][]attribute.KeyValue {
	steps := []int{20, 28, 30, 40, 50}
	sizes := []int{512, 768, 1024, 1328}
	out := make([][]attribute.KeyValue, 4096)
	for i := range out {
		out[i] = []attribute.KeyValue{
			attribute.String("omni.request.id", fmt.Sprintf("chatcmpl-%016x", uint64(i)*0x9e3779b97f4a7c15)),
			attribute.String("gen_ai.operation.name", "generate_content"),
			attribute.String("gen_ai.request.model", "Qwen/Qwen-Image"),
			attribute.String("omni.output.modality", "image"),
			attribute.String("gen_ai.output.type", "image"),
			attribute.Int("omni.diffusion.num_inference_steps", steps[i%len(steps)]),
			attribute.Float64("omni.diffusion.guidance_scale", 4),
			attribute.Int("omni.diffusion.height", sizes[i%len(sizes)]),
			attribute.Int("omni.diffusion.width", sizes[i/len(sizes)%len(sizes)]),
			attribute.Int("omni.stage.id", 0),
			attribute.String("omni.stage.type", "diffusion"),
			attribute.String("omni.stage.name", "dit"),
			attribute.String("omni.replica.id", "dit-0"),
		}
	}
	return out
}()

var cyclePhases = func() [][]attribute.KeyValue {
	var out [][]attribute.KeyValue
	for _, p := range []string{"preprocess", "exec", "queue_wait", "output_ready_wait", "postprocess"} {
		out = append(out, []attribute.KeyValue{attribute.String("omni.phase", p), attribute.String("gen_ai.request.model", "Qwen/Qwen-Image")})
	}
	return out
}()

// cycleRequest makes request i of the cycle: its span and five phases.
func cycleRequest(tr trace.Tracer, i int) {
	ctx, req := tr.Start(context.Background(), "omni.request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(cycleAttrs[i%len(cycleAttrs)]...))
	for _, a := range cyclePhases {
		_, s := tr.Start(ctx, "omni.diffusion."+a[0].Value.AsString(), trace.WithAttributes(a...))
		s.End()
	}
	req.End()
}

// timed is a span processor that keeps the time each call of its inner
// one takes, and an exporter that keeps the time each batch's export
// takes a span.
type timed struct {
	p              sdktrace.SpanProcessor
	exp            sdktrace.SpanExporter
	starts, ends   *[]time.Duration
	exportsPerSpan *[]time.Duration
}

func (t timed) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	t0 := time.Now()
	t.p.OnStart(ctx, s)
	*t.starts = append(*t.starts, time.Since(t0))
}

func (t timed) OnEnd(s sdktrace.ReadOnlySpan) {
	t0 := time.Now()
	t.p.OnEnd(s)
	*t.ends = append(*t.ends, time.Since(t0))
}

func (t timed) Shutdown(ctx context.Context) error   { return t.p.Shutdown(ctx) }
func (t timed) ForceFlush(ctx context.Context) error { return t.p.ForceFlush(ctx) }

func (t timed) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	t0 := time.Now()
	err := t.exp.ExportSpans(ctx, ss)
	if len(ss) > 0 {
		*t.exportsPerSpan = append(*t.exportsPerSpan, time.Since(t0)/time.Duration(len(ss)))
	}
	return err
}

// medianNs is the median of d in nanoseconds: on a busy machine a call
// the scheduler preempts takes milliseconds, which a mean would count.
func medianNs(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return float64(d[len(d)/2].Nanoseconds())
}

// readAll is a processor that reads each span through the accessors the
// journal's processor reads it through, and writes nothing.
type readAll struct{}

var readSink int

func (readAll) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	n := int(s.SpanContext().TraceFlags()) + int(s.Parent().SpanID()[0]) + int(s.SpanKind()) + len(s.Name()) +
		s.StartTime().Nanosecond() + len(s.Attributes()) + len(s.Links()) + s.DroppedAttributes() + s.DroppedLinks() +
		len(s.InstrumentationScope().Name)
	if s.Resource() != nil {
		n++
	}
	readSink += n
}

func (readAll) OnEnd(s sdktrace.ReadOnlySpan) {
	readSink += int(s.SpanContext().TraceFlags()) + len(s.Name()) + s.EndTime().Nanosecond() + len(s.Attributes()) +
		len(s.Links()) + len(s.Events()) + int(s.Status().Code) + s.DroppedAttributes() + s.DroppedEvents() +
		s.DroppedLinks() + s.ChildSpanCount()
}

func (readAll) Shutdown(context.Context) error   { return nil }
func (readAll) ForceFlush(context.Context) error { return nil }

// BenchmarkProcessor measures the time a processor takes for a span on
// an SDK provider with a batcher (blocking, over an exporter that
// discards), on the cycle of 4 096 distinct requests of six spans: only
// the processor's own calls are timed (the median of each kind, as a
// preempted call takes a scheduler's slice), the spans being made,
// batched and exported around them as on the live path.
//
//   - read: a processor that only reads each span through the accessors
//     the journal reads it through;
//   - journal: the journal's processor, and its confirmation of each
//     exported batch (on the batcher's goroutine), in a journal gone once
//     round its ring.
//
// The difference is the journal's own work: its encoding, its tables,
// its locks. The clock readings cost the same in both.
func BenchmarkProcessor(b *testing.B) {
	for _, v := range []string{"read", "journal"} {
		b.Run(v, func(b *testing.B) {
			var starts, ends, exports []time.Duration
			t := timed{p: readAll{}, exp: discardExporter{}, starts: &starts, ends: &ends, exportsPerSpan: &exports}
			if v == "journal" {
				j := openT(b, benchDir(b))
				defer j.Close()
				t.p, t.exp = j.SpanProcessor(), j.WrapExporter(t.exp)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(t), sdktrace.WithBatcher(t, sdktrace.WithBlocking()))
			tr := tp.Tracer("github.com/otelomni/otelomni", trace.WithInstrumentationVersion("0.1.0"))
			for i := range warmup {
				cycleRequest(tr, i)
			}
			_ = tp.ForceFlush(context.Background())
			starts, ends, exports = starts[:0], ends[:0], exports[:0]
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				cycleRequest(tr, i)
				i++
			}
			_ = tp.ForceFlush(context.Background())
			b.StopTimer()
			b.ReportMetric(medianNs(starts), "start-ns")
			b.ReportMetric(medianNs(ends), "end-ns")
			b.ReportMetric(medianNs(exports), "export-ns/span")
			_ = tp.Shutdown(context.Background())
		})
	}
}
