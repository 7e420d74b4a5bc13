// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// copyFixture copies one of the import's fixtures into dir, so that its
// modification time (a summary's default start) is now.
func copyFixture(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "omnitrace", "internal", "omnirecord", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// importInto runs omnitrace import into j as service and returns its exit
// status and output.
func importInto(ctx context.Context, t *testing.T, j *jaeger.Jaeger, service string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin["omnitrace"], append([]string{"import"}, args...)...)
	cmd.Env = cleanEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint("grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_SERVICE_NAME="+service)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// window is a search window wide enough for the fixtures' times.
func window() (time.Time, time.Time) {
	return time.Now().Add(-400 * 24 * time.Hour), time.Now().Add(time.Hour)
}

// perRequest returns each request's trace, by request id and source,
// failing on a request in two traces. The summary fixture holds request 7
// of two runs, which are two requests: "7 summary" is the larger one.
func perRequest(t *testing.T, traces map[string][]traceview.Span) map[string][]traceview.Span {
	t.Helper()
	out := map[string][]traceview.Span{}
	for _, tr := range traces {
		for _, s := range tr {
			if s.Name != spans.RequestSpanName {
				continue
			}
			key := s.Str(string(attrs.RequestIDKey)) + " " + s.Str("omni.import.source")
			if prev, dup := out[key]; dup {
				if key != "7 summary" {
					t.Errorf("request %s is in two traces", key)
				}
				if len(prev) > len(tr) {
					continue
				}
			}
			out[key] = tr
		}
	}
	return out
}

func spanCount(traces map[string][]traceview.Span) int {
	n := 0
	for _, tr := range traces {
		n += len(tr)
	}
	return n
}

// TestOmnitraceFormsIntoJaegerTwice imports vLLM-Omni's summary dict and
// log of one run together, as the docs show, into a real Jaeger: each
// request is one trace with its stages, transfers and measured phases,
// both forms merged; importing both again leaves the traces and spans
// Jaeger returns unchanged, since every span comes out the same.
func TestOmnitraceFormsIntoJaegerTwice(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	summary, log := copyFixture(t, dir, "summary.json"), copyFixture(t, dir, "vllm.log")
	const service = "e2e-omnitrace-forms"
	// The log's last line is cut off: reported, and the rest imported:
	// request 7 and chatcmpl-b19e of both forms, the log's third request,
	// and the summary's second run (which reuses id 7).
	if code, out := importInto(ctx, t, j, service, summary, log); code != 1 || !strings.Contains(out, "imported 4, skipped 1") {
		t.Fatalf("import: exit %d\n%s", code, out)
	}
	from, to := window()
	traces, err := j.WaitTraces(ctx, service, from, to, 4, time.Minute)
	if err != nil || len(traces) != 4 {
		t.Fatalf("%d traces in Jaeger, want 4: %v", len(traces), err)
	}
	reqs := perRequest(t, traces)
	for key, want := range map[string]map[string]int{
		"7 summary+log": {spans.StageSpanName: 2, plan.TransferSpanName: 1, spans.Exec.SpanName(): 1, spans.Forward.SpanName(): 1,
			spans.KVRecv.SpanName(): 1, spans.VAEDecode.SpanName(): 1, spans.Postprocess.SpanName(): 1,
			plan.TransferTx.SpanName(): 1, plan.TransferRxDecode.SpanName(): 1, spans.QueueWait.SpanName(): 1,
			spans.Preprocess.SpanName(): 0, plan.TransferInFlight.SpanName(): 0},
		"chatcmpl-b19e summary+log": {spans.StageSpanName: 0, spans.RequestSpanName: 1},
		"7 summary":                 {spans.StageSpanName: 0, spans.RequestSpanName: 1},
		"with space id log":         {spans.RequestSpanName: 1},
	} {
		tr, ok := reqs[key]
		if !ok {
			t.Errorf("no trace of %s among %d", key, len(reqs))
			continue
		}
		got := map[string]int{}
		for _, s := range tr {
			got[s.Name]++
			if s.End.Before(s.Start) {
				t.Errorf("%s: %s ends before it starts", key, s.Name)
			}
		}
		for name, n := range want {
			if got[name] != n {
				t.Errorf("%s: %d %s spans, want %d", key, got[name], name, n)
			}
		}
	}
	spansBefore := spanCount(traces)

	// Again, in the other order, then a marker request: once the marker
	// is in, the repeat is.
	importInto(ctx, t, j, service, log, summary)
	marker := filepath.Join(dir, "marker.jsonl")
	now := float64(time.Now().Add(-time.Minute).UnixNano()) / 1e9
	line := fmt.Sprintf(`{"request_id": "marker", "arrival_time": %.6f, "stages": [{"stage_id": 0, "submit_time": %.6f, "diffusion_engine_exec_time_ms": 5}]}`, now, now)
	if err := os.WriteFile(marker, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := importInto(ctx, t, j, service, marker); code != 0 {
		t.Fatalf("marker: exit %d\n%s", code, out)
	}
	traces, err = j.WaitTraces(ctx, service, from, to, 5, time.Minute)
	if err != nil || len(traces) != 5 {
		t.Fatalf("%d traces after the second import and the marker, want 5: %v", len(traces), err)
	}
	markerSpans := len(perRequest(t, traces)["marker jsonl"])
	if got := spanCount(traces) - markerSpans; got != spansBefore {
		t.Errorf("%d spans after importing the same files again, want %d", got, spansBefore)
	}
}

// TestOmnitraceFollowIntoJaeger follows a log appended in pieces (lines
// cut in two) into a real Jaeger: every request is exported once.
func TestOmnitraceFollowIntoJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "omnitrace", "internal", "omnirecord", "testdata", "vllm.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "vllm.log")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const service = "e2e-omnitrace-follow"
	cmd := exec.CommandContext(ctx, bin["omnitrace"], "import", "-follow", "-poll", "20ms", "-idle", "500ms", log)
	cmd.Env = cleanEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint("grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME="+service, "OTEL_BSP_SCHEDULE_DELAY=200")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for data := src; len(data) > 0; {
		n := min(83, len(data))
		if _, err := f.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
		time.Sleep(2 * time.Millisecond)
	}
	f.Close()
	from, to := window()
	traces, err := j.WaitTraces(ctx, service, from, to, 3, 2*time.Minute)
	if err != nil || len(traces) != 3 {
		t.Fatalf("%d traces while following, want 3: %v\n%s", len(traces), err, out.String())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if !strings.Contains(out.String(), "imported 3, skipped 0") {
		t.Errorf("follow's report:\n%s", out.String())
	}
	reqs := perRequest(t, traces)
	for _, id := range []string{"7 log", "chatcmpl-b19e log", "with space id log"} {
		if _, ok := reqs[id]; !ok {
			t.Errorf("request %s not exported (%d traces)", id, len(reqs))
		}
	}
}

// TestOmnitraceOutFileIsOTLPJSON posts what import -out writes to
// Jaeger's OTLP/HTTP receiver as application/json: a reader other than our
// own takes it, hex ids and all.
func TestOmnitraceOutFileIsOTLPJSON(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	cmd := exec.CommandContext(ctx, bin["omnitrace"], "import", "-out", out, copyFixture(t, dir, "summary.json"))
	cmd.Env = cleanEnv("OTEL_SERVICE_NAME=e2e-omnitrace-file")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		resp, err := http.Post("http://"+j.OTLPHTTP+"/v1/traces", "application/json", bytes.NewReader(sc.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("Jaeger refused the file's document: HTTP %d", resp.StatusCode)
		}
	}
	from, to := window()
	traces, err := j.WaitTraces(ctx, "e2e-omnitrace-file", from, to, 3, time.Minute)
	if err != nil || len(traces) != 3 {
		t.Fatalf("%d traces, want 3: %v", len(traces), err)
	}
	if tr := perRequest(t, traces)["chatcmpl-b19e summary"]; len(tr) != 1 {
		t.Errorf("the posted file's request: %d spans", len(tr))
	}
}
