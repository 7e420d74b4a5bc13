// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// multiStageParent is the multi-stage tree of docs/multi-stage.md: span name -> its
// parent's name. The diffusion phases hang under the stage span.
var multiStageParent = map[string]string{
	"omni.request":                     "",
	"omni.stage":                       "omni.request",
	"omni.transfer":                    "omni.request",
	"omni.transfer.tx":                 "omni.transfer",
	"omni.transfer.in_flight":          "omni.transfer",
	"omni.transfer.rx_decode":          "omni.transfer",
	"omni.llm.queue":                   "omni.stage",
	"omni.llm.prefill":                 "omni.stage",
	"omni.llm.decode":                  "omni.stage",
	"omni.output":                      "omni.stage",
	"omni.diffusion.queue_wait":        "omni.stage",
	"omni.diffusion.exec":              "omni.stage",
	"omni.diffusion.kv_recv":           "omni.diffusion.exec",
	"omni.diffusion.forward":           "omni.diffusion.exec",
	"omni.diffusion.vae_decode":        "omni.diffusion.exec",
	"omni.diffusion.postprocess":       "omni.stage",
	"omni.diffusion.preprocess":        "omni.stage",
	"omni.diffusion.output_ready_wait": "omni.stage",
}

func TestMultiStagePipelinesAreOneTraceAcrossProcesses(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const requests = 8
	service := "e2e-omni"
	manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
	from := time.Now().Add(-time.Second)
	cmd := exec.CommandContext(ctx, bin["omni"], "-requests", strconv.Itoa(requests), "-manifest", manifest)
	cmd.Env = cleanEnv(
		"OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint("http/protobuf"),
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME="+service)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("omni example: %v\n%s", err, out)
	}
	want := map[string]sent{}
	f, err := os.Open(manifest)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m struct{ ID, Pipeline, Special string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		want[m.ID] = sent{m.Pipeline, m.Special}
	}
	f.Close()
	if len(want) != requests {
		t.Fatalf("manifest: %d requests", len(want))
	}

	// Spans from several processes arrive at different times: wait until
	// every trace has all of its spans, or the deadline passes.
	var traces map[string][]traceview.Span
	deadline := time.Now().Add(45 * time.Second)
	for {
		traces, err = j.WaitTraces(ctx, service, from, time.Now().Add(time.Minute), requests, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if complete(traces, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(traces) != requests {
		t.Fatalf("%d traces, want %d\n%s", len(traces), requests, out)
	}
	seen := map[string]bool{}
	for _, tr := range traces {
		roots, _ := traceview.Trees(tr)
		if len(roots) != 1 || roots[0].Span.Name != spans.RequestSpanName {
			t.Errorf("a trace has %d roots (want one omni.request): spans from a process did not join the trace", len(roots))
			continue
		}
		root := roots[0].Span
		id := root.Str(string(attrs.RequestIDKey))
		s, ok := want[id]
		if !ok {
			t.Errorf("unknown request id %q", id)
			continue
		}
		seen[id] = true
		pids := map[int64]bool{}
		for i := range tr {
			pids[tr[i].PID] = true
		}
		counts := checkTree(t, id, tr, multiStageParent)
		if len(pids) < 3 {
			t.Errorf("%s: spans from %d process ids, want at least 3", id, len(pids))
		}
		for name, n := range pipeline.Expect(s.Pipeline, pipeline.Special(s.Special)) {
			if counts[name] != n {
				t.Errorf("%s (%s %s): %d %s spans, want %d", id, s.Pipeline, s.Special, counts[name], name, n)
			}
		}
	}
	if len(seen) != requests {
		t.Errorf("%d distinct requests traced, want %d", len(seen), requests)
	}
	if !strings.Contains(string(out), "served 8 requests (0 failed)") {
		t.Errorf("example output:\n%s", out)
	}
}

type sent struct{ Pipeline, Special string }

// complete reports whether every request's trace has all its spans.
func complete(traces map[string][]traceview.Span, want map[string]sent) bool {
	if len(traces) < len(want) {
		return false
	}
	for _, tr := range traces {
		var id string
		for _, s := range tr {
			if s.Name == spans.RequestSpanName {
				id = s.Str(string(attrs.RequestIDKey))
			}
		}
		w, ok := want[id]
		if !ok {
			return false
		}
		total := 0
		for _, n := range pipeline.Expect(w.Pipeline, pipeline.Special(w.Special)) {
			total += n
		}
		if len(tr) < total {
			return false
		}
	}
	return true
}
