package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/jaeger"
	"github.com/otelomni/otelomni/internal/jaeger/jaegertest"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// Fault tests: the engine's requests never wait on the collector, and every
// span is either in the collector or counted as lost.

// maxInstrumentation bounds the time one request's instrumentation may take
// while the collector is down or slow: far above the benchmark figure (tens
// of microseconds) so the test cannot flake, far below any network timeout.
const maxInstrumentation = 10 * time.Millisecond

const spansPerRequest = 6

// faultSetup points the SDK at endpoint with a small queue, so that a test
// overflows it quickly.
func faultSetup(t *testing.T, endpoint, protocol string, queue, batch int, shutdown time.Duration) (*otelsetup.Telemetry, *otelomni.Instrumenter) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
	t.Setenv("OTEL_SERVICE_NAME", "e2e-faults")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithShutdownTimeout(shutdown),
		otelsetup.WithBatchOptions(sdktrace.WithMaxQueueSize(queue), sdktrace.WithMaxExportBatchSize(batch),
			sdktrace.WithBatchTimeout(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	return tel, otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
}

// oneRequest makes one request of six spans, as fast as the SDK allows, and
// returns the time its instrumentation took.
func oneRequest(in *otelomni.Instrumenter, id string) time.Duration {
	t0 := time.Now()
	_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: id, Model: "m"})
	req.StartPhase(context.Background(), spans.Preprocess).End()
	exec := req.StartPhase(context.Background(), spans.Exec)
	req.StartPhase(context.Background(), spans.QueueWait).End()
	exec.End()
	req.StartPhase(context.Background(), spans.OutputReadyWait).End()
	req.StartPhase(context.Background(), spans.Postprocess).End()
	req.End(nil)
	return time.Since(t0)
}

// burst makes n requests and fails t if they waited on the exporter: the
// p99 of their instrumentation time must stay under maxInstrumentation (the
// p99, not the max: a pause of the whole machine, such as another test
// package or the race detector's collector, is not the SDK waiting).
func burst(t *testing.T, in *otelomni.Instrumenter, prefix string, n int) {
	t.Helper()
	took := make([]time.Duration, n)
	for i := range took {
		took[i] = oneRequest(in, prefix+strconv.Itoa(i))
	}
	slices.Sort(took)
	if p99 := took[n*99/100]; p99 > maxInstrumentation {
		t.Errorf("p99 of a request's instrumentation was %v while the collector was down or slow (max %v)", p99, took[n-1])
	}
}

// jaegerSpans counts the spans of service that Jaeger holds, waiting until
// the count stops growing.
func jaegerSpans(t *testing.T, j *jaeger.Jaeger, want int) int {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	last := -1
	for {
		ss, err := j.Client().Search(ctx, "e2e-faults", time.Now().Add(-time.Hour), time.Now().Add(time.Minute), 100000)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) == want || (len(ss) == last && len(ss) > 0) || time.Now().After(deadline) {
			ids := map[string]int{}
			for _, s := range ss {
				ids[s.SpanID]++
			}
			if len(ids) != len(ss) {
				t.Logf("Jaeger returned %d spans with %d distinct ids", len(ss), len(ids))
			}
			return len(ids)
		}
		last = len(ss)
		time.Sleep(500 * time.Millisecond)
	}
}

// checkAccounting: every span ended is exported, failed or dropped.
func checkAccounting(t *testing.T, st otelsetup.ExportStats, ended int) {
	t.Helper()
	if st.Ended != uint64(ended) {
		t.Errorf("%d spans ended, want %d", st.Ended, ended)
	}
	if st.Exported+st.Failed+st.Pending != st.Ended {
		t.Errorf("accounting: exported %d + failed %d + dropped %d != ended %d", st.Exported, st.Failed, st.Pending, st.Ended)
	}
}

func TestCollectorDownAtStartComesUpLater(t *testing.T) {
	bin := jaegertest.Binary(t)
	ports, err := jaeger.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	const queue, batch = 256, 64
	tel, in := faultSetup(t, ports.OTLPEndpoint("grpc"), "grpc", queue, batch, 30*time.Second)
	const requests = 200 // 1200 spans: far more than the queue holds
	burst(t, in, "down-", requests)
	time.Sleep(300 * time.Millisecond) // the first batch is now stuck retrying

	j, err := jaeger.StartOn(context.Background(), bin, ports)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	// The exporter retries every few seconds: wait for the queue to drain.
	deadline := time.Now().Add(40 * time.Second)
	for tel.ExportStats().Exported+tel.ExportStats().Failed < queue && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Logf("shutdown: %v", err)
	}
	st := tel.ExportStats()
	checkAccounting(t, st, requests*spansPerRequest)
	t.Logf("ended %d, exported %d, failed %d, dropped %d", st.Ended, st.Exported, st.Failed, st.Pending)
	if st.Exported+st.Failed < queue || st.Exported+st.Failed > queue+2*batch {
		t.Errorf("exported %d + failed %d: want the queue (%d) and at most two batches", st.Exported, st.Failed, queue)
	}
	if st.Pending == 0 {
		t.Error("what exceeded the queue must be counted as dropped")
	}
	if got := jaegerSpans(t, j, int(st.Exported)); got != int(st.Exported) {
		t.Errorf("Jaeger holds %d spans, the exporter says %d were exported", got, st.Exported)
	}
}

func TestCollectorDiesMidRunAndRestarts(t *testing.T) {
	j := jaegertest.Start(t)
	const queue, batch = 256, 64
	tel, in := faultSetup(t, j.OTLPEndpoint("grpc"), "grpc", queue, batch, 30*time.Second)
	// Fewer spans than the queue holds: all of them reach the collector.
	burst(t, in, "before-", 30)
	deadline := time.Now().Add(10 * time.Second)
	for tel.ExportStats().Exported < 30*spansPerRequest && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	before := tel.ExportStats().Exported
	if before != 30*spansPerRequest {
		t.Fatalf("%d spans exported while the collector was up, want %d", before, 30*spansPerRequest)
	}
	ports := j.Ports()
	j.Kill() // its in-memory storage dies with it
	burst(t, in, "down-", 200)
	time.Sleep(300 * time.Millisecond)
	j2 := jaegertest.StartOn(t, ports)
	burst(t, in, "after-", 20)
	// The stuck batch is retried; then the queue drains into the new one.
	deadline = time.Now().Add(40 * time.Second)
	for st := tel.ExportStats(); st.Exported+st.Failed < before+queue && time.Now().Before(deadline); st = tel.ExportStats() {
		time.Sleep(200 * time.Millisecond)
	}
	_ = tel.Shutdown(context.Background())
	st := tel.ExportStats()
	checkAccounting(t, st, 250*spansPerRequest)
	t.Logf("ended %d, exported %d, failed %d, dropped %d", st.Ended, st.Exported, st.Failed, st.Pending)
	if st.Pending == 0 {
		t.Error("spans beyond the queue while the collector was dead must be counted as dropped")
	}
	if got := jaegerSpans(t, j2, int(st.Exported-before)); got != int(st.Exported-before) {
		t.Errorf("the restarted Jaeger holds %d spans, the exporter says %d were exported to it", got, st.Exported-before)
	}
}

func TestSlowCollectorNeverHoldsRequests(t *testing.T) {
	var received atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(2 * time.Second)
		received.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer slow.Close()
	tel, in := faultSetup(t, slow.URL, "http/protobuf", 256, 64, 10*time.Second)
	for round := 0; round < 5; round++ {
		burst(t, in, "slow-"+strconv.Itoa(round)+"-", 100)
		time.Sleep(200 * time.Millisecond)
	}
	_ = tel.Shutdown(context.Background())
	st := tel.ExportStats()
	checkAccounting(t, st, 500*spansPerRequest)
	t.Logf("ended %d, exported %d, failed %d, dropped %d; %d export requests reached the slow collector", st.Ended, st.Exported, st.Failed, st.Pending, received.Load())
	if received.Load() == 0 || st.Exported == 0 {
		t.Error("the slow collector should still receive some batches")
	}
}

func TestShutdownWithDeadCollectorReturnsWithinItsDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			const deadline = 2 * time.Second
			tel, in := faultSetup(t, "http://"+addr, proto, 2048, 512, deadline)
			burst(t, in, "dead-", 300)
			t0 := time.Now()
			_ = tel.Shutdown(context.Background())
			d := time.Since(t0)
			if d > deadline+time.Second {
				t.Errorf("Shutdown took %v; its deadline is %v", d, deadline)
			}
			t.Logf("Shutdown returned in %v (deadline %v)", d.Round(time.Millisecond), deadline)
			st := tel.ExportStats()
			checkAccounting(t, st, 300*spansPerRequest)
			if st.Exported != 0 || st.Lost() != st.Ended {
				t.Errorf("a dead collector received nothing: exported %d, lost %d of %d", st.Exported, st.Lost(), st.Ended)
			}
		})
	}
}

func TestMemoryStaysBoundedWhileCollectorIsDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const queue, batch = 2048, 512 // the SDK's defaults
	tel, in := faultSetup(t, "http://"+addr, "grpc", queue, batch, 2*time.Second)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	burst(t, in, "warm-", 2000) // fill the queue
	base := heap()
	const requests = 30000 // 180 000 spans while the collector is down
	burst(t, in, "long-", requests)
	grown := int64(heap()) - int64(base)
	// The queue and the batch in flight hold at most queue+batch span
	// snapshots; one is well under 4 KiB here (six attributes at most).
	// Everything beyond them is dropped, so growth is bounded by that,
	// whatever the outage's length.
	bound := int64((queue + batch) * 4 << 10)
	t.Logf("heap grew by %d KiB over %d requests (bound %d KiB); %+v", grown>>10, requests, bound>>10, tel.ExportStats())
	if grown > bound {
		t.Errorf("heap grew by %d bytes while the collector was down; bound %d", grown, bound)
	}
	_ = tel.Shutdown(context.Background())
	if st := tel.ExportStats(); st.Pending < uint64(requests*spansPerRequest-queue-batch) {
		t.Errorf("dropped %d, want at least %d", st.Pending, requests*spansPerRequest-queue-batch)
	}
}
