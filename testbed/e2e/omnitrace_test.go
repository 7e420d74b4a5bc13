// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// TestOmnitraceImportIntoJaegerThenSummary imports a file of records into a
// real Jaeger over OTLP, checks one trace per good line arrived with the
// missing/zero distinction intact, then runs summary and table against
// that Jaeger.
func TestOmnitraceImportIntoJaegerThenSummary(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := float64(time.Now().Add(-time.Minute).UnixNano()) / 1e9
	var lines []string
	const good = 12
	for i := 0; i < good; i++ {
		pre := ""
		if i%3 == 0 {
			pre = `"preprocess_time_ms": 7.5, `
		}
		lines = append(lines, fmt.Sprintf(`{"request_id": "imported-%02d", "model": "Qwen/Qwen-Image", "arrival_time": %.6f, "num_inference_steps": 20, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": %.6f, "diffusion_metrics": {%s"scheduler_queue_wait_ms": %d, "diffusion_engine_exec_time_ms": 900, "postprocess_time_ms": 30}}]}`,
			i, now+float64(i), now+float64(i)+0.002, pre, i%2*5))
	}
	lines = append(lines, `{"request_id": "bad", "arrival_time": 1796000000, "stages": [{"stage_id": 0, "submit_time": 1796000000, "diffusion_metrics": {"forward_time_ms": -1}}]}`)
	file := filepath.Join(t.TempDir(), "records.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const service = "e2e-omnitrace"
	cmd := exec.CommandContext(ctx, bin["omnitrace"], "import", file)
	cmd.Env = cleanEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint("grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_SERVICE_NAME="+service)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("import: %v (want exit status 1: one line was bad)\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("imported %d, skipped 1", good)) || !strings.Contains(string(out), ":13: stage 0: forward_time_ms: negative duration") {
		t.Fatalf("import output:\n%s", out)
	}

	traces, err := j.WaitTraces(ctx, service, time.Now().Add(-time.Hour), time.Now().Add(time.Minute), good, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != good {
		t.Fatalf("%d traces in Jaeger, want one per good line (%d)", len(traces), good)
	}
	var zeroWaits, preprocess int
	for _, tr := range traces {
		for _, s := range tr {
			if s.End.Before(s.Start) {
				t.Errorf("%s negative", s.Name)
			}
			switch s.Name {
			case spans.QueueWait.SpanName():
				if s.Duration() <= time.Nanosecond {
					zeroWaits++
				}
				if v, _ := s.Bool("omni.timing.reconstructed"); !v {
					t.Error("an imported phase lacks omni.timing.reconstructed")
				}
			case spans.Preprocess.SpanName():
				preprocess++
			}
		}
	}
	if zeroWaits != good/2 || preprocess != good/3 {
		t.Errorf("%d zero-length queue waits (want %d), %d preprocess spans (want %d)", zeroWaits, good/2, preprocess, good/3)
	}

	sum := exec.CommandContext(ctx, bin["omnitrace"], "summary", "-jaeger", "http://"+j.Query, "-service", service, "-since", "2h")
	sout, err := sum.CombinedOutput()
	if err != nil {
		t.Fatalf("summary: %v\n%s", err, sout)
	}
	for _, re := range []string{
		fmt.Sprintf(`(?m)^%d requests$`, good),
		fmt.Sprintf(`(?m)^preprocess\s+%d/%d\s+%d\s+7\.500`, good/3, good, good/3),
		fmt.Sprintf(`(?m)^queue_wait\s+%d/%d\s+%d\s+0\.0`, good, good, good),
		fmt.Sprintf(`(?m)^exec\s+%d/%d\s+%d\s+900\.000`, good, good, good),
		`(?m)^forward\s+0/12\s+0\s+-`,
	} {
		if !regexp.MustCompile(re).Match(sout) {
			t.Errorf("summary lacks %s:\n%s", re, sout)
		}
	}
	for id := range traces {
		tab := exec.CommandContext(ctx, bin["omnitrace"], "table", "-jaeger", "http://"+j.Query, id)
		tout, err := tab.CombinedOutput()
		if err != nil || !regexp.MustCompile(`(?m)^  exec\s+900\.000$`).Match(tout) {
			t.Errorf("table of %s: %v\n%s", id, err, tout)
		}
		break
	}
}
