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
	resourceAttrs   []attribute.KeyValue
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

// WithSpanExporter exports through exp instead of the exporter that the
// OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_* variables select. A nil exp
// is ignored.
func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return optionFunc(func(c *config) {
		if exp != nil {
			c.exporter = exp
		}
	})
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

// WithoutMetrics keeps Setup from making the metric reader that
// OTEL_METRICS_EXPORTER selects, for a program that exports traces only
// (a batch import, say). Readers given with [WithMetricReader] still apply.
func WithoutMetrics() Option {
	return optionFunc(func(c *config) { c.noMetrics = true })
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

// WithBatchOptions tunes the exporter's batch processor (queue size, batch
// size, timeouts, blocking). The options apply over the OTEL_BSP_*
// variables, which apply over the SDK's defaults. A queue or batch of no
// span, a batch larger than its queue, or a batch timeout of 0 or less is
// replaced by the SDK's default, and logged through the OpenTelemetry
// error handler.
func WithBatchOptions(opts ...sdktrace.BatchSpanProcessorOption) Option {
	return optionFunc(func(c *config) { c.batchOptions = append(c.batchOptions, opts...) })
}

// WithoutGlobal keeps Setup from installing its providers and propagators
// as the OpenTelemetry globals; pass [Telemetry.TracerProvider] to
// otelomni.WithTracerProvider instead.
func WithoutGlobal() Option {
	return optionFunc(func(c *config) { c.noGlobal = true })
}

// WithShutdownTimeout bounds [Telemetry.Shutdown] (default
// [DefaultShutdownTimeout]). A d of 0 or less is ignored.
func WithShutdownTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.shutdownTimeout = d
		}
	})
}

// WithResourceAttributes adds attributes to the resource, such as a
// deployment environment. OTEL_RESOURCE_ATTRIBUTES wins over them.
func WithResourceAttributes(kv ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) { c.resourceAttrs = append(c.resourceAttrs, kv...) })
}

// WithIDGenerator makes the tracer provider draw trace and span ids from g,
// such as ids derived from an imported record so that importing it twice
// stores it once. A nil g is ignored: the SDK's random ids.
func WithIDGenerator(g sdktrace.IDGenerator) Option {
	return optionFunc(func(c *config) {
		if g != nil {
			c.idGenerator = g
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
