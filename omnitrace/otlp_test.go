// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

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
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
	"github.com/otelomni/otelomni/otelomni"
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

// request decodes request i as a receiver does: strings must be valid
// UTF-8.
func (c *marshalClient) request(t testing.TB, i int) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) <= i {
		t.Fatalf("%d requests, want %d", len(c.bodies), i+1)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(c.bodies[i], &req); err != nil {
		t.Fatalf("request %d does not decode: %v", i, err)
	}
	return &req
}

// testSettings are an import's batch settings, with its resource.
func testSettings(res *resource.Resource) pipeSettings {
	set := batchSettings()
	set.resource, set.resourceSchema = res.Attributes(), res.SchemaURL()
	return set
}

// importBatch makes the spans of the JSON-lines records as an import's
// worker does, in one batch of the import's resource and scope.
func importBatch(t testing.TB, res *resource.Resource, limits emit.Limits, lines ...string) ptrace.Traces {
	t.Helper()
	b := (&pipe{set: testSettings(res)}).newBatch()
	em := emit.NewEmitter(limits, nil)
	for _, l := range lines {
		r, err := forms.Parse([]byte(l))
		if err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if err := em.Emit(r, time.Unix(1796000000, 0), &b.spans); err != nil {
			t.Fatal(err)
		}
	}
	return b.td
}

// readOnlySpans returns the spans of td as the SDK holds them.
func readOnlySpans(td ptrace.Traces, res *resource.Resource) []sdktrace.ReadOnlySpan {
	var ss []sdktrace.ReadOnlySpan
	scope := instrumentation.Scope{Name: otelomni.ScopeName, Version: otelomni.Version, SchemaURL: semconv.SchemaURL}
	for _, s := range td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().All() {
		tid, sid := trace.TraceID(s.TraceID()), trace.SpanID(s.SpanID())
		st := tracetest.SpanStub{
			Name:                 s.Name(),
			SpanContext:          trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(s.Flags() & 0xff)}),
			SpanKind:             trace.SpanKind(s.Kind()),
			StartTime:            s.StartTimestamp().AsTime(),
			EndTime:              s.EndTimestamp().AsTime(),
			DroppedAttributes:    int(s.DroppedAttributesCount()),
			Resource:             res,
			InstrumentationScope: scope,
		}
		if p := s.ParentSpanID(); !p.IsEmpty() {
			st.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID(p), TraceFlags: trace.FlagsSampled})
		}
		for k, v := range s.Attributes().All() {
			st.Attributes = append(st.Attributes, attribute.KeyValue{Key: attribute.Key(k), Value: attrValue(v)})
		}
		ss = append(ss, st.Snapshot())
	}
	return ss
}

// sdkExport returns the request the SDK's OTLP exporter sends for the
// spans of td, as the SDK holds them.
func sdkExport(t testing.TB, td ptrace.Traces, res *resource.Resource) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	c := &marshalClient{}
	exp, err := otlptrace.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), readOnlySpans(td, res)); err != nil {
		t.Fatal(err)
	}
	return c.request(t, 0)
}

func attrValue(v pcommon.Value) attribute.Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return attribute.StringValue(v.Str())
	case pcommon.ValueTypeBool:
		return attribute.BoolValue(v.Bool())
	case pcommon.ValueTypeInt:
		return attribute.Int64Value(v.Int())
	case pcommon.ValueTypeDouble:
		return attribute.Float64Value(v.Double())
	case pcommon.ValueTypeSlice:
		var ss []string
		for _, x := range v.Slice().All() {
			ss = append(ss, x.Str())
		}
		return attribute.StringSliceValue(ss)
	}
	return attribute.Value{}
}

// sameRequests fails unless the two requests hold the same resource,
// scope and spans, span for span.
func sameRequests(t *testing.T, sdk, ours *coltracepb.ExportTraceServiceRequest) int {
	t.Helper()
	if len(sdk.ResourceSpans) != 1 || len(ours.ResourceSpans) != 1 {
		t.Fatalf("%d and %d resource spans", len(sdk.ResourceSpans), len(ours.ResourceSpans))
	}
	w, g := sdk.ResourceSpans[0], ours.ResourceSpans[0]
	if !proto.Equal(w.Resource, g.Resource) || w.SchemaUrl != g.SchemaUrl {
		t.Errorf("resource %v, the SDK's %v", g.Resource, w.Resource)
	}
	if len(w.ScopeSpans) != 1 || len(g.ScopeSpans) != 1 {
		t.Fatalf("%d and %d scopes", len(w.ScopeSpans), len(g.ScopeSpans))
	}
	ws, gs := w.ScopeSpans[0], g.ScopeSpans[0]
	if !proto.Equal(ws.Scope, gs.Scope) || ws.SchemaUrl != gs.SchemaUrl {
		t.Errorf("scope %v, the SDK's %v", gs.Scope, ws.Scope)
	}
	order := func(ss []*tracepb.Span) {
		sort.Slice(ss, func(i, j int) bool { return bytes.Compare(ss[i].SpanId, ss[j].SpanId) < 0 })
	}
	order(ws.Spans)
	order(gs.Spans)
	if len(ws.Spans) != len(gs.Spans) {
		t.Fatalf("%d spans, the SDK's exporter %d", len(gs.Spans), len(ws.Spans))
	}
	for i := range ws.Spans {
		if !proto.Equal(ws.Spans[i], gs.Spans[i]) {
			t.Errorf("span differs from the SDK exporter's:\nsdk:    %s\nimport: %s", prototext.Format(ws.Spans[i]), prototext.Format(gs.Spans[i]))
		}
	}
	return len(ws.Spans)
}

// TestOTLPSinkSendsWhatTheSDKExporterSends: for the same spans, the
// request the import's OTLP sink hands its client holds, span for span,
// what the SDK's OTLP exporter sends (omnirecord's
// TestTheImportMakesTheRecordPathsSpans holds the spans to the record
// path's); the request decodes as a receiver decodes it, strings checked
// for UTF-8, hostile strings included.
func TestOTLPSinkSendsWhatTheSDKExporterSends(t *testing.T) {
	ctx := context.Background()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "omnitrace"), attribute.String("n", "3"))
	hostile := strings.Replace(goodLine, `"chatcmpl-ac59cea85b422f04"`, "\"bad-\xff\xfe-\\ud800-id\"", 1)
	hostile = strings.Replace(hostile, `"Qwen/Qwen-Image"`, `"`+strings.Repeat("m", 100<<10)+`"`, 1)
	td := importBatch(t, res, spanLimits(), goodLine, twoStages, hostile)
	c := &marshalClient{}
	s, err := newOTLPSink(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.export(ctx, td); err != nil {
		t.Fatal(err)
	}
	if n := sameRequests(t, sdkExport(t, td, res), c.request(t, 0)); n < 12 {
		t.Errorf("%d spans compared", n)
	}
}

// TestOTLPSinkErrors: a failed upload is the export's error; after
// shutdown an export fails and a second shutdown does nothing.
func TestOTLPSinkErrors(t *testing.T) {
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	td := importBatch(t, res, spanLimits(), goodLine)
	refused := errors.New("refused")
	c := &marshalClient{fail: refused}
	s, err := newOTLPSink(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.export(ctx, td); !errors.Is(err, refused) {
		t.Errorf("export: %v, want the client's error", err)
	}
	if err := s.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.shutdown(ctx); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
	if err := s.export(ctx, td); !errors.Is(err, errExporterStopped) {
		t.Errorf("export after shutdown: %v", err)
	}
}

// stuckClient is a client whose uploads wait until it is stopped, as an
// upload to a collector that never answers waits for its timeout.
type stuckClient struct {
	uploading chan struct{}
	stop      chan struct{}
	once      sync.Once
}

func (c *stuckClient) Start(context.Context) error { return nil }
func (c *stuckClient) Stop(context.Context) error  { close(c.stop); return nil }
func (c *stuckClient) UploadTraces(ctx context.Context, _ []*tracepb.ResourceSpans) error {
	c.once.Do(func() { close(c.uploading) })
	<-c.stop
	return errors.New("stopped")
}

// TestShutdownCutsAStuckExportShort: the pipe's shutdown does not wait
// for an export in flight beyond its deadline: it stops the client, which
// ends the export, and counts what did not reach it. (Were it to wait,
// this test would never end.)
func TestShutdownCutsAStuckExportShort(t *testing.T) {
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	c := &stuckClient{uploading: make(chan struct{}), stop: make(chan struct{})}
	s, err := newOTLPSink(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	set := testSettings(res)
	set.batch = 1
	p := newPipe(set, s)
	b := p.newBatch()
	em := emit.NewEmitter(spanLimits(), nil)
	for _, l := range []string{goodLine, twoStages} {
		r, err := forms.Parse([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.emit(em, r, time.Unix(1796000000, 0)); err != nil {
			t.Fatal(err)
		}
	}
	<-c.uploading
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	l, _ := p.shutdown(sctx)
	if l.ended == 0 || l.lost() != l.ended || l.failed == 0 {
		t.Errorf("loss %+v: every span lost, the one in flight failed", l)
	}
}

// TestOTLPClientFollowsTheEnvironment: the protocol the environment
// names, in any case, the traces' own first, chooses the client; a
// protocol not valid is warned about and ignored, for http/protobuf.
func TestOTLPClientFollowsTheEnvironment(t *testing.T) {
	const httpClient, grpcClient = "*otlptracehttp.client", "*otlptracegrpc.client"
	for _, c := range []struct {
		protocol, tracesProtocol string
		want                     string
		warned                   []string
	}{
		{"", "", httpClient, nil},
		{"http/protobuf", "", httpClient, nil},
		{"grpc", "", grpcClient, nil},
		{"GRPC", "", grpcClient, nil},
		{"http/protobuf", "grpc", grpcClient, nil},
		{"grpc", "http/protobuf", httpClient, nil},
		{"grpc", "http/json", grpcClient, []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}},
		{" grpc", "", httpClient, []string{"OTEL_EXPORTER_OTLP_PROTOCOL"}},
		{"grpc,http/protobuf", "grpc ", httpClient, []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}},
	} {
		clearEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.protocol)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", c.tracesProtocol)
		got, stderr := built(t, client)
		var warned []string
		for name := range warningsIn(t, importEnv.name, stderr) {
			warned = append(warned, name)
		}
		sort.Strings(warned)
		if got != c.want || !slices.Equal(warned, c.warned) {
			t.Errorf("%+v: %s, warned about %v\n%s", c, got, warned, stderr)
		}
	}
}

// TestCredentialsInTheEndpointAreIgnoredUnprinted: the OTLP exporters send
// to an endpoint's host and path only, so credentials in its URL would be
// silently dropped; the import warns about the endpoint, never printing
// the password, ignores it, and exports where it would without it: to
// the console, or to the other endpoint variable's.
func TestCredentialsInTheEndpointAreIgnoredUnprinted(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret@127.0.0.1:1")
	code, stdout, stderr := runCmd(t, goodLine+"\n", "import")
	if code != 0 || !strings.Contains(stdout, `"omni.request"`) || !strings.Contains(stderr, "to the console") {
		t.Errorf("exit %d, want 0 and the spans on the console:\n%s\n%s", code, stdout, stderr)
	}
	checkWarned(t, "the general endpoint", importEnv.name, stderr, "OTEL_EXPORTER_OTLP_ENDPOINT", "", true)
	if !strings.Contains(stderr, "credentials") {
		t.Errorf("the reason not said: %s", stderr)
	}

	c := newFakeCollector(t, 0)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint("http/protobuf"))
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://user:s3cret@127.0.0.1:1/v1/traces")
	code, _, stderr = runCmd(t, goodLine+"\n", "import")
	if code != 0 || c.spanCount() == 0 || !strings.Contains(stderr, "OTEL_EXPORTER_OTLP_ENDPOINT's value") {
		t.Errorf("exit %d, %d spans at the general endpoint, want 0 and every span:\n%s", code, c.spanCount(), stderr)
	}
	checkWarned(t, "the traces' endpoint", importEnv.name, stderr, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", true)
}

// TestTheOTLPClientSendsWhatTheEnvironmentSays: a valid value the client
// would misread takes the effect otelsetup gives it (GZIP compresses),
// and a value not valid is not handed to the client: its headers are the
// general variable's when the traces' are not valid.
func TestTheOTLPClientSendsWhatTheEnvironmentSays(t *testing.T) {
	clearEnv(t)
	var (
		mu       sync.Mutex
		encoding []string
		keys     []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encoding = append(encoding, r.Header.Get("Content-Encoding"))
		keys = append(keys, r.Header.Get("Api-Key")+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=abc")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "Authorization: Bearer s3cret")
	code, _, stderr := runCmd(t, goodLine+"\n", "import")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	checkWarned(t, "the traces' headers", importEnv.name, stderr, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "", true)
	mu.Lock()
	defer mu.Unlock()
	if len(encoding) == 0 || encoding[0] != "gzip" || keys[0] != "abc|" {
		t.Errorf("requests with Content-Encoding %q and api-key|authorization %q, want gzip and abc|", encoding, keys)
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

// BenchmarkExportEncoding encodes one batch of 2 048 spans of an import
// to the bytes of an OTLP request: the SDK's OTLP exporter (of the same
// spans, as the SDK holds them) against the import's sink (pdata's
// encoding), both on the same client.
func BenchmarkExportEncoding(b *testing.B) {
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	var lines []string
	for i := 0; i < importBatchSize/5; i++ {
		lines = append(lines, strings.Replace(goodLine, "chatcmpl-ac59cea85b422f04", fmt.Sprintf("chatcmpl-%016x", i), 1))
	}
	td := importBatch(b, res, spanLimits(), lines...)
	n := td.SpanCount()
	sdkClient, ourClient := &discardClient{}, &discardClient{}
	sdkExp, err := otlptrace.New(ctx, sdkClient)
	if err != nil {
		b.Fatal(err)
	}
	stubs := readOnlySpans(td, res)
	sink, err := newOTLPSink(ctx, ourClient)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := sdkExp.ExportSpans(ctx, stubs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
	})
	b.Run("omnitrace", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := sink.export(ctx, td); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
	})
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

// FuzzOTLPSink: a request of any id, model, stage name and unknown key
// and value, hostile strings included, makes an OTLP request that decodes
// as a receiver decodes it (strings checked for UTF-8), holding span for
// span what the SDK's OTLP exporter sends for the same spans.
func FuzzOTLPSink(f *testing.F) {
	f.Add("chatcmpl-1", "Qwen/Qwen-Image", "dit", "k", "v", 2.5)
	f.Add("", "", "", "", "", math.Copysign(0, -1))
	f.Add("\u00e9\u4e16", "k\x00", "\u2028", "\xff", "bad \xff byte", 1e300)
	f.Add("ok", "\xed\xa0\x80", "\t", "key", strings.Repeat("x", 5000), 1e-9)
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	f.Fuzz(func(t *testing.T, id, model, stage, key, val string, x float64) {
		line := fmt.Sprintf(`{"request_id": %s, "model": %s, "arrival_time": 1796000000.5, "stages": [{"stage_id": 0, "stage_name": %s, "submit_time": 1796000000.5, "forward_time_ms": 1, %s: %s, "n": %g},`+
			` {"stage_id": 1, "submit_time": 1796000000.6, "rx_decode_time_ms": 0.5, "vllm_decode_ms": 3}]}`,
			quote(id), quote(model), quote(stage), quote("x"+key), quote(val), clampFloat(x))
		if _, err := forms.Parse([]byte(line)); err != nil {
			return
		}
		ctx := context.Background()
		td := importBatch(t, res, spanLimits(), line)
		c := &marshalClient{}
		s, err := newOTLPSink(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.export(ctx, td); err != nil {
			t.Fatal(err)
		}
		got := c.request(t, 0)
		for _, sp := range got.ResourceSpans[0].ScopeSpans[0].Spans {
			for _, kv := range sp.Attributes {
				if !utf8.ValidString(kv.Key) || !utf8.ValidString(kv.Value.GetStringValue()) {
					t.Fatalf("%s: %q is not valid UTF-8", sp.Name, kv.Key)
				}
			}
		}
		sameRequests(t, sdkExport(t, td, res), got)
	})
}

// quote writes s as a JSON string, its bytes as they are (invalid UTF-8
// included), escaping what JSON must.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func clampFloat(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
