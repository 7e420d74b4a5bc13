// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// warningLine matches a collector log line that asks for something to
// change: a level above info, or, at any level, a deprecation or a request
// to rewrite the configuration.
var warningLine = regexp.MustCompile(`(?i)^\S+\t(warn|error|dpanic|panic|fatal)\t|deprecat|please rewrite`)

// TestShippedCollectorStartsWithoutWarning starts tools/bin/otelcol with
// deploy/collector.yaml before the shipped backend, sends one trace
// through it into the backend, stops it, and fails on any warning line it
// printed from start to shutdown.
func TestShippedCollectorStartsWithoutWarning(t *testing.T) {
	jaegerBin := jaegertest.Binary(t)
	if _, err := CollectorBinary(); err != nil {
		if os.Getenv("OTELOMNI_REQUIRE_JAEGER") == "1" {
			t.Fatalf("the collector is required: %v", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	settings := DemoSettings()
	settings["OMNI_DECISION_WAIT"] = "1s"
	settings["OMNI_SAMPLE_PERCENT"] = "100"
	tier, err := StartTier(ctx, jaegerBin, t.TempDir(), settings)
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Stop()

	for k, v := range map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": tier.Collector.OTLPEndpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_SERVICE_NAME": "start-clean", "OTEL_BSP_SCHEDULE_DELAY": "100"} {
		t.Setenv(k, v)
	}
	p, err := NewProducer(ctx, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Send(Synthetic{Modality: "image", Duration: time.Second, Queue: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		if ss, err := tier.Backend.Client().Trace(ctx, id); err == nil && len(ss) == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the trace never reached the backend:\n%s", tier.Collector.Logs())
		case <-time.After(250 * time.Millisecond):
		}
	}
	tier.Collector.Stop()
	b, err := os.ReadFile(tier.Collector.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !strings.Contains(string(b), "Everything is ready") || !strings.Contains(string(b), "Shutdown complete") {
		t.Fatalf("the log holds no start and shutdown:\n%s", b)
	}
	for _, l := range lines {
		if warningLine.MatchString(l) {
			t.Errorf("the collector printed: %.600s", l)
		}
	}
	t.Logf("%d log lines from start to shutdown, none a warning", len(lines))
}
