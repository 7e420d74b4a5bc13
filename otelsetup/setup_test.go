// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// clearOTelEnv unsets every OTEL_* variable for the test.
func clearOTelEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "OTELOMNI_JOURNAL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// keptExporter keeps its spans at Shutdown (tracetest's own clears them),
// so a test can read what a Shutdown flushed.
type keptExporter struct{ *tracetest.InMemoryExporter }

func (keptExporter) Shutdown(context.Context) error { return nil }

func newKept() keptExporter { return keptExporter{tracetest.NewInMemoryExporter()} }

// setupWithMemory sets up with an in-memory exporter, without touching the
// globals, and returns the exporter.
func setupWithMemory(t *testing.T, opts ...otelsetup.Option) (*otelsetup.Telemetry, keptExporter) {
	t.Helper()
	exp := newKept()
	// The fallback keeps metrics off unless a variable names an exporter.
	tel, err := otelsetup.Setup(context.Background(), append([]otelsetup.Option{
		otelsetup.WithSpanExporter(exp), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(nil)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel, exp
}

func flushOne(t *testing.T, tel *otelsetup.Telemetry, exp keptExporter, info otelomni.RequestInfo) tracetest.SpanStub {
	t.Helper()
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	_, req := in.Start(context.Background(), info)
	req.End(nil)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ss := exp.GetSpans()
	if len(ss) != 1 {
		t.Fatalf("%d spans exported, want 1", len(ss))
	}
	return ss[0]
}

func TestSetupResourceHasServiceHostProcessButNoCommandLine(t *testing.T) {
	clearOTelEnv(t)
	tel, exp := setupWithMemory(t, otelsetup.WithServiceName("dit-engine"))
	s := flushOne(t, tel, exp, otelomni.RequestInfo{ID: "r"})
	res := map[string]attribute.Value{}
	for _, kv := range s.Resource.Attributes() {
		res[string(kv.Key)] = kv.Value
	}
	for _, k := range []string{"service.name", "service.instance.id", "telemetry.sdk.name", "telemetry.sdk.version",
		"telemetry.distro.name", "telemetry.distro.version", "host.name", "process.pid", "process.executable.name"} {
		if _, ok := res[k]; !ok {
			t.Errorf("resource lacks %s: %v", k, res)
		}
	}
	if res["service.name"].AsString() != "dit-engine" || res["telemetry.distro.version"].AsString() != otelomni.Version {
		t.Errorf("service.name %q distro version %q", res["service.name"].AsString(), res["telemetry.distro.version"].AsString())
	}
	for k := range res {
		if strings.HasPrefix(k, "process.command") {
			t.Errorf("resource carries %s: command lines can hold secrets", k)
		}
	}
}

func TestSetupServiceNameFromEnvironmentWins(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	tel, exp := setupWithMemory(t, otelsetup.WithServiceName("from-code"))
	s := flushOne(t, tel, exp, otelomni.RequestInfo{ID: "r"})
	if v, _ := s.Resource.Set().Value("service.name"); v.AsString() != "from-env" {
		t.Errorf("service.name %q, want the variable's", v.AsString())
	}
}

func TestSetupBoundsAttributeValueLength(t *testing.T) {
	huge := strings.Repeat("x", 10<<20)
	cases := []struct {
		env  string
		want int
	}{{"", otelsetup.DefaultAttributeValueLengthLimit}, {"100", 100}}
	for _, tc := range cases {
		t.Run("limit="+tc.env, func(t *testing.T) {
			clearOTelEnv(t)
			if tc.env != "" {
				t.Setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", tc.env)
			}
			tel, exp := setupWithMemory(t)
			s := flushOne(t, tel, exp, otelomni.RequestInfo{ID: huge})
			for _, kv := range s.Attributes {
				if kv.Value.Type() == attribute.STRING && len(kv.Value.AsString()) > tc.want {
					t.Errorf("%s is %d bytes, want at most %d", kv.Key, len(kv.Value.AsString()), tc.want)
				}
			}
		})
	}
}

func TestSetupFromEnvironment(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		enabled bool
		desc    string
	}{
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true"}, false, "none"},
		{"sdk disabled in any case", map[string]string{"OTEL_SDK_DISABLED": "tRuE", "OTEL_TRACES_EXPORTER": "console"}, false, "none"},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false, "none"},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true, "console"},
		{"otlp grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true,
			"otlp (grpc) to http://127.0.0.1:1"},
		{"otlp http traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, true,
			"otlp (http/protobuf) to http://127.0.0.1:1/v1/traces"},
		{"nothing set, fallback none", map[string]string{}, false, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearOTelEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			if tel.Enabled() != tc.enabled || !strings.HasPrefix(tel.Exporter(), tc.desc) {
				t.Errorf("Enabled %v Exporter %q, want %v %q", tel.Enabled(), tel.Exporter(), tc.enabled, tc.desc)
			}
			if !tc.enabled {
				// A disabled setup costs nothing: the instrumenter allocates nothing.
				in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
				if n := testing.AllocsPerRun(50, func() {
					_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
					req.StartPhase(context.Background(), spans.Exec).End(nil)
					req.End(nil)
				}); n != 0 {
					t.Errorf("%v allocations per request with tracing off", n)
				}
			}
		})
	}
}

// TestAnUnknownExporterIsIgnoredAndTracingStaysOn: a value no reader
// knows is warned about, and the default exporter takes its place.
func TestAnUnknownExporterIsIgnoredAndTracingStaysOn(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	errs := handled(t)
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
	if err != nil || !tel.Enabled() || tel.Exporter() != "otlp (http/protobuf) to https://localhost:4318/v1/traces" {
		t.Fatalf("err %v, enabled %v, exporting %s: want tracing on, to the default", err, tel.Enabled(), tel.Exporter())
	}
	oneWarning(t, errs(), "OTEL_TRACES_EXPORTER")
	_ = tel.Shutdown(canceledContext()) // nothing sent to the default endpoint
}

func TestSetupSamplerFromEnvironment(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tel, exp := setupWithMemory(t)
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	fivePhases(in)
	_ = tel.Shutdown(context.Background())
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported under always_off", n)
	}
	// The same setup without the variable exports them: the check can fail.
	os.Unsetenv("OTEL_TRACES_SAMPLER")
	tel2, exp2 := setupWithMemory(t)
	fivePhases(otelomni.New(otelomni.WithTracerProvider(tel2.TracerProvider())))
	_ = tel2.Shutdown(context.Background())
	if len(exp2.GetSpans()) == 0 {
		t.Error("no spans without the sampler variable either")
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// hungExporter never returns from ExportSpans until the test ends, as a
// collector that accepted the connection and then hung.
type hungExporter struct{ release chan struct{} }

func (h hungExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return errors.New("hung collector")
}

func (hungExporter) Shutdown(context.Context) error { return nil }

// within fails the test when f does not return before a failure deadline
// far above anything a working f needs: "never waits" is shown by f
// returning at all while the collector hangs, not by how fast it does.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not return while the collector hung: it waits on the collector", what)
	}
}

func TestHungCollectorNeverHoldsUpSetupRequestsOrShutdown(t *testing.T) {
	clearOTelEnv(t)
	hung := hungExporter{release: make(chan struct{})}
	t.Cleanup(func() { close(hung.release) })
	var tel *otelsetup.Telemetry
	within(t, "Setup", func() {
		var err error
		tel, err = otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(hung),
			otelsetup.WithShutdownTimeout(100*time.Millisecond),
			otelsetup.WithBatchOptions(sdktrace.WithMaxQueueSize(64), sdktrace.WithMaxExportBatchSize(8)))
		if err != nil {
			t.Error(err)
		}
	})
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	const requests = 2000 // far more spans than the queue holds
	within(t, "2000 requests", func() {
		for i := 0; i < requests; i++ {
			fivePhases(in)
		}
	})
	var err error
	within(t, "Shutdown", func() { err = tel.Shutdown(context.Background()) })
	var loss *otelsetup.LossError
	if !errors.As(err, &loss) || !errors.Is(err, otelsetup.ErrSpansLost) {
		t.Fatalf("Shutdown = %v, want the loss reported", err)
	}
	if st := tel.ExportStats(); st.Ended != requests*6 || st.Lost() != st.Ended-st.Exported || st.Exported != 0 {
		t.Errorf("export stats %+v: every span of every request must be accounted for", st)
	}
}

func TestSetupNeverDialsTheCollector(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			clearOTelEnv(t)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var accepted atomic.Int32
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					accepted.Add(1)
					defer c.Close() // hold it open, answering nothing
				}
			}()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+l.Addr().String())
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics(),
				otelsetup.WithShutdownTimeout(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if n := accepted.Load(); n != 0 {
				t.Errorf("Setup opened %d connections to the collector", n)
			}
			within(t, "Shutdown", func() { _ = tel.Shutdown(context.Background()) })
		})
	}
}

func TestShutdownIsIdempotentAndNilSafe(t *testing.T) {
	clearOTelEnv(t)
	tel, _ := setupWithMemory(t)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var nilTel *otelsetup.Telemetry
	if err := nilTel.Shutdown(context.Background()); err != nil || nilTel.Enabled() || nilTel.Exporter() != "none" {
		t.Error("a nil Telemetry must be a safe no-op")
	}
	nilTel.TracerProvider().Tracer("x")
}

// TestSetupInstallsGlobals runs in a child process: installing the global
// provider cannot be undone, and other tests need the global untouched.
func TestSetupInstallsGlobals(t *testing.T) {
	if os.Getenv("OTELOMNI_CHILD") != t.Name() {
		runChild(t)
		return
	}
	clearOTelEnv(t)
	exp := newKept()
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithSpanExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != tel.TracerProvider() {
		t.Fatal("the global provider is not Setup's")
	}
	if f := otel.GetTextMapPropagator().Fields(); !strings.Contains(strings.Join(f, ","), "traceparent") {
		t.Fatalf("global propagator fields %v lack traceparent", f)
	}
	in := otelomni.New() // follows the global
	_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "g"})
	req.StartPhase(context.Background(), spans.Exec).End(nil)
	req.End(nil)
	_ = tel.Shutdown(context.Background())
	if n := len(exp.GetSpans()); n != 2 {
		t.Fatalf("%d spans exported through the global provider, want 2", n)
	}
}

func TestSetupMetricsFromEnvironment(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"none", map[string]string{"OTEL_METRICS_EXPORTER": "none", "OTEL_TRACES_EXPORTER": "none"}, "none"},
		{"console", map[string]string{"OTEL_METRICS_EXPORTER": "console", "OTEL_TRACES_EXPORTER": "none"}, "console"},
		{"prometheus", map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_TRACES_EXPORTER": "none",
			"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1", "OTEL_EXPORTER_PROMETHEUS_PORT": strings.Split(closedPort(t), ":")[1]},
			"prometheus on http://127.0.0.1:"},
		{"fallback, nothing set", map[string]string{}, "none"},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_METRICS_EXPORTER": "console"}, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearOTelEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			if !strings.HasPrefix(tel.MetricsExporter(), tc.want) {
				t.Errorf("MetricsExporter %q, want %q", tel.MetricsExporter(), tc.want)
			}
			_, isNoop := tel.MeterProvider().(metricnoop.MeterProvider)
			if isNoop != (tc.want == "none") {
				t.Errorf("meter provider %T for %q", tel.MeterProvider(), tc.want)
			}
		})
	}
}

func TestSetupWithMetricReaderRecordsThroughIt(t *testing.T) {
	clearOTelEnv(t)
	reader := sdkmetric.NewManualReader()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(nil), otelsetup.WithMetricReader(reader))
	if err != nil {
		t.Fatal(err)
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(tel.MeterProvider()))
	fivePhases(in)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) == 0 {
		t.Fatal("nothing recorded through the reader")
	}
	if v, ok := rm.Resource.Set().Value("service.instance.id"); !ok || v.AsString() == "" {
		t.Error("metrics carry the same resource as spans")
	}
	_ = tel.Shutdown(context.Background())
}

// fivePhases runs one request with five phases.
func fivePhases(in *otelomni.Instrumenter) {
	ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m"})
	req.StartPhase(context.Background(), spans.Preprocess).End(nil)
	exec := req.StartPhase(context.Background(), spans.Exec)
	req.StartPhase(context.Background(), spans.QueueWait).End(nil)
	exec.End(nil)
	req.StartPhase(context.Background(), spans.OutputReadyWait).End(nil)
	req.StartPhase(ctx, spans.Postprocess).End(nil)
	req.End(nil)
}

// runChild runs the calling test again in a child process, with
// OTELOMNI_CHILD set to its name: for a test that changes the globals.
func runChild(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), "OTELOMNI_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// heap returns the bytes live on the heap after a collection.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The memory formula of docs/reliability.md: while the collector hangs,
// the export path holds at most Q + B spans (the queue and the batch being
// exported), each at most spanBytes plus its strings, each string at most
// its bound.
const spanBytes = 2 << 10

// TestMemoryStaysBoundedWhileTheCollectorHangs: requests with 64 KiB ids,
// four times more spans than the queue holds, while the exporter hangs:
// the path holds Q + B spans exactly, the rest are counted as dropped, and
// the heap holds at most (Q + B) x (spanBytes + 3 x 1024): otelomni cuts
// each of a request span's three strings here (id, model, status) to 1024
// bytes and copies it. At two queue sizes.
func TestMemoryStaysBoundedWhileTheCollectorHangs(t *testing.T) {
	for _, queue := range []int{256, 2048} {
		t.Run(strconv.Itoa(queue), func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", strconv.Itoa(queue))
			hung := hungExporter{release: make(chan struct{})}
			var once sync.Once
			release := func() { once.Do(func() { close(hung.release) }) }
			t.Cleanup(release)
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(hung),
				otelsetup.WithShutdownTimeout(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
			before := heap()
			requests := 2 * queue // two spans each
			for i := 0; i < requests; i++ {
				id := strings.Repeat(string(rune('a'+i%26)), 64<<10)
				ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: id, Model: id})
				req.StartPhase(ctx, spans.Exec).End(nil)
				req.End(errors.New(id))
			}
			held := int64(heap()) - int64(before)
			batch := min(512, queue)
			bound := int64(queue+batch) * (spanBytes + 3*1024)
			t.Logf("queue %d: held %.1f MiB for %d requests with 64 KiB ids (%.0f bytes a span held); the bound is %.1f MiB",
				queue, float64(held)/(1<<20), requests, float64(held)/float64(queue+batch), float64(bound)/(1<<20))
			if held > bound {
				t.Errorf("held %d bytes while the collector hung; the documented bound is %d", held, bound)
			}
			if st := tel.ExportStats(); st.Pending != st.Ended || st.Ended != uint64(2*requests) {
				t.Errorf("stats %+v: every span pending (held or dropped)", st)
			}
			// Once the collector answers (here: it fails), what was held
			// reaches it, exactly Q + B spans; the rest were dropped.
			release()
			_ = tel.Shutdown(context.Background())
			if st := tel.ExportStats(); st.Failed != uint64(queue+batch) || st.Pending != uint64(2*requests-queue-batch) {
				t.Errorf("stats %+v: want %d held, then failed, and the rest dropped", st, queue+batch)
			}
		})
	}
}

// TestMemoryStaysBoundedWhateverTheInstrumentation: another
// instrumentation's spans with 64 KiB values, which the SDK cuts to the
// value limit without copying: the queue holds copies of the cut values,
// never the originals.
func TestMemoryStaysBoundedWhateverTheInstrumentation(t *testing.T) {
	for _, queue := range []int{256, 2048} {
		t.Run(strconv.Itoa(queue), func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", strconv.Itoa(queue))
			hung := hungExporter{release: make(chan struct{})}
			t.Cleanup(func() { close(hung.release) })
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(hung),
				otelsetup.WithShutdownTimeout(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			tr := tel.TracerProvider().Tracer("other")
			before := heap()
			for i := 0; i < 2*queue; i++ {
				v := strings.Repeat(string(rune('a'+i%26)), 64<<10)
				_, s := tr.Start(context.Background(), "op", trace.WithAttributes(attribute.String("prompt", v),
					attribute.StringSlice("images", []string{v})))
				s.End()
			}
			held := int64(heap()) - int64(before)
			batch := min(512, queue)
			bound := int64(queue+batch) * (spanBytes + 2*otelsetup.DefaultAttributeValueLengthLimit)
			t.Logf("queue %d: held %.1f MiB; the bound is %.1f MiB", queue, float64(held)/(1<<20), float64(bound)/(1<<20))
			if held > bound {
				t.Errorf("held %d bytes while the collector hung; the documented bound is %d", held, bound)
			}
			_ = tel.Shutdown(context.Background())
		})
	}
}

// logRecordBytes is what the SDK's log queue costs a slot, allocated when
// Setup runs: a record (584 bytes) in a ring node, rounded to its size
// class.
const logRecordBytes = 640

// TestLogQueueMemoryIsItsFormula: the SDK allocates the log queue whole
// when Setup runs, Q x 640 bytes plus a batch buffer of B records; with
// the collector hung, the queue fills with records whose every string is
// cut to its bound and copied, never holding the original: the heap holds
// at most (Q + 2B) x (640 + V + 1 KiB), the batch counted twice for the
// request being sent. At two queue sizes.
func TestLogQueueMemoryIsItsFormula(t *testing.T) {
	for _, queue := range []int{512, 4096} {
		t.Run(strconv.Itoa(queue), func(t *testing.T) {
			clearOTelEnv(t)
			hung := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-hung:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(hung) })
			t.Setenv("OTEL_LOGS_EXPORTER", "otlp")
			t.Setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", srv.URL+"/v1/logs")
			t.Setenv("OTEL_BLRP_MAX_QUEUE_SIZE", strconv.Itoa(queue))
			const batch = 512
			// What Setup allocates, whatever an earlier test's goroutines
			// free meanwhile.
			heap()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			before := m.TotalAlloc
			tel := setupGlobalLogs(t, otelsetup.WithFallbackExporter(nil), otelsetup.WithShutdownTimeout(100*time.Millisecond))
			runtime.ReadMemStats(&m)
			atSetup := int64(m.TotalAlloc - before)
			queueBytes := int64(queue)*logRecordBytes + batch*584
			t.Logf("queue %d: Setup allocated %.1f MiB; the queue's formula %.1f MiB", queue, float64(atSetup)/(1<<20), float64(queueBytes)/(1<<20))
			// The batch buffer is allocated by the processor's goroutine,
			// maybe later: the queue alone is the lower bound.
			if atSetup < int64(queue)*logRecordBytes*9/10 || atSetup > queueBytes+2<<20 {
				t.Errorf("Setup allocated %d bytes, want the queue's %d (plus at most 2 MiB)", atSetup, queueBytes)
			}
			log := slog.New(otelslog.NewHandler("engine"))
			held0 := heap()
			for i := 0; i < 2*queue; i++ {
				v := strings.Repeat(string(rune('a'+i%26)), 64<<10)
				log.Info("request done", "prompt", v)
			}
			held := int64(heap()) - int64(held0)
			bound := int64(queue+2*batch) * (logRecordBytes + otelsetup.DefaultAttributeValueLengthLimit + 1<<10)
			t.Logf("queue %d: %d records of 64 KiB values held %.1f MiB; the bound is %.1f MiB", queue, 2*queue,
				float64(held)/(1<<20), float64(bound)/(1<<20))
			if held > bound {
				t.Errorf("held %d bytes while the collector hung; the documented bound is %d", held, bound)
			}
			_ = tel.Shutdown(context.Background())
		})
	}
}

// TestShutdownFreesThePrometheusPort: once Shutdown returns, the port the
// Prometheus exporter listened on is free again, even when its server's
// goroutine had not begun to serve, so that a Setup that follows (a
// restart in the same process, the next test) can bind it.
func TestShutdownFreesThePrometheusPort(t *testing.T) {
	clearOTelEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", port)
	for i := range 200 {
		tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(nil))
		if err != nil || tel.MetricsExporter() != "prometheus on http://127.0.0.1:"+port+"/metrics" {
			t.Fatalf("round %d: Setup = %v, metrics to %s", i, err, tel.MetricsExporter())
		}
		_ = tel.Shutdown(context.Background())
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Fatalf("round %d: the port is still bound after Shutdown: %v", i, err)
		}
		l.Close()
	}
}
