// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/internal/setupopt"
	"github.com/otelomni/otelomni/otelomni"
)

// defaultAttributeValueLengthLimit bounds string attribute values, in
// bytes, when no OTEL_*ATTRIBUTE_VALUE_LENGTH_LIMIT variable is set.
const defaultAttributeValueLengthLimit = setupopt.AttributeValueLengthLimit

// Setup builds the OpenTelemetry SDK from the standard environment and,
// unless [WithoutGlobal] is given, installs its providers and propagator
// as the globals, which turns on every otelomni.Instrumenter that follows
// them. The propagator is what OTEL_PROPAGATORS names (tracecontext,
// baggage, b3, b3multi, jaeger, xray, ottrace, none; through
// go.opentelemetry.io/contrib/propagators/autoprop), W3C trace context and
// baggage when it is unset; [Telemetry.TextMapPropagator] returns it.
//
// The span exporter comes from OTEL_TRACES_EXPORTER (otlp, the default;
// console; none) through go.opentelemetry.io/contrib/exporters/autoexport,
// the OTLP exporter from OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL (grpc
// or http/protobuf), the metric reader from OTEL_METRICS_EXPORTER. The
// sampler comes from OTEL_TRACES_SAMPLER, read by the SDK; the batch
// processors' settings (OTEL_BSP_*, OTEL_BLRP_*) and the span and log
// limits are read by Setup and handed to the SDK as options.
// OTEL_SDK_DISABLED=true makes everything a no-op. The resource carries
// service.name (OTEL_SERVICE_NAME), service.instance.id, the SDK's and
// otelomni's name and version, the host, and the process id and
// executable, but never the command-line arguments, which can hold
// secrets.
//
// Every variable is checked first, each number against its range (see
// docs/reliability.md). A value that is not well formed (an unknown
// exporter or sampler, a queue size out of range or padded with a space, a
// schedule delay of 0, an endpoint that is not a URL, a header gRPC cannot
// carry, ...) makes Setup return an error that names each bad variable
// and a no-op Telemetry: the engine logs the error and runs
// untraced, never with a setting nobody asked for.
//
// Setup never dials the collector: an unreachable one neither fails nor
// delays the engine's start, and exports never block a request (the batch
// processor drops, and counts, what does not fit its queue).
//
// With [WithJournal] or OTELOMNI_JOURNAL_DIR, spans are also kept in a
// crash journal until exported, and the spans of earlier processes that
// died in that directory are exported on a goroutine of their own.
func Setup(ctx context.Context, opts ...Option) (*Telemetry, error) {
	cfg := config{shutdownTimeout: setupopt.ShutdownTimeout}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	applyOwn(&cfg, setupopt.From(ctx))
	env, err := readEnv()
	if err != nil {
		return &Telemetry{}, err
	}
	// OTEL_SDK_DISABLED leaves propagation as OTEL_PROPAGATORS says: a
	// process that records nothing still carries its callers' context on.
	prop := envPropagator()
	propagateOnly := func() (*Telemetry, error) {
		if !cfg.noGlobal {
			otel.SetTextMapPropagator(prop)
		}
		return &Telemetry{prop: prop}, nil
	}
	if sdkDisabled() {
		return propagateOnly()
	}

	t := &Telemetry{shutdownTimeout: cfg.shutdownTimeout, prop: prop}
	exp, err := spanExporter(ctx, &cfg, t)
	if err != nil {
		return &Telemetry{}, err
	}
	readers, err := metricReaders(ctx, &cfg, t)
	if err != nil {
		if exp != nil {
			_ = exp.Shutdown(ctx) // it may hold a connection
		}
		return &Telemetry{}, err
	}
	var logExp sdklog.Exporter
	if !cfg.noGlobal {
		// The slog bridge logs through the global logger provider: without
		// the globals, no record could reach an exporter.
		logExp, err = logExporter(ctx)
	}
	if err != nil {
		if exp != nil {
			_ = exp.Shutdown(ctx)
		}
		return &Telemetry{}, err
	}
	if exp == nil && len(cfg.processors) == 0 && len(readers) == 0 && logExp == nil {
		// Nothing would leave the process: recording would only cost.
		return propagateOnly()
	}

	res, err := newResource(ctx, &cfg)
	if err != nil {
		// A partial resource is still worth exporting with.
		otel.Handle(fmt.Errorf("otelsetup: detecting the resource: %w", err))
	}
	if exp != nil || len(cfg.processors) > 0 {
		limits := spanLimits(env)
		tpOpts := []sdktrace.TracerProviderOption{
			sdktrace.WithResource(res),
			sdktrace.WithRawSpanLimits(limits),
		}
		if exp != nil {
			t.counts = &exportCounts{}
			safe := &safeExporter{exp: exp, c: t.counts, maxValue: limits.AttributeValueLengthLimit}
			var queued sdktrace.SpanExporter = safe
			if dir := journalDir(&cfg); dir != "" {
				if cj := openJournal(dir, env, exp, limits.AttributeValueLengthLimit); cj != nil {
					// The journal's processor goes before the batcher, so
					// that a span's end is journalled before it can be
					// exported; its wrapper confirms what the safe exporter
					// accepted or refused.
					t.journal = cj
					safe.exp = serialExporter{exp, &cj.mu}
					queued = cj.j.WrapExporter(safe)
					tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(cj.j.SpanProcessor()))
				}
			}
			t.queue = newSpanQueue(queued, t.counts, limits.AttributeValueLengthLimit, batchOptions(env, cfg.batchOptions))
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(t.queue))
		}
		for _, p := range cfg.processors {
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(p))
		}
		if cfg.idGenerator != nil {
			tpOpts = append(tpOpts, sdktrace.WithIDGenerator(cfg.idGenerator))
		}
		t.tp = sdktrace.NewTracerProvider(tpOpts...)
	}
	if len(readers) > 0 {
		mpOpts := []sdkmetric.Option{sdkmetric.WithResource(res)}
		mpOpts = append(mpOpts, exemplarOptions(exp != nil, spanLimits(env).AttributeValueLengthLimit, res)...)
		for _, r := range readers {
			mpOpts = append(mpOpts, sdkmetric.WithReader(r))
		}
		t.mp = sdkmetric.NewMeterProvider(mpOpts...)
	}
	if logExp != nil {
		t.lp, _ = newLoggerProvider(logExp, res, env)
	}
	if !cfg.noGlobal {
		if t.lp != nil {
			otel.SetLoggerProvider(t.lp)
		}
		if t.tp != nil {
			otel.SetTracerProvider(t.tp)
		}
		if t.mp != nil {
			otel.SetMeterProvider(t.mp)
		}
		otel.SetTextMapPropagator(t.prop)
	}
	return t, nil
}

// applyOwn applies the settings the module's own programs give on Setup's
// context.
func applyOwn(cfg *config, o setupopt.Options) {
	if o.SpanExporter != nil {
		cfg.exporter = o.SpanExporter
	}
	if o.IDGenerator != nil {
		cfg.idGenerator = o.IDGenerator
	}
	cfg.batchOptions = append(cfg.batchOptions, o.BatchOptions...)
	cfg.noMetrics = cfg.noMetrics || o.NoMetrics
}

// envPropagator is the propagator OTEL_PROPAGATORS names (checked by
// readEnv), or W3C trace context and baggage when it is unset.
func envPropagator() propagation.TextMapPropagator {
	v := strings.TrimSpace(os.Getenv("OTEL_PROPAGATORS"))
	if v == "" {
		return defaultPropagator()
	}
	names, _, ok := propagatorNames(v)
	p, err := autoprop.TextMapPropagator(names...)
	if !ok || err != nil || p == nil {
		return defaultPropagator() // not reached: readEnv refused the value
	}
	return p
}

func defaultPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// spanExporter returns the exporter: the option's, the fallback when the
// environment names no exporter and no endpoint, or autoexport's. It is nil
// when nothing is exported.
func spanExporter(ctx context.Context, cfg *config, t *Telemetry) (sdktrace.SpanExporter, error) {
	switch {
	case cfg.exporter != nil:
		t.exporter = fmt.Sprintf("%T", cfg.exporter)
		return cfg.exporter, nil
	case cfg.fallbackSet && firstEnv(exporterVars...) == "":
		if cfg.fallback == nil {
			t.exporter = "none (no OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_*ENDPOINT set)"
			return nil, nil
		}
		t.exporter = fmt.Sprintf("%T", cfg.fallback)
		return cfg.fallback, nil
	}
	e, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("otelsetup: setting up the span exporter: %w", err)
	}
	if autoexport.IsNoneSpanExporter(e) {
		return nil, nil
	}
	t.exporter = describeExporter()
	return e, nil
}

// metricReaders returns the reader that OTEL_METRICS_EXPORTER selects
// (otlp, prometheus, console, none) through autoexport, and the extra ones.
// With a fallback set and no metric exporter or endpoint named, none is
// made: a program that needs no server must not push to localhost.
func metricReaders(ctx context.Context, cfg *config, t *Telemetry) ([]sdkmetric.Reader, error) {
	readers := append([]sdkmetric.Reader(nil), cfg.metricReaders...)
	if cfg.noMetrics || (cfg.fallbackSet && firstEnv(metricVars...) == "") {
		return readers, nil
	}
	r, err := autoexport.NewMetricReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("otelsetup: setting up the metric reader: %w", err)
	}
	if autoexport.IsNoneMetricReader(r) {
		return readers, nil
	}
	t.metrics = describeMetrics()
	return append(readers, r), nil
}

// logExporter returns the log exporter that OTEL_LOGS_EXPORTER selects
// through autoexport, or nil when it is unset or "none". Logs are exported
// only when asked for: a trace backend such as Jaeger refuses them.
func logExporter(ctx context.Context) (sdklog.Exporter, error) {
	if k := strings.ToLower(firstEnv("OTEL_LOGS_EXPORTER")); k == "" || k == "none" {
		return nil, nil
	}
	e, err := autoexport.NewLogExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("otelsetup: setting up the log exporter: %w", err)
	}
	return e, nil
}

// exporterVars are the variables that configure where spans go.
var exporterVars = []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}

// metricVars are the variables that configure where metrics go.
var metricVars = []string{"OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}

// journalDir is the crash journal's directory: OTELOMNI_JOURNAL_DIR
// (checked by readEnv), else WithJournal's, else none.
func journalDir(cfg *config) string {
	if d := os.Getenv(envJournalDir); d != "" {
		return d
	}
	return cfg.journalDir
}

func sdkDisabled() bool { return strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") }

// defaultLinkCountLimit is the links a span keeps when
// OTEL_SPAN_LINK_COUNT_LIMIT is unset: the SDK's own default (128) evicts
// the oldest links of a batch span beyond it, which would leave those
// members linking a batch that no longer links them; otelomni links at most
// 1024 members of a batch.
const defaultLinkCountLimit = 1024

// spanLimits are the SDK's span limits, from the variables readEnv read,
// with otelsetup's default value length: the SDK's own reading of them
// never takes effect.
func spanLimits(env envValues) sdktrace.SpanLimits {
	return sdktrace.SpanLimits{
		AttributeValueLengthLimit: env.int(defaultAttributeValueLengthLimit,
			"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
		AttributeValueDepthLimit:    sdktrace.DefaultAttributeValueDepthLimit,
		AttributeCountLimit:         env.int(sdktrace.DefaultAttributeCountLimit, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
		EventCountLimit:             env.int(sdktrace.DefaultEventCountLimit, "OTEL_SPAN_EVENT_COUNT_LIMIT"),
		LinkCountLimit:              env.int(defaultLinkCountLimit, "OTEL_SPAN_LINK_COUNT_LIMIT"),
		AttributePerEventCountLimit: env.int(sdktrace.DefaultAttributePerEventCountLimit, "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT"),
		AttributePerLinkCountLimit:  env.int(sdktrace.DefaultAttributePerLinkCountLimit, "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT"),
	}
}

func newResource(ctx context.Context, cfg *config) (*resource.Resource, error) {
	var own []attribute.KeyValue
	if cfg.serviceName != "" {
		own = append(own, attribute.String("service.name", cfg.serviceName))
	}
	own = append(own,
		attribute.String("telemetry.distro.name", "otelomni"),
		attribute.String("telemetry.distro.version", otelomni.Version))
	own = append(own, cfg.engine...)
	// A resource attribute that is not valid UTF-8 would cost every export.
	own = sanitize.KeyValues(own, 256, defaultAttributeValueLengthLimit)
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
	kind := strings.ToLower(firstEnv("OTEL_TRACES_EXPORTER"))
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
	} else {
		endpoint = sanitize.URL(endpoint, 256) // a start-up log line must not print a password
	}
	return fmt.Sprintf("otlp (%s) to %s", proto, endpoint)
}

func describeMetrics() string {
	kind := strings.ToLower(firstEnv("OTEL_METRICS_EXPORTER"))
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

func firstEnv(keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
	}
	return ""
}
