// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

var (
	requestAttrs = []attribute.KeyValue{
		attribute.String("omni.request.id", "chatcmpl-ac59cea85b422f04"),
		attribute.String("gen_ai.request.model", "Qwen/Qwen-Image"),
		attribute.String("gen_ai.operation.name", "generate_content"),
		attribute.String("omni.output.modality", "image"),
		attribute.Int("omni.diffusion.num_inference_steps", 50),
		attribute.Float64("omni.diffusion.guidance_scale", 4),
		attribute.String("omni.stage.type", "diffusion"),
		attribute.String("omni.replica.id", "replica-0"),
	}
	phases = []string{"queue_wait", "preprocess", "exec", "forward", "vae_decode", "postprocess"}
)

// request makes the spans of one diffusion request as otelomni does: a
// server span with the request's attributes at its start, six phases
// with theirs, and attributes set on the request at its end.
func request(ctx context.Context, tr trace.Tracer, phaseAttrs [][]attribute.KeyValue) {
	ctx, req := tr.Start(ctx, "omni.request", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(requestAttrs...))
	for i := range phases {
		_, p := tr.Start(ctx, "omni.diffusion."+phases[i], trace.WithAttributes(phaseAttrs[i]...))
		p.End()
	}
	req.SetAttributes(attribute.Int("omni.diffusion.height", 1024), attribute.Int("omni.diffusion.width", 1024))
	req.End()
}

// warmup is how many requests take a default journal once round its ring
// (about 14 records of 130 bytes a request).
const warmup = DefaultSize / (14 * 130)

// BenchmarkRequest measures a sampled request (seven spans) on an SDK
// provider with a batcher over an exporter that discards, without and
// with the journal, side by side.
func BenchmarkRequest(b *testing.B) {
	phaseAttrs := make([][]attribute.KeyValue, len(phases))
	for i, p := range phases {
		phaseAttrs[i] = []attribute.KeyValue{attribute.String("omni.phase", p), attribute.String("gen_ai.request.model", "Qwen/Qwen-Image")}
	}
	run := func(b *testing.B, j *Journal) {
		var opts []sdktrace.TracerProviderOption
		var exp sdktrace.SpanExporter = discardExporter{}
		if j != nil {
			opts = append(opts, sdktrace.WithSpanProcessor(j.SpanProcessor()))
			exp = j.WrapExporter(exp)
		}
		tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithBatcher(exp))...)
		tr := tp.Tracer("github.com/otelomni/otelomni")
		ctx := context.Background()
		// A running engine's journal has gone round its ring: its pages
		// are in memory, and writing them costs no page fault.
		for range warmup {
			request(ctx, tr, phaseAttrs)
		}
		_ = tp.ForceFlush(ctx)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		for b.Loop() {
			request(ctx, tr, phaseAttrs)
		}
		_ = tp.ForceFlush(ctx) // the export of these requests is their cost too
		b.StopTimer()
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		_ = tp.Shutdown(ctx)
		if j != nil {
			if st := j.Stats(); st.Dropped+st.Evicted > 0 {
				b.Logf("journal %+v", st)
			}
			_ = j.Close()
		}
	}
	b.Run("nojournal", func(b *testing.B) { run(b, nil) })
	b.Run("journal", func(b *testing.B) { run(b, openT(b, benchDir(b))) })
}

// benchDir is where a benchmark's journal goes: JOURNAL_BENCH_DIR (say
// /dev/shm/...), else a temporary directory.
func benchDir(b *testing.B) string {
	if d := os.Getenv("JOURNAL_BENCH_DIR"); d != "" {
		return d
	}
	return b.TempDir()
}

// cpuTime is the CPU time the process has used, all its threads: on a
// shared machine it moves less than the wall clock with the load of
// others.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEncode compares the journal's encoding of an ended span with
// a protobuf encoding of the same span (the OTLP message, as an exporter
// builds it), which costs allocations for the message and its bytes.
func BenchmarkEncode(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, s := tp.Tracer("t").Start(context.Background(), "omni.request", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(requestAttrs...))
	s.AddEvent("first output")
	s.End()
	ro := rec.Ended()[0] // what OnEnd and the exporter are given
	b.Run("journal", func(b *testing.B) {
		buf := make([]byte, 1<<16)
		b.ReportAllocs()
		for b.Loop() {
			d := spanData{typ: recEnd, span: ctxOf(ro.SpanContext()), parent: ctxOf(ro.Parent()), kind: ro.SpanKind(), name: ro.Name(),
				start: ro.StartTime(), end: ro.EndTime(), attrs: ro.Attributes(), links: ro.Links(), events: ro.Events(), status: ro.Status()}
			p := planSpan(&d, DefaultValueLimit, len(buf))
			w := enc{b: buf[:p.size], value: DefaultValueLimit}
			w.span(&d, &p)
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(protoSpan(ro)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// protoSpan builds the OTLP message of a span, field by field, as the
// OTLP exporter's transform does.
func protoSpan(s sdktrace.ReadOnlySpan) *tracepb.Span {
	tid, sid, pid := s.SpanContext().TraceID(), s.SpanContext().SpanID(), s.Parent().SpanID()
	p := &tracepb.Span{
		TraceId:           tid[:],
		SpanId:            sid[:],
		TraceState:        s.SpanContext().TraceState().String(),
		Name:              s.Name(),
		Kind:              tracepb.Span_SpanKind(s.SpanKind()),
		StartTimeUnixNano: uint64(s.StartTime().UnixNano()),
		EndTimeUnixNano:   uint64(s.EndTime().UnixNano()),
		Status:            &tracepb.Status{Code: tracepb.Status_StatusCode(s.Status().Code), Message: s.Status().Description},
	}
	if s.Parent().IsValid() {
		p.ParentSpanId = pid[:]
	}
	for _, kv := range s.Attributes() {
		p.Attributes = append(p.Attributes, protoKV(kv))
	}
	for _, e := range s.Events() {
		pe := &tracepb.Span_Event{Name: e.Name, TimeUnixNano: uint64(e.Time.UnixNano())}
		for _, kv := range e.Attributes {
			pe.Attributes = append(pe.Attributes, protoKV(kv))
		}
		p.Events = append(p.Events, pe)
	}
	return p
}

func protoKV(kv attribute.KeyValue) *commonpb.KeyValue {
	v := &commonpb.AnyValue{}
	switch kv.Value.Type() {
	case attribute.BOOL:
		v.Value = &commonpb.AnyValue_BoolValue{BoolValue: kv.Value.AsBool()}
	case attribute.INT64:
		v.Value = &commonpb.AnyValue_IntValue{IntValue: kv.Value.AsInt64()}
	case attribute.FLOAT64:
		v.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: kv.Value.AsFloat64()}
	default:
		v.Value = &commonpb.AnyValue_StringValue{StringValue: kv.Value.String()}
	}
	return &commonpb.KeyValue{Key: string(kv.Key), Value: v}
}

// BenchmarkRequestInterleaved runs the requests of BenchmarkRequest on
// two providers, without and with the journal, one request on each in
// turn, and reports each one's time a request and their ratio: the load
// of a shared machine falls on both alike.
func BenchmarkRequestInterleaved(b *testing.B) {
	phaseAttrs := make([][]attribute.KeyValue, len(phases))
	for i, p := range phases {
		phaseAttrs[i] = []attribute.KeyValue{attribute.String("omni.phase", p), attribute.String("gen_ai.request.model", "Qwen/Qwen-Image")}
	}
	j := openT(b, benchDir(b))
	plain := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	journalled := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()), sdktrace.WithBatcher(j.WrapExporter(discardExporter{})))
	trs := [2]trace.Tracer{plain.Tracer("github.com/otelomni/otelomni"), journalled.Tracer("github.com/otelomni/otelomni")}
	ctx := context.Background()
	var spent [2]time.Duration
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so that neither always follows
		// the other's garbage.
		for k := range 2 {
			w := (i + k) % 2
			t0 := time.Now()
			request(ctx, trs[w], phaseAttrs)
			spent[w] += time.Since(t0)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "nojournal-ns/req")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "journal-ns/req")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio")
	_ = plain.Shutdown(ctx)
	_ = journalled.Shutdown(ctx)
	if st := j.Stats(); st.Dropped+st.Evicted > 0 {
		b.Logf("journal %+v", st)
	}
	_ = j.Close()
}
