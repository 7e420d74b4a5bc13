package main

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// marshalClient is an OTLP client that encodes each request as the OTLP
// clients do (proto.Marshal of an ExportTraceServiceRequest) and keeps
// the bytes.
type marshalClient struct {
	mu     sync.Mutex
	bodies [][]byte
	fail   error
}

func (c *marshalClient) Start(context.Context) error { return nil }
func (c *marshalClient) Stop(context.Context) error  { return nil }
func (c *marshalClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rss})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodies = append(c.bodies, b)
	return c.fail
}

func (c *marshalClient) request(t *testing.T, i int) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(c.bodies[i], &req); err != nil {
		t.Fatalf("request %d does not decode: %v", i, err)
	}
	return &req
}

// variedSpans makes spans with every attribute type, events, links,
// statuses, kinds, a remote parent, a trace state, dropped counts, and
// two scopes interleaved.
func variedSpans(t testing.TB, res *resource.Resource) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
			AttributeValueLengthLimit: -1, AttributeCountLimit: 12,
			EventCountLimit: 2, LinkCountLimit: 1,
			AttributePerEventCountLimit: 8, AttributePerLinkCountLimit: 8,
		}))
	a := tp.Tracer("omni", trace.WithInstrumentationVersion("1.2.3"), trace.WithSchemaURL("https://opentelemetry.io/schemas/1.41.0"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))
	b := tp.Tracer("")
	ts, err := trace.ParseTraceState("vendor=v1,other=o2")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	start := time.Unix(1796000000, 125)
	all := []attribute.KeyValue{
		attribute.String("s", "text"), attribute.String("empty", ""), attribute.Bool("t", true), attribute.Bool("f", false),
		attribute.Int64("i", -7), attribute.Int64("zero", 0), attribute.Float64("d", 2.5), attribute.Float64("dz", 0),
		attribute.StringSlice("ss", []string{"a", ""}), attribute.Int64Slice("is", []int64{1, -1}),
		attribute.Float64Slice("ds", []float64{0.5}), attribute.BoolSlice("bs", []bool{true, false}),
		// Over the count limit: dropped, and counted.
		attribute.String("x1", "1"), attribute.String("x2", "2"),
	}
	ctx, root := a.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "root",
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(all...),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.Int("l", 1)}},
			trace.Link{SpanContext: remote})) // over the link limit
	root.AddEvent("e1", trace.WithTimestamp(start.Add(time.Millisecond)), trace.WithAttributes(attribute.String("k", "v")))
	root.AddEvent("e2", trace.WithTimestamp(start.Add(2*time.Millisecond)))
	root.AddEvent("e3", trace.WithTimestamp(start.Add(3*time.Millisecond))) // over the event limit
	root.SetStatus(codes.Error, "it failed: ünïcode")
	_, c1 := b.Start(ctx, "in the empty scope", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient))
	c1.SetStatus(codes.Ok, "")
	c1.End(trace.WithTimestamp(start.Add(time.Second)))
	_, c2 := a.Start(ctx, "", trace.WithTimestamp(start)) // an empty name
	c2.End(trace.WithTimestamp(start))                    // a zero-length span
	for _, k := range []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindProducer, trace.SpanKindConsumer} {
		_, c := a.Start(ctx, "kind "+k.String(), trace.WithTimestamp(start), trace.WithSpanKind(k))
		c.End(trace.WithTimestamp(start.Add(time.Microsecond)))
	}
	root.End(trace.WithTimestamp(start.Add(2 * time.Second)))
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec.Ended()
}

// TestProtoExporterWritesWhatTheSDKExporterWrites: for the same spans, the
// request protoExporter sends decodes to exactly the message the SDK's
// OTLP exporter sends.
func TestProtoExporterWritesWhatTheSDKExporterWrites(t *testing.T) {
	ctx := context.Background()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "omnitrace"), attribute.Int("n", 3))
	ss := variedSpans(t, res)
	if len(ss) != 6 {
		t.Fatalf("%d spans", len(ss))
	}

	var sdkClient, ourClient marshalClient
	sdkExp, err := otlptrace.New(ctx, &sdkClient)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newProtoExporter(ctx, &ourClient, res)
	if err != nil {
		t.Fatal(err)
	}
	for _, exp := range []sdktrace.SpanExporter{sdkExp, ours} {
		if err := exp.ExportSpans(ctx, ss); err != nil {
			t.Fatal(err)
		}
		if err := exp.ExportSpans(ctx, ss[:1]); err != nil { // the buffer is reused
			t.Fatal(err)
		}
	}
	for i := range 2 {
		want, got := sdkClient.request(t, i), ourClient.request(t, i)
		if !proto.Equal(want, got) {
			t.Errorf("request %d differs from the SDK exporter's:\nsdk:  %s\nours: %s", i, prototext.Format(want), prototext.Format(got))
		}
	}
	// The spans really hold what the comparison is about.
	req := ourClient.request(t, 0)
	scopes := req.ResourceSpans[0].ScopeSpans
	if len(scopes) != 2 || scopes[0].Scope.GetName() == scopes[1].Scope.GetName() {
		t.Fatalf("scopes: %v", scopes)
	}
	var root *tracepb.Span
	for _, sc := range scopes {
		for _, s := range sc.Spans {
			if s.Name == "root" {
				root = s
			}
		}
	}
	if root == nil || len(root.Attributes) != 12 || root.DroppedAttributesCount != 2 || len(root.Events) != 2 ||
		root.DroppedEventsCount != 1 || len(root.Links) != 1 || root.DroppedLinksCount != 1 ||
		root.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || root.TraceState == "" || root.Flags&flagIsRemote == 0 {
		t.Errorf("root span: %v", root)
	}
}

// TestProtoExporterErrors: a failed upload is the export's error; after
// Shutdown an export fails and a second Shutdown does nothing.
func TestProtoExporterErrors(t *testing.T) {
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	ss := variedSpans(t, res)
	refused := errors.New("refused")
	c := &marshalClient{fail: refused}
	e, err := newProtoExporter(ctx, c, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(ctx, ss); !errors.Is(err, refused) {
		t.Errorf("export: %v, want the client's error", err)
	}
	if err := e.ExportSpans(ctx, nil); err != nil || len(c.bodies) != 1 {
		t.Errorf("an empty batch: %v, %d uploads", err, len(c.bodies))
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
	if err := e.ExportSpans(ctx, ss); !errors.Is(err, errExporterStopped) {
		t.Errorf("export after shutdown: %v", err)
	}
}

// TestOTLPClientFollowsTheEnvironment: the OTLP protocols autoexport
// knows get the fast exporter; anything else is left to autoexport.
func TestOTLPClientFollowsTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		exporter, protocol, tracesProtocol string
		want                               bool
	}{
		{"", "", "", true},
		{"otlp", "http/protobuf", "", true},
		{"", "grpc", "", true},
		{"", "http/protobuf", "grpc", true},
		{"", "grpc", "http/json", false},
		{"console", "", "", false},
		{"none", "", "", false},
		{"otlp,console", "", "", false},
		{" otlp", "", "", false},
	} {
		t.Setenv("OTEL_TRACES_EXPORTER", c.exporter)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.protocol)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", c.tracesProtocol)
		if _, ok := otlpClient(); ok != c.want {
			t.Errorf("%+v: fast exporter %v", c, ok)
		}
	}
}

// TestImportOverOTLPHTTP: an import to an OTLP/HTTP receiver sends
// protobuf requests that decode (strings checked for UTF-8, as receivers
// do) to every span, with the import's resource, hostile strings
// included.
func TestImportOverOTLPHTTP(t *testing.T) {
	clearEnv(t)
	var mu sync.Mutex
	var names []string
	var services []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not OTLP protobuf", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					services = append(services, kv.Value.GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "engine-a")
	// A request whose id holds invalid UTF-8 and a lone surrogate, and
	// whose model is 100 KB: OTLP strings must be valid UTF-8, so an
	// exporter that sent them as they are would have the whole batch
	// refused by the receiver.
	hostile := strings.Replace(goodLine, `"chatcmpl-ac59cea85b422f04"`, "\"bad-\xff\xfe-\\ud800-id\"", 1)
	hostile = strings.Replace(hostile, `"Qwen/Qwen-Image"`, `"`+strings.Repeat("m", 100<<10)+`"`, 1)
	code, _, stderr := runCmd(t, goodLine+"\n"+twoStages+"\n"+hostile+"\n", "import")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	requests := 0
	for _, n := range names {
		if n == "omni.request" {
			requests++
		}
	}
	if requests != 3 || len(names) < 9 {
		t.Errorf("spans received: %v", names)
	}
	if len(services) == 0 || strings.Join(services, ",") != strings.Repeat("engine-a,", len(services)-1)+"engine-a" {
		t.Errorf("service names: %v", services)
	}
}

// BenchmarkExportEncoding encodes one batch of 2 048 spans of an import
// to the bytes of an OTLP request: the SDK's OTLP exporter against
// protoExporter, both on the same client.
func BenchmarkExportEncoding(b *testing.B) {
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	one := variedSpans(b, res)
	batch := make([]sdktrace.ReadOnlySpan, 0, importBatchSize)
	for len(batch) < importBatchSize {
		batch = append(batch, one...)
	}
	batch = batch[:importBatchSize]
	sdkExp, err := otlptrace.New(ctx, &discardClient{})
	if err != nil {
		b.Fatal(err)
	}
	ours, err := newProtoExporter(ctx, &discardClient{}, res)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		exp  sdktrace.SpanExporter
	}{{"sdk", sdkExp}, {"omnitrace", ours}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.exp.ExportSpans(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/span")
		})
	}
}

// discardClient encodes each request, as a client does, and drops it.
type discardClient struct{ buf []byte }

func (c *discardClient) Start(context.Context) error { return nil }
func (c *discardClient) Stop(context.Context) error  { return nil }
func (c *discardClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	var err error
	c.buf, err = proto.MarshalOptions{}.MarshalAppend(c.buf[:0], &coltracepb.ExportTraceServiceRequest{ResourceSpans: rss})
	return err
}

// FuzzProtoExporter: spans with any names, attributes, event and status
// text encode to the message the SDK's exporter sends. Invalid UTF-8 is
// left out: the SDK's exporter refuses it, and the import repairs every
// string before any exporter sees it (otelsetup).
func FuzzProtoExporter(f *testing.F) {
	f.Add("omni.request", "gen_ai.request.model", "Qwen/Qwen-Image", int64(50), 2.5, true, "done")
	f.Add("", "", "", int64(-1), math.Copysign(0, -1), false, "")
	f.Add("\u00e9\u4e16", "k\x00", "\u2028", int64(1)<<62, 1e300, true, "\t")
	f.Fuzz(func(t *testing.T, name, key, val string, n int64, x float64, ok bool, msg string) {
		for _, s := range []string{name, key, val, msg} {
			if !utf8.ValidString(s) {
				t.Skip()
			}
		}
		if math.IsNaN(x) {
			t.Skip() // proto.Equal holds NaN unequal to itself
		}
		ctx := context.Background()
		res := resource.NewSchemaless(attribute.String("service.name", val))
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
		tr := tp.Tracer(name, trace.WithInstrumentationVersion(val))
		kvs := []attribute.KeyValue{
			attribute.String(key, val), attribute.Int64(key+"n", n), attribute.Float64(key+"x", x),
			attribute.Bool(key+"b", ok), attribute.StringSlice(key+"s", []string{val, name}),
			attribute.Int64Slice(key+"ns", []int64{n, -n}), attribute.Float64Slice(key+"xs", []float64{x}),
		}
		start := time.Unix(0, n&(1<<62-1))
		c, s := tr.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(kvs...))
		s.AddEvent(msg, trace.WithTimestamp(start), trace.WithAttributes(kvs...))
		code := codes.Unset
		if ok {
			code = codes.Error
		}
		s.SetStatus(code, msg)
		_, child := tr.Start(c, val, trace.WithTimestamp(start), trace.WithLinks(trace.Link{SpanContext: s.SpanContext(), Attributes: kvs}))
		child.End(trace.WithTimestamp(start))
		s.End(trace.WithTimestamp(start.Add(time.Duration(n & 0xffff))))
		ss := rec.Ended()

		var sdkClient, ourClient marshalClient
		sdkExp, err := otlptrace.New(ctx, &sdkClient)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := newProtoExporter(ctx, &ourClient, res)
		if err != nil {
			t.Fatal(err)
		}
		if err := sdkExp.ExportSpans(ctx, ss); err != nil {
			t.Fatal(err)
		}
		if err := ours.ExportSpans(ctx, ss); err != nil {
			t.Fatal(err)
		}
		if want, got := sdkClient.request(t, 0), ourClient.request(t, 0); !proto.Equal(want, got) {
			t.Errorf("differs from the SDK exporter's:\nsdk:  %s\nours: %s", prototext.Format(want), prototext.Format(got))
		}
	})
}
