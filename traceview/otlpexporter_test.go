package traceview

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestOTLPJSONExporterWritesWhatProtojsonReads: each batch is one line
// that protojson reads into an ExportTraceServiceRequest, with kind,
// events, links, status and every attribute type, and hex ids that
// ParseOTLPJSON turns back into the SDK's.
func TestOTLPJSONExporterWritesWhatProtojsonReads(t *testing.T) {
	var out bytes.Buffer
	exp := NewOTLPJSONExporter(&out)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer("test")
	_, parent := tr.Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer))
	link := trace.Link{SpanContext: parent.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "follows")}}
	ctx := trace.ContextWithSpan(context.Background(), parent)
	_, child := tr.Start(ctx, "child\x00\xff", trace.WithLinks(link), trace.WithAttributes(
		attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 0.5),
		attribute.String("s", "a\"b\n"), attribute.StringSlice("ss", []string{"x", "y"}), attribute.Int64Slice("is", []int64{1})))
	child.AddEvent("first_output", trace.WithAttributes(attribute.Int("index", 0)))
	child.SetStatus(codes.Error, "boom")
	child.End()
	parent.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per exported batch (2)", len(lines))
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := protojson.Unmarshal([]byte(lines[0]), &req); err != nil {
		t.Fatalf("protojson refuses the line: %v\n%s", err, lines[0])
	}
	s := req.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]
	if len(s.GetEvents()) != 1 || len(s.GetLinks()) != 1 || s.GetStatus().GetMessage() != "boom" || len(s.GetAttributes()) != 6 {
		t.Errorf("span %v", s)
	}
	ss, err := ParseOTLPJSON(&out)
	if err != nil || len(ss) != 2 {
		t.Fatalf("%d spans read back: %v", len(ss), err)
	}
	if ss[0].SpanID != child.SpanContext().SpanID().String() || ss[0].ParentID != parent.SpanContext().SpanID().String() ||
		ss[0].TraceID != parent.SpanContext().TraceID().String() || ss[0].Name != "child\x00\uFFFD" {
		t.Errorf("read back %+v", ss[0])
	}
}
