package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// bothExporters returns the SDK's OTLP exporter on sdk and protoExporter
// on ours, for the same resource.
func bothExporters(tb testing.TB, sdk, ours otlptrace.Client, res *resource.Resource) (sdktrace.SpanExporter, sdktrace.SpanExporter) {
	tb.Helper()
	ctx := context.Background()
	sdkExp, err := otlptrace.New(ctx, sdk)
	if err != nil {
		tb.Fatal(err)
	}
	ourExp, err := newProtoExporter(ctx, ours, res)
	if err != nil {
		tb.Fatal(err)
	}
	return sdkExp, ourExp
}

// sameRequest fails unless request i of two clients is the same bytes.
func sameRequest(t *testing.T, sdk, ours *marshalClient, i int) {
	t.Helper()
	if len(sdk.bodies) <= i || len(ours.bodies) <= i {
		t.Fatalf("%d and %d requests, want %d", len(sdk.bodies), len(ours.bodies), i+1)
	}
	if !bytes.Equal(sdk.bodies[i], ours.bodies[i]) {
		t.Errorf("request %d differs from the SDK exporter's:\nsdk:  %s\nours: %s", i,
			prototext.Format(sdk.request(t, i)), prototext.Format(ours.request(t, i)))
	}
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
			AttributeValueLengthLimit: -1, AttributeCountLimit: 18,
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
		attribute.Float64Slice("ds", []float64{0.5, math.NaN(), math.Inf(-1), math.Copysign(0, -1)}),
		attribute.BoolSlice("bs", []bool{true, false}), attribute.ByteSlice("by", []byte{0, 0xff}),
		attribute.ByteSlice("by0", nil), {Key: "nothing"}, // an EMPTY value
		attribute.Slice("sl", attribute.StringValue("a"), attribute.SliceValue(), attribute.MapValue(), attribute.IntValue(-1)),
		attribute.Map("m", attribute.String("k", ""), attribute.Map("inner", attribute.Bool("b", false)), attribute.KeyValue{}),
		{Key: "", Value: attribute.StringValue("an empty key")},
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
// request protoExporter sends is byte for byte the one the SDK's OTLP
// exporter sends.
func TestProtoExporterWritesWhatTheSDKExporterWrites(t *testing.T) {
	ctx := context.Background()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "omnitrace"), attribute.Int("n", 3))
	ss := variedSpans(t, res)
	if len(ss) != 6 {
		t.Fatalf("%d spans", len(ss))
	}

	var sdkClient, ourClient marshalClient
	sdkExp, ours := bothExporters(t, &sdkClient, &ourClient, res)
	for _, exp := range []sdktrace.SpanExporter{sdkExp, ours} {
		if err := exp.ExportSpans(ctx, ss); err != nil {
			t.Fatal(err)
		}
		if err := exp.ExportSpans(ctx, ss[:1]); err != nil { // the buffer is reused
			t.Fatal(err)
		}
	}
	for i := range 2 {
		sameRequest(t, &sdkClient, &ourClient, i)
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
	if root == nil || len(root.Attributes) != 18 || root.DroppedAttributesCount != 2 || len(root.Events) != 2 ||
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
	if err := e.ExportSpans(ctx, []sdktrace.ReadOnlySpan{nil, nil}); err != nil || len(c.bodies) != 1 {
		t.Errorf("a batch of nil spans: %v, %d uploads (the SDK's exporter makes none)", err, len(c.bodies))
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

// stuckClient is a client whose uploads wait until it is stopped, as an
// upload to a collector that never answers waits for its timeout.
type stuckClient struct {
	uploading chan struct{}
	stop      chan struct{}
}

func (c *stuckClient) Start(context.Context) error { return nil }
func (c *stuckClient) Stop(context.Context) error  { close(c.stop); return nil }
func (c *stuckClient) UploadTraces(ctx context.Context, _ []*tracepb.ResourceSpans) error {
	close(c.uploading)
	<-c.stop
	return errors.New("stopped")
}

// TestProtoExporterShutdownCutsAnExportShort: Shutdown does not wait for
// an export in flight; it stops the client, which ends the export. (Were
// Shutdown to wait, this test would never end.)
func TestProtoExporterShutdownCutsAnExportShort(t *testing.T) {
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	c := &stuckClient{uploading: make(chan struct{}), stop: make(chan struct{})}
	e, err := newProtoExporter(ctx, c, res)
	if err != nil {
		t.Fatal(err)
	}
	exported := make(chan error)
	go func() { exported <- e.ExportSpans(ctx, variedSpans(t, res)) }()
	<-c.uploading
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-exported; err == nil {
		t.Error("the export cut short by Shutdown reported no error")
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

// TestCredentialsInTheEndpointAreRefusedUnprinted: the OTLP exporters send
// to an endpoint's host and path only, so credentials in its URL would be
// silently dropped; the import refuses them before reading, and never
// prints the password.
func TestCredentialsInTheEndpointAreRefusedUnprinted(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret@127.0.0.1:1")
	code, _, stderr := runCmd(t, goodLine+"\n", "import")
	if code == 0 {
		t.Fatalf("exit 0 with credentials in the endpoint: %s", stderr)
	}
	if strings.Contains(stderr, "s3cret") || !strings.Contains(stderr, "OTEL_EXPORTER_OTLP_ENDPOINT") || !strings.Contains(stderr, "credentials") {
		t.Errorf("the password printed, or the variable or the reason not named: %s", stderr)
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
	if !strings.Contains(stderr, srv.URL) {
		t.Errorf("the endpoint not named: %s", stderr)
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

// importLikeSpans makes n spans shaped as an import's: per request, the
// request span with ten attributes and five phase spans with three.
func importLikeSpans(b *testing.B, res *resource.Resource, n int) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	tr := tp.Tracer("github.com/otelomni/otelomni", trace.WithInstrumentationVersion("0.1.0"), trace.WithSchemaURL("https://opentelemetry.io/schemas/1.41.0"))
	start := time.Unix(1796000000, 125)
	for i := 0; len(rec.Ended()) < n; i++ {
		ctx, req := tr.Start(context.Background(), "omni.request", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("omni.request.id", fmt.Sprintf("chatcmpl-%016x", i)),
				attribute.String("gen_ai.operation.name", "generate_content"), attribute.String("gen_ai.request.model", "Qwen/Qwen-Image"),
				attribute.String("omni.output.modality", "image"), attribute.String("gen_ai.output.type", "image"),
				attribute.Int("omni.diffusion.num_inference_steps", 50), attribute.Int("omni.stage.id", 0),
				attribute.String("omni.stage.type", "diffusion"), attribute.String("omni.stage.name", "dit"),
				attribute.String("omni.import.source", "jsonl")))
		for _, p := range []string{"queue_wait", "preprocess", "exec", "forward", "postprocess"} {
			_, s := tr.Start(ctx, "omni.diffusion."+p, trace.WithTimestamp(start), trace.WithAttributes(
				attribute.String("omni.phase", p), attribute.String("gen_ai.request.model", "Qwen/Qwen-Image"),
				attribute.Bool("omni.timing.reconstructed", true)))
			s.End(trace.WithTimestamp(start.Add(time.Second)))
		}
		req.End(trace.WithTimestamp(start.Add(2 * time.Second)))
	}
	return rec.Ended()[:n]
}

// BenchmarkExportEncoding encodes one batch of 2 048 spans shaped as an
// import's to the bytes of an OTLP request: the SDK's OTLP exporter
// against protoExporter, both on the same client.
func BenchmarkExportEncoding(b *testing.B) {
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	batch := importLikeSpans(b, res, importBatchSize)
	sdkExp, ours := bothExporters(b, &discardClient{}, &discardClient{}, res)
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
// text encode to the bytes the SDK's exporter sends; where a string is not
// valid UTF-8, both refuse the batch and send nothing.
func FuzzProtoExporter(f *testing.F) {
	f.Add("omni.request", "gen_ai.request.model", "Qwen/Qwen-Image", int64(50), 2.5, true, "done")
	f.Add("", "", "", int64(-1), math.Copysign(0, -1), false, "")
	f.Add("\u00e9\u4e16", "k\x00", "\u2028", int64(1)<<62, 1e300, true, "\t")
	f.Add("ok", "key", "bad \xff byte", int64(7), math.NaN(), false, "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, name, key, val string, n int64, x float64, ok bool, msg string) {
		valid := true
		for _, s := range []string{name, key, val, msg} {
			valid = valid && utf8.ValidString(s)
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
		sdkExp, ours := bothExporters(t, &sdkClient, &ourClient, res)
		sdkErr, ourErr := sdkExp.ExportSpans(ctx, ss), ours.ExportSpans(ctx, ss)
		if !valid {
			if sdkErr == nil || !errors.Is(ourErr, errInvalidUTF8) || len(sdkClient.bodies)+len(ourClient.bodies) != 0 {
				t.Fatalf("invalid UTF-8: the SDK's exporter: %v, ours: %v, %d and %d requests sent", sdkErr, ourErr, len(sdkClient.bodies), len(ourClient.bodies))
			}
			return
		}
		if sdkErr != nil || ourErr != nil {
			t.Fatal(sdkErr, ourErr)
		}
		sameRequest(t, &sdkClient, &ourClient, 0)
	})
}
