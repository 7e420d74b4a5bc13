// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Option configures [Setup].
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	serviceName     string
	exporter        sdktrace.SpanExporter
	processors      []sdktrace.SpanProcessor
	batchOptions    []sdktrace.BatchSpanProcessorOption
	noGlobal        bool
	shutdownTimeout time.Duration
	fallbackSet     bool
	fallback        sdktrace.SpanExporter
	metricReaders   []sdkmetric.Reader
	noMetrics       bool
	idGenerator     sdktrace.IDGenerator
	engine          []attribute.KeyValue
	journalDir      string
}

// WithServiceName sets service.name when OTEL_SERVICE_NAME does not (the
// variable wins, as everywhere in OpenTelemetry).
func WithServiceName(name string) Option {
	return optionFunc(func(c *config) { c.serviceName = name })
}

// WithFallbackExporter exports through exp when the environment names no
// exporter and no endpoint (none of OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set),
// instead of OTLP to localhost. A nil exp exports nothing then, which suits
// a program that shows its traces itself (see [WithSpanProcessor]). It also
// keeps metrics from being pushed to localhost when no metric exporter or
// endpoint is named.
func WithFallbackExporter(exp sdktrace.SpanExporter) Option {
	return optionFunc(func(c *config) { c.fallbackSet, c.fallback = true, exp })
}

// WithMetricReader adds a metric reader beside the one the
// OTEL_METRICS_EXPORTER variable selects, such as a manual reader that a
// program reads itself. A nil r is ignored.
func WithMetricReader(r sdkmetric.Reader) Option {
	return optionFunc(func(c *config) {
		if r != nil {
			c.metricReaders = append(c.metricReaders, r)
		}
	})
}

// WithSpanProcessor adds a span processor beside the exporter's batch
// processor, such as the terminal view of
// github.com/otelomni/otelomni/traceview. A nil p is ignored.
func WithSpanProcessor(p sdktrace.SpanProcessor) Option {
	return optionFunc(func(c *config) {
		if p != nil {
			c.processors = append(c.processors, p)
		}
	})
}

// WithoutGlobal keeps Setup from installing its providers and propagators
// as the OpenTelemetry globals; pass [Telemetry.TracerProvider] to
// otelomni.WithTracerProvider instead. Logs are then not exported, even
// with OTEL_LOGS_EXPORTER set: the OpenTelemetry slog bridge
// (go.opentelemetry.io/contrib/bridges/otelslog) logs through the global
// logger provider.
func WithoutGlobal() Option {
	return optionFunc(func(c *config) { c.noGlobal = true })
}

// WithShutdownTimeout bounds [Telemetry.Shutdown] when the caller's context
// has no earlier deadline. The default is 5 s: long enough to flush a full
// batch to a live collector, short enough that a dead one never holds up an
// engine's exit. A d of 0 or less is ignored (the default stays).
func WithShutdownTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.shutdownTimeout = d
		}
	})
}

// WithEngineConfig records the engine's configuration (parallel sizes,
// dtype, quantization, scheduling mode, stage connector, devices) as
// resource attributes, once: every span, metric and log of the engine then
// says which configuration served it. See attrs.EngineConfig for the keys.
func WithEngineConfig(cfg attrs.EngineConfig) Option {
	return optionFunc(func(c *config) { c.engine = append(c.engine, cfg.Attributes()...) })
}
