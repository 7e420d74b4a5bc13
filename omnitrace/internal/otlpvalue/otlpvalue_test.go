// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otlpvalue

import (
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTruncateCutsAsTheSDKDoes: values are cut to characters, not bytes.
func TestTruncateCutsAsTheSDKDoes(t *testing.T) {
	for _, c := range []struct {
		limit  int
		in, ok string
	}{{-1, "日本語", "日本語"}, {0, "abc", ""}, {2, "日本語", "日本"}, {3, "日本語", "日本語"}, {5, "ab", "ab"}} {
		if got := truncate(c.limit, c.in); got != c.ok {
			t.Errorf("truncate(%d, %q) = %q, want %q", c.limit, c.in, got, c.ok)
		}
	}
}

// TestSetWritesEveryType: each attribute type becomes its OTLP value,
// strings of a slice cut like a string.
func TestSetWritesEveryType(t *testing.T) {
	m := pcommon.NewMap()
	PutAll(m, []attribute.KeyValue{attribute.Bool("b", true), attribute.Int64("i", -3), attribute.Float64("f", 1.5),
		attribute.String("s", "abc"), attribute.BoolSlice("bs", []bool{true}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Float64Slice("fs", []float64{0.5}), attribute.StringSlice("ss", []string{"x", "y"})})
	want := map[string]string{"b": "true", "i": "-3", "f": "1.5", "s": "abc", "bs": "[true]", "is": "[1,2]", "fs": "[0.5]", "ss": `["x","y"]`}
	for k, w := range want {
		v, ok := m.Get(k)
		if !ok || v.AsString() != w {
			t.Errorf("%s = %q, want %q", k, v.AsString(), w)
		}
	}
	v := pcommon.NewValueEmpty()
	Set(v, attribute.StringSliceValue([]string{"日本語"}), 2)
	if got := v.Slice().At(0).Str(); got != "日本" {
		t.Errorf("a slice's string cut to %q", got)
	}
}

// captureClient keeps the requests of the SDK's OTLP exporter.
type captureClient struct{ rss []*tracepb.ResourceSpans }

func (c *captureClient) Start(context.Context) error { return nil }
func (c *captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	c.rss = append(c.rss, rss...)
	return nil
}

// sdkAttributes returns kvs as the SDK's OTLP exporter sends them on a
// span, read back as Collector data.
func sdkAttributes(t *testing.T, kvs []attribute.KeyValue) pcommon.Map {
	t.Helper()
	c := &captureClient{}
	exp, err := otlptrace.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, s := tp.Tracer("t").Start(context.Background(), "s", trace.WithAttributes(kvs...))
	s.End()
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: c.rss})
	if err != nil {
		t.Fatal(err)
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		t.Fatal(err)
	}
	return req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
}

// TestSetWritesWhatTheOTLPExporterSends checks every attribute type, one
// by one, nested ones among them, against the SDK's OTLP exporter.
func TestSetWritesWhatTheOTLPExporterSends(t *testing.T) {
	kvs := []attribute.KeyValue{
		attribute.Bool("bool", true),
		attribute.Int64("int", math.MinInt64),
		attribute.Float64("float", -1.5e300),
		attribute.String("string", "héllo"),
		attribute.String("empty string", ""),
		attribute.BoolSlice("bools", []bool{true, false}),
		attribute.Int64Slice("ints", []int64{0, -1, math.MaxInt64}),
		attribute.Float64Slice("floats", []float64{0.25, math.Inf(1)}),
		attribute.StringSlice("strings", []string{"a", "", "ü"}),
		attribute.ByteSlice("bytes", []byte{0, 1, 0xff}),
		attribute.ByteSlice("no bytes", []byte{}),
		attribute.Slice("slice", attribute.IntValue(1), attribute.StringValue("two"), attribute.SliceValue(attribute.BoolValue(true)),
			attribute.ByteSliceValue([]byte("b")), attribute.MapValue(attribute.String("k", "v")), attribute.Value{}),
		attribute.Slice("no slice"),
		attribute.Map("map", attribute.String("k", "v"), attribute.Map("inner", attribute.Float64("f", 2), attribute.ByteSlice("raw", []byte{9})),
			attribute.Slice("list", attribute.Int64Value(3)), attribute.KeyValue{Key: "nothing"}),
		attribute.Map("no map"),
		{Key: "empty"},
	}
	sdk := sdkAttributes(t, kvs)
	ours := pcommon.NewMap()
	PutAll(ours, kvs)
	for _, kv := range kvs {
		k := string(kv.Key)
		want, ok := sdk.Get(k)
		got, _ := ours.Get(k)
		if !ok || got.Type() != want.Type() || !got.Equal(want) {
			t.Errorf("%s (%s): written as %v %s, the OTLP exporter sends %v %s", k, kv.Value.Type(), got.Type(), got.AsString(), want.Type(), want.AsString())
		}
	}
	if ours.Len() != sdk.Len() {
		t.Errorf("%d attributes written, the OTLP exporter sends %d", ours.Len(), sdk.Len())
	}
}
