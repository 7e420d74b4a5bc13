// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/testbed/internal/fleet"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// synthRequest is a synthetic request.
type synthRequest = fleet.Synthetic

// synth is a synthetic request of modality that lasts d, waits queue in a
// queue, and ends with err.
func synth(modality string, d, queue time.Duration, err error) synthRequest {
	return fleet.Synthetic{Modality: modality, Duration: d, Queue: queue, Err: err}
}

// producer sends synthetic requests for a test.
type producer struct{ *fleet.Producer }

// newProducer makes a producer exporting over OTLP/HTTP to endpoint as
// service, with trace ids from seed, remembering every span. Only the
// OTEL_* variables it sets apply while t runs.
func newProducer(t *testing.T, endpoint, service string, seed uint64) producer {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", service)
	p, err := fleet.NewProducer(context.Background(), seed, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return producer{p}
}

func (p producer) send(t *testing.T, r synthRequest) string {
	t.Helper()
	id, err := p.Send(r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (p producer) flush(t *testing.T) {
	t.Helper()
	if err := p.Flush(context.Background()); err != nil {
		t.Fatalf("%v: %+v", err, p.Stats())
	}
}

func (p producer) spans() map[string]int { return p.Spans() }

// startTier starts the shipped backend and collector for t, with settings,
// and stops them when t ends (printing their logs if it failed).
func startTier(t *testing.T, settings map[string]string) *fleet.Tier {
	t.Helper()
	bin := jaegertest.Binary(t)
	if _, err := fleet.CollectorBinary(); err != nil {
		if os.Getenv("OTELOMNI_REQUIRE_JAEGER") == "1" {
			t.Fatalf("the collector is required: %v", err)
		}
		t.Skipf("no collector binary: %v", err)
	}
	tier, err := fleet.StartTier(context.Background(), bin, t.TempDir(), settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tier.Stop()
		if t.Failed() {
			t.Logf("collector's log:\n%s", tier.Collector.Logs())
			t.Logf("backend's log:\n%s", tier.Backend.Logs())
		}
	})
	return tier
}
