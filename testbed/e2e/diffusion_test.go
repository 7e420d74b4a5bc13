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

	"github.com/otelomni/otelomni/internal/plan"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/codes"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/examples/diffusion/engine"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// singleStageParent is the tree of docs/phases.md for a single-stage diffusion
// pipeline: span name -> its parent's name.
var singleStageParent = map[string]string{
	"omni.request":                     "",
	"omni.diffusion.queue_wait":        "omni.request",
	"omni.diffusion.preprocess":        "omni.request",
	"omni.diffusion.exec":              "omni.request",
	"omni.diffusion.kv_recv":           "omni.diffusion.exec",
	"omni.diffusion.forward":           "omni.diffusion.exec",
	"omni.diffusion.denoise_step":      "omni.diffusion.forward",
	"omni.diffusion.vae_decode":        "omni.diffusion.exec",
	"omni.diffusion.output_ready_wait": "omni.request",
	"omni.diffusion.postprocess":       "omni.request",
}

func TestDiffusionDemoTracesLandInJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	// Each scenario three times, so every branch shows more than once.
	requests := 3 * len(engine.Scenarios)
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			service := "e2e-diffusion-" + strings.ReplaceAll(proto, "/", "-")
			manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
			from := time.Now().Add(-time.Second)
			cmd := exec.CommandContext(ctx, bin["diffusion"], "-requests", itoa(requests), "-concurrency", "4",
				"-seed", "7", "-scale", "0.5", "-manifest", manifest, "-quiet")
			cmd.Env = cleanEnv(
				"OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint(proto),
				"OTEL_EXPORTER_OTLP_PROTOCOL="+proto,
				"OTEL_SERVICE_NAME="+service)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, out)
			}
			sent := readManifest(t, manifest)
			if len(sent) != requests {
				t.Fatalf("manifest has %d requests, want %d", len(sent), requests)
			}

			traces, err := j.WaitTraces(ctx, service, from, time.Now().Add(time.Minute), requests, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(traces) != requests {
				t.Fatalf("Jaeger has %d traces of %s, want %d (one per request)\ndemo output:\n%s", len(traces), service, requests, out)
			}
			seen := map[string]bool{}
			for _, tr := range traces {
				id := checkSingleStageTrace(t, tr, sent, service)
				if seen[id] {
					t.Errorf("request %q has two traces", id)
				}
				seen[id] = true
			}
		})
	}
}

// checkSingleStageTrace checks one trace against its scenario and returns
// its request id.
func checkSingleStageTrace(t *testing.T, tr []traceview.Span, sent map[string]string, service string) string {
	t.Helper()
	roots, _ := traceview.Trees(tr)
	if len(roots) != 1 || roots[0].Span.Name != spans.RequestSpanName {
		t.Errorf("trace %s: want one omni.request root, got %d roots", tr[0].TraceID, len(roots))
		return ""
	}
	root := roots[0].Span
	id := root.Str(string(attrs.RequestIDKey))
	name, ok := sent[id]
	if !ok {
		t.Errorf("trace %s: omni.request.id %q is not an id the demo sent", root.TraceID, id)
		return id
	}
	sc, _ := engine.Lookup(name)
	want, wantErr := sc.Expect()

	counts := checkTree(t, id, tr, singleStageParent)
	for i := range tr {
		if tr[i].Service != service {
			t.Errorf("%s %s: service %q, want %q", id, tr[i].Name, tr[i].Service, service)
		}
	}
	got := map[spans.Phase]int{}
	for name, n := range counts {
		if p, ok := plan.LookupSpanName(name); ok {
			got[p] = n
		}
	}
	for p, n := range want {
		if got[p] != n {
			t.Errorf("%s (%s): %d %s span(s), want %d", id, name, got[p], p, n)
		}
	}
	if wantErr != "" {
		if root.StatusCode != codes.Error || root.Str(string(semconv.ErrorTypeKey)) != wantErr {
			t.Errorf("%s (%s): status %v error.type %q, want Error %q", id, name, root.StatusCode, root.Str(string(semconv.ErrorTypeKey)), wantErr)
		}
	} else if root.StatusCode == codes.Error {
		t.Errorf("%s (%s): unexpected error status: %s", id, name, root.StatusMessage)
	}
	if sc.Priority {
		// The measured 0: Jaeger stores a zero-length span as 1 ns.
		for i := range tr {
			if tr[i].Name == spans.QueueWait.SpanName() && tr[i].Duration() > time.Nanosecond {
				t.Errorf("%s: the measured-0 queue wait lasts %v", id, tr[i].Duration())
			}
		}
	}
	return id
}

func readManifest(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m struct{ ID, Scenario string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out[m.ID] = m.Scenario
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
