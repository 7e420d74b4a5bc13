// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"maps"
	"net"
	"path/filepath"

	"github.com/otelomni/otelomni/omnitrace/jaegerquery"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// The shipped configurations, relative to the repository root.
const (
	CollectorConfig = "deploy/collector.yaml"
	BackendConfig   = "deploy/backend.yaml"
)

// startAttempts: a free port can be taken between choosing it and binding it.
const startAttempts = 3

// Backend is a running backend Jaeger (deploy/backend.yaml) storing in
// Badger.
type Backend struct {
	*process
	// OTLPGRPC and OTLPHTTP are its OTLP receivers' host:port; Query serves
	// the query API and UI; Health answers GET /status.
	OTLPGRPC, OTLPHTTP, Query, Health string
	// Env holds the variables it was started with.
	Env map[string]string
}

// StartBackend starts the backend from the Jaeger binary bin on free
// loopback ports, storing in badgerDir (created if missing, reused if not),
// printing into logDir, and waits until it answers queries.
func StartBackend(ctx context.Context, bin, badgerDir, logDir string) (*Backend, error) {
	root, err := jaeger.RepoRoot()
	if err != nil {
		return nil, err
	}
	var b *Backend
	err = onFreeAddrs(5, func(a []string) error {
		b = &Backend{OTLPGRPC: a[0], OTLPHTTP: a[1], Query: a[2], Health: a[4], Env: map[string]string{
			"OMNI_BACKEND_OTLP_GRPC":  a[0],
			"OMNI_BACKEND_OTLP_HTTP":  a[1],
			"OMNI_BACKEND_QUERY":      a[2],
			"OMNI_BACKEND_QUERY_GRPC": a[3],
			"OMNI_BACKEND_HEALTH":     a[4],
			"OMNI_BADGER_DIR":         badgerDir,
		}}
		var err error
		b.process, err = startProcess(ctx, "backend", bin, filepath.Join(root, BackendConfig), logDir, b.Env,
			"http://"+b.Health+"/status", "http://"+b.Query+"/api/v3/services")
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Client returns a client of the backend's query API.
func (b *Backend) Client() *jaegerquery.Client { return &jaegerquery.Client{Base: "http://" + b.Query} }

// Collector is a running tail-sampling collector (deploy/collector.yaml).
type Collector struct {
	*process
	// OTLPGRPC and OTLPHTTP receive the engines' spans and metrics;
	// Prometheus serves the engines' histograms and the span metrics;
	// Telemetry serves the collector's own metrics (its decisions).
	OTLPGRPC, OTLPHTTP, Health, Prometheus, Telemetry string
	// Env holds the variables it was started with.
	Env map[string]string
}

// StartCollector starts the collector from the binary bin on free
// loopback ports, sending to the backend's OTLP/gRPC address backendOTLP,
// with the OMNI_* settings in settings (thresholds, decision wait...), and
// waits until it is healthy.
func StartCollector(ctx context.Context, bin, backendOTLP, logDir string, settings map[string]string) (*Collector, error) {
	root, err := jaeger.RepoRoot()
	if err != nil {
		return nil, err
	}
	var c *Collector
	err = onFreeAddrs(5, func(a []string) error {
		c = &Collector{OTLPGRPC: a[0], OTLPHTTP: a[1], Health: a[2], Prometheus: a[3], Telemetry: a[4]}
		_, port, _ := net.SplitHostPort(a[4])
		c.Env = maps.Clone(settings)
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		maps.Copy(c.Env, map[string]string{
			"OMNI_COLLECTOR_OTLP_GRPC":      a[0],
			"OMNI_COLLECTOR_OTLP_HTTP":      a[1],
			"OMNI_COLLECTOR_HEALTH":         a[2],
			"OMNI_COLLECTOR_PROMETHEUS":     a[3],
			"OMNI_COLLECTOR_TELEMETRY_HOST": "127.0.0.1",
			"OMNI_COLLECTOR_TELEMETRY_PORT": port,
			"OMNI_BACKEND_OTLP":             backendOTLP,
		})
		var err error
		c.process, err = startProcess(ctx, "collector", bin, filepath.Join(root, CollectorConfig), logDir, c.Env,
			"http://"+c.Health+"/status")
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// onFreeAddrs calls start with n free loopback addresses, and again with
// new ones when it fails: a port can be taken between choosing it and
// binding it.
func onFreeAddrs(n int, start func(addrs []string) error) error {
	var err error
	for range startAttempts {
		var a []string
		if a, err = freeAddrs(n); err != nil {
			return err
		}
		if err = start(a); err == nil {
			return nil
		}
	}
	return err
}

// OTLPEndpoint is the URL engines export to over OTLP/HTTP, as
// OTEL_EXPORTER_OTLP_ENDPOINT takes it.
func (c *Collector) OTLPEndpoint() string { return "http://" + c.OTLPHTTP }
