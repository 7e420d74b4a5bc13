package otelomni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultAttributeValueLengthLimit bounds every string attribute value when
// neither OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT nor
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is set. The SDK's own default is no
// limit, so one 10 MB value (a prompt, a base64 image) would cost a whole
// export batch; 4 KiB keeps every id, model name and error message whole.
const DefaultAttributeValueLengthLimit = 4096

// DefaultShutdownTimeout bounds [Telemetry.Shutdown] when the caller's
// context has no earlier deadline: long enough to flush a full batch to a
// live collector, short enough that a dead one never holds up an engine's
// exit.
const DefaultShutdownTimeout = 5 * time.Second

// SetupOption configures [Setup].
type SetupOption interface {
	applySetup(*setupConfig)
}

type setupOptionFunc func(*setupConfig)

func (f setupOptionFunc) applySetup(c *setupConfig) { f(c) }

type setupConfig struct {
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
}

// WithServiceName sets service.name when OTEL_SERVICE_NAME does not (the
// variable wins, as everywhere in OpenTelemetry).
func WithServiceName(name string) SetupOption {
	return setupOptionFunc(func(c *setupConfig) { c.serviceName = name })
}

// WithSpanExporter exports through exp instead of the exporter that the
// OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_* variables select.
func WithSpanExporter(exp sdktrace.SpanExporter) SetupOption {
	return setupOptionFunc(func(c *setupConfig) { c.exporter = exp })
}

// WithFallbackExporter exports through exp when the environment names no
// exporter and no endpoint (none of OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set),
// instead of OTLP to localhost. A nil exp exports nothing then, which suits
// a program that shows its traces itself (see [WithSpanProcessor]).
func WithFallbackExporter(exp sdktrace.SpanExporter) SetupOption {
	return setupOptionFunc(func(c *setupConfig) { c.fallbackSet, c.fallback = true, exp })
}

// WithMetricReader adds a metric reader beside the one the
// OTEL_METRICS_EXPORTER variable selects, such as a manual reader that a
// program reads itself.
func WithMetricReader(r sdkmetric.Reader) SetupOption {
	return setupOptionFunc(func(c *setupConfig) {
		if r != nil {
			c.metricReaders = append(c.metricReaders, r)
		}
	})
}

// WithoutMetrics keeps Setup from making the metric reader that
// OTEL_METRICS_EXPORTER selects, for a program that exports traces only
// (a batch import, say). Readers given with [WithMetricReader] still apply.
func WithoutMetrics() SetupOption {
	return setupOptionFunc(func(c *setupConfig) { c.noMetrics = true })
}

// WithSpanProcessor adds a span processor beside the exporter's batch
// processor, such as one that prints traces in the terminal.
func WithSpanProcessor(p sdktrace.SpanProcessor) SetupOption {
	return setupOptionFunc(func(c *setupConfig) {
		if p != nil {
			c.processors = append(c.processors, p)
		}
	})
}

// WithBatchOptions tunes the exporter's batch processor (queue size, batch
// size, timeouts). The OTEL_BSP_* variables set the same where no option
// does.
func WithBatchOptions(opts ...sdktrace.BatchSpanProcessorOption) SetupOption {
	return setupOptionFunc(func(c *setupConfig) { c.batchOptions = append(c.batchOptions, opts...) })
}

// WithoutGlobal keeps Setup from installing its provider and propagators as
// the OpenTelemetry globals; pass [Telemetry.TracerProvider] to
// [WithTracerProvider] instead.
func WithoutGlobal() SetupOption {
	return setupOptionFunc(func(c *setupConfig) { c.noGlobal = true })
}

// WithShutdownTimeout bounds [Telemetry.Shutdown] (default
// [DefaultShutdownTimeout]).
func WithShutdownTimeout(d time.Duration) SetupOption {
	return setupOptionFunc(func(c *setupConfig) {
		if d > 0 {
			c.shutdownTimeout = d
		}
	})
}

// WithResourceAttributes adds attributes to the resource, such as a
// deployment environment. OTEL_RESOURCE_ATTRIBUTES wins over them.
func WithResourceAttributes(kv ...attribute.KeyValue) SetupOption {
	return setupOptionFunc(func(c *setupConfig) { c.resourceAttrs = append(c.resourceAttrs, kv...) })
}

// Telemetry is what [Setup] built: a tracer provider and how to shut it
// down.
type Telemetry struct {
	counts          *exportCounts
	tp              *sdktrace.TracerProvider
	mp              *sdkmetric.MeterProvider
	metrics         string
	shutdownTimeout time.Duration
	exporter        string
	once            sync.Once
	err             error
}

// TracerProvider returns the provider; a no-op one when the SDK is disabled
// or nothing is exported.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// MeterProvider returns the meter provider; a no-op one when the SDK is
// disabled or no metric is read.
func (t *Telemetry) MeterProvider() metric.MeterProvider {
	if t == nil || t.mp == nil {
		return metricnoop.NewMeterProvider()
	}
	return t.mp
}

// MetricsExporter describes where metrics go, for a start-up log line.
func (t *Telemetry) MetricsExporter() string {
	if t == nil || t.metrics == "" {
		return "none"
	}
	return t.metrics
}

// ExportStats returns the accounting of every span handed to the exporter:
// ended, exported, failed, and pending (after Shutdown: dropped). Zero when
// nothing is exported.
func (t *Telemetry) ExportStats() ExportStats {
	if t == nil || t.counts == nil {
		return ExportStats{}
	}
	return t.counts.stats()
}

// Enabled reports whether spans are recorded and exported.
func (t *Telemetry) Enabled() bool { return t != nil && t.tp != nil }

// Exporter describes where spans go, for a start-up log line: "none",
// "otlp (grpc) to http://127.0.0.1:4317", "console", ...
func (t *Telemetry) Exporter() string {
	if t == nil || t.exporter == "" {
		return "none"
	}
	return t.exporter
}

// Shutdown flushes what is queued and stops exporting. It returns within
// the Telemetry's shutdown timeout, or ctx's deadline if earlier, even when
// the collector is dead. Calling it again returns the first result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil || (t.tp == nil && t.mp == nil) {
		return nil
	}
	t.once.Do(func() {
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, t.shutdownTimeout)
		defer cancel()
		var errs []error
		if t.tp != nil {
			errs = append(errs, t.tp.Shutdown(ctx))
			if t.counts != nil {
				reportLoss(t.counts.stats())
			}
		}
		if t.mp != nil {
			errs = append(errs, t.mp.Shutdown(ctx))
		}
		t.err = errors.Join(errs...)
	})
	return t.err
}

// Setup builds a tracer provider from the standard OpenTelemetry
// environment and, unless [WithoutGlobal] is given, installs it and W3C
// trace-context propagation as the globals, which turns on every
// [Instrumenter] that follows them.
//
// The exporter comes from OTEL_TRACES_EXPORTER (otlp, the default; console;
// none) through go.opentelemetry.io/contrib/exporters/autoexport, and the
// OTLP exporter from OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL (grpc
// or http/protobuf). The sampler comes from OTEL_TRACES_SAMPLER, the batch
// processor's settings from OTEL_BSP_*. OTEL_SDK_DISABLED=true makes
// everything a no-op. The resource carries service.name
// (OTEL_SERVICE_NAME), service.instance.id, the SDK's and otelomni's name
// and version, the host, and the process id and executable, but never the
// command-line arguments, which can hold secrets.
//
// Setup never dials the collector: an unreachable one neither fails nor
// delays the engine's start, and exports never block a request (the batch
// processor drops, and counts, what does not fit its queue). A malformed
// variable returns an error and a no-op Telemetry, so an engine can log it
// and go on untraced.
func Setup(ctx context.Context, opts ...SetupOption) (*Telemetry, error) {
	cfg := setupConfig{shutdownTimeout: DefaultShutdownTimeout}
	for _, o := range opts {
		if o != nil {
			o.applySetup(&cfg)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if sdkDisabled() {
		return &Telemetry{}, nil
	}

	t := &Telemetry{shutdownTimeout: cfg.shutdownTimeout}
	exp := cfg.exporter
	switch {
	case exp != nil:
		t.exporter = fmt.Sprintf("%T", exp)
	case cfg.fallbackSet && firstEnv(exporterVars...) == "":
		exp = cfg.fallback
		if exp == nil {
			t.exporter = "none (no OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_*ENDPOINT set)"
		} else {
			t.exporter = fmt.Sprintf("%T", exp)
		}
	default:
		e, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return &Telemetry{}, fmt.Errorf("otelomni: setting up the span exporter: %w", err)
		}
		if !autoexport.IsNoneSpanExporter(e) {
			exp = e
			t.exporter = describeExporter()
		}
	}
	readers, err := metricReaders(ctx, cfg, t)
	if err != nil {
		if exp != nil {
			_ = exp.Shutdown(ctx) // it may hold a connection
		}
		return &Telemetry{}, err
	}
	if exp == nil && len(cfg.processors) == 0 && len(readers) == 0 {
		// Nothing would leave the process: recording would only cost.
		return &Telemetry{}, nil
	}

	res, err := newResource(ctx, cfg)
	if err != nil {
		// A partial resource is still worth exporting with.
		otel.Handle(fmt.Errorf("otelomni: detecting the resource: %w", err))
	}
	if exp != nil || len(cfg.processors) > 0 {
		tpOpts := []sdktrace.TracerProviderOption{
			sdktrace.WithResource(res),
			sdktrace.WithRawSpanLimits(spanLimits()),
		}
		if exp != nil {
			t.counts = &exportCounts{}
			tpOpts = append(tpOpts,
				sdktrace.WithSpanProcessor(countingProcessor{t.counts}),
				sdktrace.WithBatcher(countingExporter{exp, t.counts}, batchOptions(cfg)...))
		}
		for _, p := range cfg.processors {
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(p))
		}
		t.tp = sdktrace.NewTracerProvider(tpOpts...)
	}
	if len(readers) > 0 {
		mpOpts := []sdkmetric.Option{sdkmetric.WithResource(res)}
		for _, r := range readers {
			mpOpts = append(mpOpts, sdkmetric.WithReader(r))
		}
		t.mp = sdkmetric.NewMeterProvider(mpOpts...)
	}
	if !cfg.noGlobal {
		if t.tp != nil {
			otel.SetTracerProvider(t.tp)
		}
		if t.mp != nil {
			otel.SetMeterProvider(t.mp)
		}
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
			propagation.TraceContext{}, propagation.Baggage{}))
	}
	return t, nil
}

// metricReaders returns the reader that OTEL_METRICS_EXPORTER selects
// (otlp, prometheus, console, none) through autoexport, and the extra ones.
// With a fallback set and no metric exporter or endpoint named, none is
// made: a program that needs no server must not push to localhost.
func metricReaders(ctx context.Context, cfg setupConfig, t *Telemetry) ([]sdkmetric.Reader, error) {
	readers := append([]sdkmetric.Reader(nil), cfg.metricReaders...)
	if cfg.noMetrics || (cfg.fallbackSet && firstEnv(metricVars...) == "") {
		return readers, nil
	}
	r, err := autoexport.NewMetricReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("otelomni: setting up the metric reader: %w", err)
	}
	if autoexport.IsNoneMetricReader(r) {
		return readers, nil
	}
	t.metrics = describeMetrics()
	return append(readers, r), nil
}

// metricVars are the variables that configure where metrics go.
var metricVars = []string{"OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}

func describeMetrics() string {
	kind := strings.TrimSpace(os.Getenv("OTEL_METRICS_EXPORTER"))
	switch kind {
	case "", "otlp":
		return "otlp"
	case "prometheus":
		host, port := firstEnv("OTEL_EXPORTER_PROMETHEUS_HOST"), firstEnv("OTEL_EXPORTER_PROMETHEUS_PORT")
		if host == "" {
			host = "localhost"
		}
		if port == "" {
			port = "9464"
		}
		return "prometheus on http://" + host + ":" + port + "/metrics"
	}
	return kind
}

func sdkDisabled() bool {
	v, err := strconv.ParseBool(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")))
	return err == nil && v
}

// spanLimits reads the OTEL_*_LIMIT variables and bounds attribute values
// by default.
func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	if l.AttributeValueLengthLimit < 0 {
		l.AttributeValueLengthLimit = DefaultAttributeValueLengthLimit
	}
	return l
}

func newResource(ctx context.Context, cfg setupConfig) (*resource.Resource, error) {
	var own []attribute.KeyValue
	if cfg.serviceName != "" {
		own = append(own, attribute.String("service.name", cfg.serviceName))
	}
	own = append(own,
		attribute.String("telemetry.distro.name", "otelomni"),
		attribute.String("telemetry.distro.version", Version))
	own = append(own, cfg.resourceAttrs...)
	res, err := resource.New(ctx,
		resource.WithService(), // default service.name and a fresh service.instance.id
		resource.WithAttributes(own...),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		// Deliberately not resource.WithProcess(): it would add
		// process.command_args, and command lines carry secrets.
		resource.WithProcessPID(),
		resource.WithProcessExecutableName(),
		resource.WithProcessExecutablePath(),
		resource.WithProcessRuntimeName(),
		resource.WithProcessRuntimeVersion(),
	)
	if res == nil {
		res = resource.Default()
	}
	return res, err
}

// describeExporter says where autoexport sends spans, from the same
// variables it reads.
func describeExporter() string {
	kind := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if kind == "" {
		kind = "otlp"
	}
	if kind != "otlp" {
		return kind
	}
	proto := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if proto == "" {
		proto = "http/protobuf"
	}
	endpoint := firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		endpoint = "the default endpoint"
	}
	return fmt.Sprintf("otlp (%s) to %s", proto, endpoint)
}

// exporterVars are the variables that configure where spans go.
var exporterVars = []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}

func firstEnv(keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
	}
	return ""
}

// Defaults of the export path's batch processor, where neither an option
// nor an OTEL_BSP_* variable sets them. See docs/performance.md for the load
// runs they come from.
const (
	// DefaultMaxQueueSize bounds the spans waiting for export: the memory
	// an engine spends on tracing while its collector is down.
	DefaultMaxQueueSize = 2048
	// DefaultMaxExportBatchSize is the most spans in one export request.
	DefaultMaxExportBatchSize = 512
)

// batchOptions returns the batch processor's options: otelomni's defaults,
// then the OTEL_BSP_* variables (which the SDK reads when no option sets
// the same), then the caller's options, which win.
func batchOptions(cfg setupConfig) []sdktrace.BatchSpanProcessorOption {
	var opts []sdktrace.BatchSpanProcessorOption
	if os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE") == "" {
		opts = append(opts, sdktrace.WithMaxQueueSize(DefaultMaxQueueSize))
	}
	if os.Getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") == "" {
		opts = append(opts, sdktrace.WithMaxExportBatchSize(DefaultMaxExportBatchSize))
	}
	return append(opts, cfg.batchOptions...)
}
