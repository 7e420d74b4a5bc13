// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// capture keeps every span it is given at its start and at its end.
type capture struct {
	started []sdktrace.ReadWriteSpan
	ended   []sdktrace.ReadOnlySpan
}

func (c *capture) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	c.started = append(c.started, s)
}
func (c *capture) OnEnd(s sdktrace.ReadOnlySpan)  { c.ended = append(c.ended, s) }
func (*capture) Shutdown(context.Context) error   { return nil }
func (*capture) ForceFlush(context.Context) error { return nil }

// replayCycle is how many distinct requests BenchmarkProcessor replays at
// most.
const replayCycle = 4096

// replayRequests makes n distinct requests of otelomni's diffusion
// request (a server span with its thirteen attributes, five phases with
// two each) and returns each request's spans as the SDK gave them to a
// processor at their starts and at their ends, in that order.
func replayRequests(n int) (starts [][]sdktrace.ReadWriteSpan, ends [][]sdktrace.ReadOnlySpan) {
	c := &capture{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(c))
	tr := tp.Tracer("github.com/otelomni/otelomni", trace.WithInstrumentationVersion("0.1.0"))
	phases := []string{"preprocess", "exec", "queue_wait", "output_ready_wait", "postprocess"}
	steps := []int{20, 28, 30, 40, 50}
	sizes := []int{512, 768, 1024, 1328}
	for i := range n {
		c.started, c.ended = nil, nil
		ctx, req := tr.Start(context.Background(), "omni.request", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
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
		))
		for _, p := range phases {
			_, s := tr.Start(ctx, "omni.diffusion."+p, trace.WithAttributes(
				attribute.String("omni.phase", p), attribute.String("gen_ai.request.model", "Qwen/Qwen-Image")))
			s.End()
		}
		req.End()
		starts, ends = append(starts, c.started), append(ends, c.ended)
	}
	return starts, ends
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

// BenchmarkProcessor measures the journal's own work for a request of six
// spans: their starts and ends given to a processor as the SDK gives them,
// each end then to a batcher (blocking, over an exporter that discards)
// whose exporter goroutine confirms them, on a cycle of 4 096 distinct
// requests. The spans are made once, beforehand, so the SDK's own work of
// making them is not measured (and they are not in the caches as a live
// span is: the accessors cost more here than on the live path):
//
//   - batcher: the batcher alone;
//   - read: a processor that only reads each span through the accessors
//     the journal reads it through, then the batcher;
//   - journal: the journal's processor, then the batcher over the
//     journal's exporter; the journal gone once round its ring.
func BenchmarkProcessor(b *testing.B) {
	for _, n := range []int{replayCycle} {
		starts, ends := replayRequests(n)
		for _, v := range []string{"batcher", "read", "journal"} {
			b.Run(fmt.Sprintf("%s/cycle=%d", v, n), func(b *testing.B) { benchmarkProcessor(b, v, starts, ends) })
		}
	}
}

func benchmarkProcessor(b *testing.B, variant string, starts [][]sdktrace.ReadWriteSpan, ends [][]sdktrace.ReadOnlySpan) {
	var p sdktrace.SpanProcessor
	var exp sdktrace.SpanExporter = discardExporter{}
	var j *Journal
	switch variant {
	case "read":
		p = readAll{}
	case "journal":
		j = openT(b, benchDir(b))
		defer j.Close()
		p, exp = j.SpanProcessor(), j.WrapExporter(exp)
	}
	bsp := sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithBlocking())
	ctx := context.Background()
	request := func(i int) {
		for _, s := range starts[i] {
			if p != nil {
				p.OnStart(ctx, s)
			}
			bsp.OnStart(ctx, s)
		}
		for _, s := range ends[i] {
			if p != nil {
				p.OnEnd(s)
			}
			bsp.OnEnd(s)
		}
	}
	n := len(starts)
	for i := range warmup {
		request(i % n)
	}
	_ = bsp.ForceFlush(ctx)
	b.ReportAllocs()
	i := 0
	cpu0 := cpuTime()
	for b.Loop() {
		request(i)
		i = (i + 1) % n
	}
	_ = bsp.ForceFlush(ctx)
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	_ = bsp.Shutdown(ctx)
	if j != nil {
		if st := j.Stats(); st.Dropped+st.Evicted+st.CutItems+st.CutStrings+st.NoScope > 0 {
			b.Fatalf("journal %+v", st)
		}
	}
}
