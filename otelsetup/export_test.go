// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
)

// collector is a fake OTLP collector that decodes what it gets as a real
// one does (protobuf, which refuses a string that is not valid UTF-8) and
// counts the spans.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	spans, refused atomic.Int64
	// reject is how many spans of each batch it rejects while accepting
	// the batch (an OTLP partial success).
	reject int64
	// json answers over HTTP in OTLP/JSON, as a collector may whatever
	// the request's encoding.
	json bool
}

// rejectionReason is the reason the collector gives for the spans it
// rejects: a collector's text, which may hold anything, here lines and a
// forged count.
const rejectionReason = "span too old\nOTLP partial success: forged (999 spans rejected)\nreally"

func (c *collector) response() *coltrace.ExportTraceServiceResponse {
	if c.reject == 0 {
		return &coltrace.ExportTraceServiceResponse{}
	}
	return &coltrace.ExportTraceServiceResponse{PartialSuccess: &coltrace.ExportTracePartialSuccess{
		RejectedSpans: c.reject, ErrorMessage: rejectionReason}}
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans.Add(int64(len(ss.Spans)))
		}
	}
	return c.response(), nil
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		c.refused.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = c.Export(r.Context(), &req)
	if c.json {
		w.Header().Set("Content-Type", "application/json")
		out, _ := protojson.Marshal(c.response())
		_, _ = w.Write(out)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(c.response())
	_, _ = w.Write(out)
}

// startCollector starts a fake collector for proto and returns its
// endpoint.
func startCollector(t *testing.T, proto string, c *collector) string {
	t.Helper()
	if proto == "http/protobuf" {
		srv := httptest.NewServer(c)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "http://" + l.Addr().String()
}

func TestOneBadStringCostsNoOtherSpan(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			clearOTelEnv(t)
			c := &collector{}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", startCollector(t, protocol, c))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics())
			if err != nil {
				t.Fatal(err)
			}
			// Another instrumentation in the process, not otelomni: its
			// strings reach the exporter as they are.
			tr := tel.TracerProvider().Tracer("other")
			_, bad := tr.Start(context.Background(), "op\xff")
			bad.SetAttributes(attribute.String("k\xfe", "v\xff"), attribute.StringSlice("l", []string{"\xff"}))
			bad.AddEvent("e\xff")
			bad.SetStatus(codes.Error, "broken \xff")
			bad.End()
			// A tracer whose scope's attributes hold invalid UTF-8: every
			// span of it is repaired.
			_, scoped := tel.TracerProvider().Tracer("scoped", trace.WithInstrumentationAttributes(
				attribute.String("lib\xff", "v\xfe"), attribute.StringSlice("l", []string{"ok", "\xff"}))).Start(context.Background(), "fine")
			scoped.End()
			for i := 0; i < 3; i++ {
				_, s := tr.Start(context.Background(), "good")
				s.End()
			}
			if err := tel.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := c.spans.Load(); got != 5 {
				t.Errorf("the collector got %d spans, want 5 (refused %d requests)", got, c.refused.Load())
			}
			if st := tel.ExportStats(); st.Repaired != 2 || st.Exported != 5 {
				t.Errorf("export stats %+v, want 5 exported, 2 repaired", st)
			}
			_ = tel.Shutdown(context.Background())
		})
	}
	t.Run("control: the plain exporter loses the batch", func(t *testing.T) {
		c := &collector{}
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(startCollector(t, "http/protobuf", c)))
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		_, bad := tp.Tracer("other").Start(context.Background(), "op")
		bad.SetAttributes(attribute.String("k", "v\xff"))
		bad.End()
		_, good := tp.Tracer("other").Start(context.Background(), "good")
		good.End()
		_ = tp.ForceFlush(context.Background())
		_ = tp.Shutdown(context.Background())
		if got := c.spans.Load(); got != 0 {
			t.Errorf("the plain exporter delivered %d spans: this test shows nothing", got)
		}
	})
}

func TestLossIsReportedAlikeOverGRPCAndHTTP(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+closedPort(t))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics(),
				otelsetup.WithShutdownTimeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 13; i++ {
				_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
				s.End()
			}
			var loss *otelsetup.LossError
			err = tel.Shutdown(context.Background())
			if !errors.As(err, &loss) || !errors.Is(err, otelsetup.ErrSpansLost) {
				t.Fatalf("Shutdown = %v, want the loss reported", err)
			}
			if loss.Ended != 13 || loss.Lost() != 13 {
				t.Errorf("loss %+v, want 13 of 13", loss.ExportStats)
			}
		})
	}
}

// failing is an exporter whose every export fails.
type failing struct{}

func (failing) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("refused")
}
func (failing) Shutdown(context.Context) error { return nil }

func TestForceFlushReportsWhatItLost(t *testing.T) {
	for name, exp := range map[string]sdktrace.SpanExporter{"failing": failing{}, "working": newKept()} {
		t.Run(name, func(t *testing.T) {
			clearOTelEnv(t)
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(exp))
			if err != nil {
				t.Fatal(err)
			}
			_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
			s.End()
			err = tel.ForceFlush(context.Background())
			if lost := errors.Is(err, otelsetup.ErrSpansLost); lost != (name == "failing") {
				t.Errorf("ForceFlush = %v", err)
			}
			_ = tel.Shutdown(context.Background())
		})
	}
}

// TestResourceAttributesAreOnTheResourceAndWin: the program's resource
// attributes are on every span's resource, and win over
// OTEL_RESOURCE_ATTRIBUTES for the same key, as the specification's merge
// says; the variable's other keys are there too, and OTEL_SERVICE_NAME
// wins over WithServiceName.
func TestResourceAttributesAreOnTheResourceAndWin(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "omni.engine.dtype=float16,deployment.environment=prod,host.name=from-env")
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	tel, exp := setupWithMemory(t, otelsetup.WithServiceName("from-code"), otelsetup.WithResourceAttributes(
		attrs.EngineTensorParallelKey.Int(4), attrs.EngineDTypeKey.String("bfloat16"),
		attrs.EngineDeviceKindKey.String("cuda\xff"), attribute.String("", "no key")))
	s := flushOne(t, tel, exp, otelomni.RequestInfo{ID: "r"})
	res := s.Resource.Set()
	for k, want := range map[attribute.Key]string{"omni.engine.parallel.tensor": "4", "omni.engine.dtype": "bfloat16",
		"omni.engine.device.kind": "cuda\uFFFD", "deployment.environment": "prod", "host.name": "from-env",
		"service.name": "from-env"} {
		if v, ok := res.Value(k); !ok || v.String() != want {
			t.Errorf("resource %s = %q, want %q", k, v.String(), want)
		}
	}
	for _, kv := range s.Resource.Attributes() {
		if kv.Key == "" || kv.Key == "_invalid" {
			t.Errorf("an attribute of no key on the resource: %v", kv)
		}
	}
}

// setupGlobalLogs runs Setup with the globals, as a program that exports
// logs through the slog bridge does, and restores the global logger
// provider and propagator after the test.
func setupGlobalLogs(t *testing.T, opts ...otelsetup.Option) *otelsetup.Telemetry {
	t.Helper()
	lp, prop := otel.GetLoggerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetLoggerProvider(lp); otel.SetTextMapPropagator(prop) })
	tel, err := otelsetup.Setup(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tel
}

func TestLogsCarryTheirTraceAndAreExportedOnlyWhenAsked(t *testing.T) {
	clearOTelEnv(t)
	var got atomic.Pointer[collogs.ExportLogsServiceRequest]
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		b, _ := io.ReadAll(r.Body)
		var req collogs.ExportLogsServiceRequest
		if proto.Unmarshal(b, &req) == nil {
			got.Store(&req)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", srv.URL+"/v1/logs")
	// Not asked for (no OTEL_LOGS_EXPORTER), and asked for without the
	// globals: no record leaves.
	for _, c := range []struct {
		exporter string
		opts     []otelsetup.Option
	}{{"", nil}, {"otlp", []otelsetup.Option{otelsetup.WithoutGlobal()}}} {
		t.Setenv("OTEL_LOGS_EXPORTER", c.exporter)
		tel := setupGlobalLogs(t, append(c.opts, otelsetup.WithFallbackExporter(nil))...)
		slog.New(otelslog.NewHandler("engine")).Info("not exported", "exporter", c.exporter)
		if err := tel.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := posts.Load(); n != 0 {
		t.Fatalf("%d exports of logs not asked for", n)
	}
	t.Setenv("OTEL_LOGS_EXPORTER", "otlp")
	tel := setupGlobalLogs(t, otelsetup.WithFallbackExporter(nil))
	h := otelslog.NewHandler("engine")
	ctx, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "phase")
	slog.New(h).InfoContext(ctx, "denoising", "step", 3)
	span.End()
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := got.Load()
	if req == nil || len(req.ResourceLogs) == 0 || len(req.ResourceLogs[0].ScopeLogs) == 0 || len(req.ResourceLogs[0].ScopeLogs[0].LogRecords) != 1 {
		t.Fatalf("the collector got %v", req)
	}
	rec := req.ResourceLogs[0].ScopeLogs[0].LogRecords[0]
	if hex.EncodeToString(rec.TraceId) != span.SpanContext().TraceID().String() || hex.EncodeToString(rec.SpanId) != span.SpanContext().SpanID().String() {
		t.Errorf("the record carries trace %x span %x, want the phase's", rec.TraceId, rec.SpanId)
	}
	_ = tel.Shutdown(context.Background())
}

func TestSpansWithTimesOTLPCannotCarryAreRefusedOrRepaired(t *testing.T) {
	clearOTelEnv(t)
	tel, exp := setupWithMemory(t)
	tr := tel.TracerProvider().Tracer("other") // not otelomni: nothing checked its times
	now := time.Now()
	_, neg := tr.Start(context.Background(), "negative", trace.WithTimestamp(now))
	neg.End(trace.WithTimestamp(now.Add(-time.Second)))
	_, far := tr.Start(context.Background(), "year 9999", trace.WithTimestamp(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)))
	far.End()
	_, ok := tr.Start(context.Background(), "fine")
	ok.End()
	if err := tel.Shutdown(context.Background()); !errors.Is(err, otelsetup.ErrSpansLost) {
		t.Errorf("Shutdown = %v, want the refused span reported", err)
	}
	got := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		got[s.Name] = s
	}
	if _, in := got["year 9999"]; in || len(got) != 2 {
		t.Fatalf("exported %v, want the negative one repaired and the fine one, not year 9999", got)
	}
	if s := got["negative"]; !s.EndTime.Equal(s.StartTime) {
		t.Errorf("a negative span exported as %v .. %v", s.StartTime, s.EndTime)
	}
	if st := tel.ExportStats(); st.Refused != 1 || st.Repaired != 1 || st.Exported != 2 {
		t.Errorf("stats %+v", st)
	}
}

// An event whose time OTLP cannot carry is left out of its span, counted in
// the span's dropped events; the span and its other events are exported.
func TestEventsWithTimesOTLPCannotCarryAreLeftOut(t *testing.T) {
	clearOTelEnv(t)
	tel, exp := setupWithMemory(t)
	tr := tel.TracerProvider().Tracer("other") // not otelomni: nothing checked its times
	_, span := tr.Start(context.Background(), "with events")
	span.AddEvent("1960", trace.WithTimestamp(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)))
	span.AddEvent("fine")
	span.AddEvent("year 3000", trace.WithTimestamp(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)))
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := exp.GetSpans()
	if len(got) != 1 {
		t.Fatalf("exported %d spans, want 1", len(got))
	}
	s := got[0]
	if len(s.Events) != 1 || s.Events[0].Name != "fine" || s.DroppedEvents != 2 {
		t.Errorf("events %v, %d dropped; want only \"fine\", 2 dropped", s.Events, s.DroppedEvents)
	}
	if st := tel.ExportStats(); st.Refused != 0 || st.Repaired != 1 || st.Exported != 1 {
		t.Errorf("stats %+v", st)
	}
}

// headerCollector records the headers of the requests it gets.
type headerCollector struct {
	coltrace.UnimplementedTraceServiceServer
	got chan map[string]string
}

func (c *headerCollector) Export(ctx context.Context, _ *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := map[string]string{}
	for k, v := range md {
		h[k] = v[0]
	}
	c.got <- h
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (c *headerCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := map[string]string{}
	for k, v := range r.Header {
		h[strings.ToLower(k)] = v[0]
	}
	c.got <- h
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestAcceptedHeadersAreTheHeadersSent: what the check accepts is what
// both exporters send, decoded and trimmed, with nothing left out.
func TestAcceptedHeadersAreTheHeadersSent(t *testing.T) {
	const value = " api-key = abc%20def , X-Tenant=t1,x-empty=,trace.id_v-2=%21x%7E%2C%3D, bin-bin=AAEC"
	want := map[string]string{"api-key": "abc def", "x-tenant": "t1", "x-empty": "", "trace.id_v-2": "!x~,=", "bin-bin": "AAEC"}
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			clearOTelEnv(t)
			c := &headerCollector{got: make(chan map[string]string, 16)}
			var endpoint string
			if protocol == "grpc" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := grpc.NewServer()
				coltrace.RegisterTraceServiceServer(srv, c)
				go func() { _ = srv.Serve(l) }()
				t.Cleanup(srv.Stop)
				endpoint = "http://" + l.Addr().String()
			} else {
				srv := httptest.NewServer(c)
				t.Cleanup(srv.Close)
				endpoint = srv.URL
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", value)
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics())
			if err != nil {
				t.Fatal(err)
			}
			_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
			s.End()
			if err := tel.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := <-c.got
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("header %s: got %q (sent: %v), want %q", k, g, ok, v)
				}
			}
			_ = tel.Shutdown(context.Background())
		})
	}
}

// gatedCollector is a fake collector that answers only once its gate is
// open: a collector that hangs, then recovers.
type gatedCollector struct {
	collector
	gate chan struct{}
}

func (c *gatedCollector) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	select {
	case <-c.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.collector.Export(ctx, req)
}

func (c *gatedCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-c.gate:
	case <-r.Context().Done():
		return
	}
	c.collector.ServeHTTP(w, r)
}

// TestForceFlushReportsEveryLossSinceThePreviousFlush: spans dropped from
// a full queue, refused for their times, or failed, are each reported by
// the next ForceFlush, over gRPC and HTTP alike, and by no later one.
func TestForceFlushReportsEveryLossSinceThePreviousFlush(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			clearOTelEnv(t)
			c := &gatedCollector{gate: make(chan struct{})}
			var once sync.Once
			open := func() { once.Do(func() { close(c.gate) }) }
			t.Cleanup(open)
			var endpoint string
			if protocol == "grpc" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := grpc.NewServer()
				coltrace.RegisterTraceServiceServer(srv, c)
				go func() { _ = srv.Serve(l) }()
				t.Cleanup(srv.Stop)
				endpoint = "http://" + l.Addr().String()
			} else {
				srv := httptest.NewServer(c)
				t.Cleanup(srv.Close)
				endpoint = srv.URL
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			// No timer and no timeout decides anything below.
			t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "86400000")
			t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "86400000")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "86400000")
			t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "16") // and batches of 16
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics())
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			tr := tel.TracerProvider().Tracer("t")
			// The collector hangs on the first batch: the path holds it and
			// a queue of 16, and drops the other 169.
			for i := 0; i < 201; i++ {
				_, s := tr.Start(context.Background(), "s")
				s.End()
			}
			open()
			err = tel.ForceFlush(context.Background())
			var loss *otelsetup.LossError
			if !errors.As(err, &loss) || !errors.Is(err, otelsetup.ErrSpansLost) {
				t.Errorf("ForceFlush = %v, want the 169 spans dropped reported", err)
			}
			if !strings.Contains(fmt.Sprint(err), "169 spans did not reach the collector since the previous flush (169 dropped") {
				t.Errorf("ForceFlush = %v", err)
			}
			if st := tel.ExportStats(); st.Exported != 32 || st.Pending != 169 || c.spans.Load() != 32 {
				t.Errorf("stats %+v, the collector got %d: want 32 exported, 169 dropped", st, c.spans.Load())
			}
			if err := tel.ForceFlush(context.Background()); err != nil {
				t.Errorf("a second ForceFlush, with nothing lost since: %v", err)
			}
			// A span refused for its time, during the flush.
			_, far := tr.Start(context.Background(), "year 9999", trace.WithTimestamp(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)))
			far.End()
			_, ok := tr.Start(context.Background(), "fine")
			ok.End()
			err = tel.ForceFlush(context.Background())
			if !errors.Is(err, otelsetup.ErrSpansLost) || !strings.Contains(fmt.Sprint(err), "1 spans did not reach the collector since the previous flush (0 dropped: queue full, 0 failed to export, 0 rejected by the collector, 1 refused") {
				t.Errorf("ForceFlush = %v, want the refused span reported", err)
			}
			if err := tel.ForceFlush(context.Background()); err != nil {
				t.Errorf("ForceFlush = %v, with nothing lost since", err)
			}
		})
	}
}

// TestSpansACollectorRejectsAreLost: a collector that accepts a batch but
// rejects some of its spans (an OTLP partial success) makes ForceFlush and
// Shutdown report those lost, and ExportStats count them rejected and the
// rest of the batch exported, not the whole batch failed, over both
// protocols; the exporter's error still reaches the error handler.
func TestSpansACollectorRejectsAreLost(t *testing.T) {
	for _, tc := range []struct {
		protocol      string
		journal, json bool
	}{{"http/protobuf", false, false}, {"http/protobuf", false, true}, {"grpc", false, false}, {"grpc", true, false}} {
		protocol := tc.protocol
		name := protocol
		if tc.journal {
			name += ", with the crash journal"
		}
		if tc.json {
			name += ", answered in JSON"
		}
		t.Run(name, func(t *testing.T) {
			clearOTelEnv(t)
			handled := handledErrors(t)
			c := &collector{reject: 2, json: tc.json}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", startCollector(t, protocol, c))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			opts := []otelsetup.Option{otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics()}
			dir := t.TempDir()
			if tc.journal {
				opts = append(opts, otelsetup.WithJournal(dir))
			}
			tel, err := otelsetup.Setup(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			tr := tel.TracerProvider().Tracer("t")
			// Two batches of 5, each with 2 spans rejected.
			for batch := range 2 {
				for range 5 {
					_, s := tr.Start(context.Background(), "op")
					s.End()
				}
				err = tel.ForceFlush(context.Background())
				if !errors.Is(err, otelsetup.ErrSpansLost) || !strings.Contains(fmt.Sprint(err), "2 spans did not reach the collector since the previous flush (0 dropped: queue full, 0 failed to export, 2 rejected by the collector") {
					t.Errorf("ForceFlush %d: %v, want 2 spans lost, rejected by the collector", batch, err)
				}
			}
			if st := tel.ExportStats(); st.Exported != 6 || st.Rejected != 4 || st.Failed != 0 || st.Lost() != 4 || c.spans.Load() != 10 {
				t.Errorf("export stats %+v (lost %d), the collector got %d: want 6 exported, 4 rejected", st, st.Lost(), c.spans.Load())
			}
			if err := tel.Shutdown(context.Background()); !errors.Is(err, otelsetup.ErrSpansLost) {
				t.Errorf("Shutdown: %v, want the 4 rejected spans lost", err)
			}
			// The collector took both batches: nothing is left to send
			// again, so the journal's file goes.
			if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
				t.Errorf("the journal's folder holds %v (%v) after Shutdown", left, err)
			}
			partial := 0
			for _, l := range handled() {
				if strings.HasSuffix(l, "OTLP partial success: "+rejectionReason+" (2 spans rejected)") {
					partial++
				}
			}
			if partial != 1 {
				t.Errorf("the collector's reason was logged %d times, want once: %q", partial, handled())
			}
		})
	}
}

// TestRecoveredSpansACollectorRejectsAreNotCountedRecovered: the spans a
// killed engine's journal holds, recovered at the next start into a
// collector that rejects them, are not counted recovered, and the
// collector's reason is logged.
func TestRecoveredSpansACollectorRejectsAreNotCountedRecovered(t *testing.T) {
	clearOTelEnv(t)
	dir := t.TempDir()
	_, inFlight, _ := journalChild(t, "kill", dir)
	if len(inFlight) == 0 {
		t.Fatal("the killed engine left no span to recover")
	}
	handled := handledErrors(t)
	c := &collector{reject: 1 << 40} // every span of every batch
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", startCollector(t, "grpc", c))
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics(), otelsetup.WithJournal(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = tel.Shutdown(context.Background())
	if st := tel.ExportStats(); st.Recovered != 0 || c.spans.Load() < int64(len(inFlight)) {
		t.Errorf("ExportStats %+v, the collector got %d of %d recovered spans and rejected them all: want none counted recovered", st, c.spans.Load(), len(inFlight))
	}
	found := false
	for _, l := range handled() {
		found = found || strings.Contains(l, "the collector rejected spans it was sent")
	}
	if !found {
		t.Errorf("the collector's rejection was not logged: %q", handled())
	}
}

// handledErrors sets an OpenTelemetry error handler for the test that
// keeps what it is given, and returns a function that reads it.
func handledErrors(t *testing.T) func() []string {
	var (
		mu     sync.Mutex
		logged []string
	)
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); logged = append(logged, err.Error()); mu.Unlock() }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), logged...)
	}
}

// encodingCollector records how each request it gets is compressed:
// Content-Encoding over HTTP, grpc-encoding over gRPC.
type encodingCollector struct {
	coltrace.UnimplementedTraceServiceServer
	got chan string
}

func (c *encodingCollector) Export(context.Context, *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (c *encodingCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.got <- r.Header.Get("Content-Encoding")
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (c *encodingCollector) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}
func (c *encodingCollector) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		c.got <- h.Compression
	}
}
func (c *encodingCollector) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c *encodingCollector) HandleConn(context.Context, stats.ConnStats) {}

// TestCompressionSentIsTheOneSetupReads: the exporters read the
// compression themselves, trimmed and only in lowercase; what reaches
// the collector is Setup's reading, over both protocols: any case, and a
// padded value ignored (no compression), where the exporters would
// compress.
func TestCompressionSentIsTheOneSetupReads(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		for _, c := range []struct{ value, want string }{{"gzip", "gzip"}, {"GZIP", "gzip"}, {"gzip ", ""}, {"none", ""}} {
			t.Run(protocol+" "+c.value, func(t *testing.T) {
				clearOTelEnv(t)
				col := &encodingCollector{got: make(chan string, 16)}
				var endpoint string
				if protocol == "grpc" {
					l, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					srv := grpc.NewServer(grpc.StatsHandler(col))
					coltrace.RegisterTraceServiceServer(srv, col)
					go func() { _ = srv.Serve(l) }()
					t.Cleanup(srv.Stop)
					endpoint = "http://" + l.Addr().String()
				} else {
					srv := httptest.NewServer(col)
					t.Cleanup(srv.Close)
					endpoint = srv.URL
				}
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
				t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
				t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", c.value)
				handled(t)
				tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics())
				if err != nil {
					t.Fatal(err)
				}
				defer tel.Shutdown(context.Background())
				_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
				s.End()
				if err := tel.ForceFlush(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got := <-col.got; got != c.want && !(c.want == "" && got == "identity") {
					t.Errorf("sent compressed %q, want %q", got, c.want)
				}
			})
		}
	}
}

// textLikePartial is an exporter, not an OTLP one, whose error reads as an
// OTLP partial success.
type textLikePartial struct{}

func (textLikePartial) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return fmt.Errorf("traces export: %w", errors.New("OTLP partial success: disk full (0 spans rejected)"))
}
func (textLikePartial) Shutdown(context.Context) error { return nil }

// TestAnErrorThatReadsAsAPartialSuccessIsAFailure: what reached the
// collector is what the collector answered, never what an error's text
// says: an exporter whose error reads as a partial success failed.
func TestAnErrorThatReadsAsAPartialSuccessIsAFailure(t *testing.T) {
	clearOTelEnv(t)
	handledErrors(t)
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(textLikePartial{}))
	if err != nil {
		t.Fatal(err)
	}
	_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
	s.End()
	if err := tel.Shutdown(context.Background()); !errors.Is(err, otelsetup.ErrSpansLost) {
		t.Errorf("Shutdown = %v, want the span lost", err)
	}
	if st := tel.ExportStats(); st.Failed != 1 || st.Exported != 0 || st.Rejected != 0 {
		t.Errorf("%+v: want the span failed to export", st)
	}
}

// TestAResourceThatIsNotUTF8CostsNoSpan: OTEL_RESOURCE_ATTRIBUTES with a
// key that is not valid UTF-8 is warned about, but the SDK merges it into
// every resource as it reads it; the exporter repairs the resource, so
// that a collector decoding protobuf (which refuses invalid UTF-8) still
// gets every span, over gRPC and HTTP.
func TestAResourceThatIsNotUTF8CostsNoSpan(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			clearOTelEnv(t)
			errs := handled(t)
			c := &collector{}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", startCollector(t, protocol, c))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "team\xff=gen,deployment.environment=prod")
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics())
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
				s.End()
			}
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v, want every span exported", err)
			}
			if c.spans.Load() != 3 || c.refused.Load() != 0 {
				t.Errorf("the collector got %d spans and refused %d requests, want 3 and none", c.spans.Load(), c.refused.Load())
			}
			if w := warnings(errs()); len(w["OTEL_RESOURCE_ATTRIBUTES"]) != 1 {
				t.Errorf("warnings %v, want one naming OTEL_RESOURCE_ATTRIBUTES", errs())
			}
		})
	}
}

// TestRecoverWithNewSpanExporterCountsAPartialSuccess: otelsetup.Recover
// given the exporter otelsetup.NewSpanExporter builds reads a collector's
// partial success from its answer, as Setup does: the batch is done, its
// journal removed, not sent again; given a plain OTLP exporter, it cannot
// tell, and leaves the journal to be sent again.
func TestRecoverWithNewSpanExporterCountsAPartialSuccess(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run(fmt.Sprint("NewSpanExporter ", own), func(t *testing.T) {
			clearOTelEnv(t)
			dir := t.TempDir()
			_, inFlight, _ := journalChild(t, "kill", dir)
			if len(inFlight) == 0 {
				t.Fatal("the killed engine left no span to recover")
			}
			handledErrors(t)
			c := &collector{reject: 1}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", startCollector(t, "http/protobuf", c))
			var exp sdktrace.SpanExporter
			var err error
			if own {
				exp, err = otelsetup.NewSpanExporter(context.Background())
			} else {
				exp, err = otlptracehttp.New(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer exp.Shutdown(context.Background())
			rep, err := otelsetup.Recover(context.Background(), dir, exp)
			if own && (err != nil || rep.Removed != rep.Files || rep.Ended+rep.Open < len(inFlight)) {
				t.Errorf("Recover = %+v, %v: want every journal done, and removed", rep, err)
			}
			if !own && (err == nil || rep.Removed != 0) {
				t.Errorf("Recover = %+v, %v: a plain exporter's partial success is a failure, the journal kept", rep, err)
			}
		})
	}
}

// TestAnHTTPSEndpointTrustsTheCertificateNamed: over https, the exporters
// Setup builds trust the certificate OTEL_EXPORTER_OTLP_CERTIFICATE names,
// and only it, over HTTP and gRPC: the transport is Setup's own.
func TestAnHTTPSEndpointTrustsTheCertificateNamed(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		for _, trusted := range []bool{true, false} {
			t.Run(fmt.Sprint(protocol, " trusted ", trusted), func(t *testing.T) {
				clearOTelEnv(t)
				handled(t)
				c := &collector{}
				srv := httptest.NewUnstartedServer(c)
				if protocol == "grpc" {
					gs := grpc.NewServer()
					coltrace.RegisterTraceServiceServer(gs, c)
					srv.Config.Handler = gs
					srv.EnableHTTP2 = true
				}
				srv.StartTLS()
				t.Cleanup(srv.Close)
				ca := filepath.Join(t.TempDir(), "ca.pem")
				der := srv.Certificate().Raw
				if !trusted {
					der = selfSigned(t) // httptest's servers share one certificate
				}
				if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
					t.Fatal(err)
				}
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL) // https://127.0.0.1:port
				t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
				t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
				if !trusted {
					// The gRPC exporter tries again until its timeout.
					t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
				}
				tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics())
				if err != nil {
					t.Fatal(err)
				}
				_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
				s.End()
				_ = tel.ForceFlush(context.Background())
				_ = tel.Shutdown(canceledContext())
				if got := c.spans.Load(); (got == 1) != trusted {
					t.Errorf("the collector got %d spans over TLS with the certificate trusted %v", got, trusted)
				}
			})
		}
	}
}

// TestHostileAnswersAreCountedAsTheyMean: a collector's answer is read
// within bounds and believed only as far as the batch goes: a rejected
// count beyond the batch rejects the batch, a negative one none, an
// answer larger than the exporters read fails the export, a body that is
// not an answer fails it.
func TestHostileAnswersAreCountedAsTheyMean(t *testing.T) {
	for _, c := range []struct {
		name                       string
		answer                     func(w http.ResponseWriter)
		exported, rejected, failed uint64
	}{
		{"beyond the batch", answerWith(&coltrace.ExportTraceServiceResponse{PartialSuccess: &coltrace.ExportTracePartialSuccess{RejectedSpans: 1 << 62}}), 0, 3, 0},
		{"negative", answerWith(&coltrace.ExportTraceServiceResponse{PartialSuccess: &coltrace.ExportTracePartialSuccess{RejectedSpans: -5}}), 3, 0, 0},
		{"a message only", answerWith(&coltrace.ExportTraceServiceResponse{PartialSuccess: &coltrace.ExportTracePartialSuccess{ErrorMessage: "slow down"}}), 3, 0, 0},
		{"8 MiB", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(make([]byte, 8<<20))
		}, 0, 0, 3},
		{"not protobuf", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write([]byte("\xff\xff\xff garbage"))
		}, 0, 0, 3},
		{"another content type", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("ok"))
		}, 3, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearOTelEnv(t)
			handled(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				c.answer(w)
			}))
			t.Cleanup(srv.Close)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics())
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
				s.End()
			}
			_ = tel.Shutdown(context.Background())
			st := tel.ExportStats()
			if st.Exported != c.exported || st.Rejected != c.rejected || st.Failed != c.failed || !addsUp(st) {
				t.Errorf("%+v, want %d exported, %d rejected, %d failed", st, c.exported, c.rejected, c.failed)
			}
		})
	}
}

// selfSigned returns a fresh self-signed certificate, DER-encoded.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func answerWith(m *coltrace.ExportTraceServiceResponse) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(m)
		_, _ = w.Write(b)
	}
}
