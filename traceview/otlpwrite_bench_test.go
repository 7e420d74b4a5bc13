package traceview

import (
	"encoding/hex"
	"io"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// benchSpans are 2 048 spans like an import's: a few attributes each.
func benchSpans() []Span {
	ss := make([]Span, 2048)
	for i := range ss {
		ss[i] = Span{TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "eee19b7ec3c1b174", ParentID: "eee19b7ec3c1b175",
			Name: "omni.diffusion.exec", Start: at(float64(i)), End: at(float64(i) + 5),
			Attrs: map[string]attribute.Value{"omni.phase": attribute.StringValue("exec"),
				"gen_ai.request.model": attribute.StringValue("Qwen/Qwen-Image"), "omni.timing.reconstructed": attribute.BoolValue(true)}}
	}
	return ss
}

// BenchmarkWriteOTLPJSON is the writer this package uses.
func BenchmarkWriteOTLPJSON(b *testing.B) {
	ss := benchSpans()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := WriteOTLPJSON(io.Discard, ss); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProtojsonOTLP is the same document through protojson, which
// writes ids in base64 besides: the cost this package's writer avoids.
func BenchmarkProtojsonOTLP(b *testing.B) {
	var spans []*tracepb.Span
	for _, s := range benchSpans() {
		tid, _ := hex.DecodeString(s.TraceID)
		sid, _ := hex.DecodeString(s.SpanID)
		pid, _ := hex.DecodeString(s.ParentID)
		var kvs []*commonpb.KeyValue
		for k, v := range s.Attrs {
			av := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
			kvs = append(kvs, &commonpb.KeyValue{Key: k, Value: av})
		}
		spans = append(spans, &tracepb.Span{TraceId: tid, SpanId: sid, ParentSpanId: pid, Name: s.Name,
			StartTimeUnixNano: uint64(s.Start.UnixNano()), EndTimeUnixNano: uint64(s.End.UnixNano()), Attributes: kvs})
	}
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}}}}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := protojson.Marshal(req); err != nil {
			b.Fatal(err)
		}
	}
}
