// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// Fault tests: the engine's requests never wait on the collector, and every
// span is either in the collector or counted as lost.

// No test here bounds a time: "requests never wait on the collector" is
// shown by construction, with a collector that does not answer until the
// requests are done. Had a request waited on it, the requests would never
// finish, and the failure deadline (minutes) would fail the test.
const failureDeadline = 3 * time.Minute

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
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", strconv.Itoa(queue))
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", strconv.Itoa(batch))
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithShutdownTimeout(shutdown))
	if err != nil {
		t.Fatal(err)
	}
	return tel, otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
}

// oneRequest makes one request of six spans, as fast as the SDK allows.
func oneRequest(in *otelomni.Instrumenter, id string) {
	ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: id, Model: "m"})
	req.StartPhase(ctx, spans.Preprocess).End(nil)
	exec := req.StartPhase(ctx, spans.Exec)
	req.StartPhase(ctx, spans.QueueWait).End(nil)
	exec.End(nil)
	req.StartPhase(ctx, spans.OutputReadyWait).End(nil)
	req.StartPhase(ctx, spans.Postprocess).End(nil)
	req.End(nil)
}

// burst makes n requests, and fails t if they do not all finish before the
// failure deadline.
func burst(t *testing.T, in *otelomni.Instrumenter, prefix string, n int) {
	t.Helper()
	within(t, fmt.Sprintf("%d requests", n), func() {
		for i := 0; i < n; i++ {
			oneRequest(in, prefix+strconv.Itoa(i))
		}
	})
}

// within fails t if f does not return before the failure deadline.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(failureDeadline):
		t.Fatalf("%s did not finish while the collector did not answer: they wait on it", what)
	}
}

// hungCollector accepts connections and answers nothing until release is
// closed, as a collector that hung.
func hungCollector(t *testing.T) (addr string, release func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				<-done
				c.Close()
			}()
		}
	}()
	var once sync.Once
	release = func() { once.Do(func() { close(done); l.Close() }) }
	t.Cleanup(release)
	return l.Addr().String(), release
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
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release // answers only once every request is done
		received.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer slow.Close()
	tel, in := faultSetup(t, slow.URL, "http/protobuf", 256, 64, 30*time.Second)
	for round := 0; round < 5; round++ {
		burst(t, in, "slow-"+strconv.Itoa(round)+"-", 100)
	}
	close(release)
	_ = tel.Shutdown(context.Background())
	st := tel.ExportStats()
	checkAccounting(t, st, 500*spansPerRequest)
	t.Logf("ended %d, exported %d, failed %d, dropped %d; %d export requests reached the slow collector", st.Ended, st.Exported, st.Failed, st.Pending, received.Load())
	if received.Load() == 0 || st.Exported == 0 {
		t.Error("the slow collector should still receive some batches")
	}
}

func TestShutdownWithHungCollectorReturnsAndCountsTheLoss(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			addr, _ := hungCollector(t)
			tel, in := faultSetup(t, "http://"+addr, proto, 2048, 512, 2*time.Second)
			burst(t, in, "hung-", 300)
			var err error
			within(t, "Shutdown", func() { err = tel.Shutdown(context.Background()) })
			if !errors.Is(err, otelsetup.ErrSpansLost) {
				t.Errorf("Shutdown = %v, want the loss reported", err)
			}
			st := tel.ExportStats()
			checkAccounting(t, st, 300*spansPerRequest)
			if st.Exported != 0 || st.Lost() != st.Ended {
				t.Errorf("a hung collector received nothing: exported %d, lost %d of %d", st.Exported, st.Lost(), st.Ended)
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
