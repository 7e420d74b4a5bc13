// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/examples/diffusion/engine"
	"github.com/otelomni/otelomni/spans"
)

// countLine matches the phase histogram's count series in the Prometheus
// text format.
var countLine = regexp.MustCompile(`^omni_phase_duration_seconds_count\{.*omni_phase="([a-z_.]+)".*\} ([0-9]+)$`)

// TestDemoMetricsOverPrometheusCountWhatWasMeasured runs the demo with
// OTEL_METRICS_EXPORTER=prometheus on a loopback port, scrapes it over HTTP,
// and checks each phase's count against what the scenarios measured: the
// preprocess count is the number of requests that had a pre-processor, not
// the number of requests.
func TestDemoMetricsOverPrometheusCountWhatWasMeasured(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	const requests = 40
	manifest := filepath.Join(t.TempDir(), "manifest.jsonl")
	cmd := exec.CommandContext(ctx, bin["diffusion"], "-requests", strconv.Itoa(requests), "-scale", "0.3",
		"-manifest", manifest, "-quiet", "-linger", "60s")
	cmd.Env = cleanEnv("OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST=127.0.0.1", "OTEL_EXPORTER_PROMETHEUS_PORT="+port)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	// Wait until the run is over and the process lingers with its metrics.
	sc := bufio.NewScanner(stdout)
	var out strings.Builder
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "lingering") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if !strings.Contains(out.String(), "lingering") {
		t.Fatalf("the demo did not finish its run:\n%s", out.String())
	}

	resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := countLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			got[m[1]] += n
		}
	}

	want := map[string]int{}
	for _, name := range readManifest(t, manifest) {
		s, _ := engine.Lookup(name)
		exp, _ := s.Expect()
		for p, c := range exp {
			want[p.String()] += c
		}
	}
	if want[spans.Preprocess.String()] >= requests || want[spans.Preprocess.String()] == 0 {
		t.Fatalf("the mix should have requests with and without a pre-processor: %d of %d", want[spans.Preprocess.String()], requests)
	}
	for id, c := range want {
		if got[id] != c {
			t.Errorf("%s: Prometheus counts %d, the scenarios measured %d", id, got[id], c)
		}
	}
	if !strings.Contains(string(body), `gen_ai_server_request_duration_seconds_count`) {
		t.Error("no request duration histogram")
	}
	t.Logf("preprocess: %d of %d requests", got[spans.Preprocess.String()], requests)
}
