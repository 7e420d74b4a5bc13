// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/otelenv"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/otelomni"
)

// defaultAttributeValueLengthLimit bounds every string attribute value of
// spans and log records, in bytes, when neither
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT (for log records,
// OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT) nor
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is set. The SDK's own default is no
// limit, so one 10 MB value (a prompt, a base64 image) would cost a whole
// export batch; 4 KiB keeps every id, model name and error message whole.
// The SDK counts its limit in characters; the exporter otelsetup builds
// cuts again in bytes, so the bound holds in bytes on the wire.
const defaultAttributeValueLengthLimit = 4096

// defaultShutdownTimeout bounds [Telemetry.Shutdown] when neither
// [WithShutdownTimeout] nor the caller's context sets an earlier deadline:
// long enough to flush a full batch to a live collector, short enough that
// a dead one never holds up an engine's exit.
const defaultShutdownTimeout = 5 * time.Second

// Setup builds the OpenTelemetry SDK from the standard environment and,
// unless [WithoutGlobal] is given, installs its providers and propagator
// as the globals, which turns on every otelomni.Instrumenter that follows
// them. The propagator is what OTEL_PROPAGATORS names (tracecontext,
// baggage, b3, b3multi, jaeger, xray, ottrace, none; through
// go.opentelemetry.io/contrib/propagators/autoprop), W3C trace context and
// baggage when it is unset; [Telemetry.TextMapPropagator] returns it.
//
// The span exporter comes from OTEL_TRACES_EXPORTER (otlp, the default;
// console; none; see [NewSpanExporter]), the OTLP exporter from the
// OTEL_EXPORTER_OTLP_* variables (grpc or http/protobuf), the metric
// reader from OTEL_METRICS_EXPORTER (otlp, prometheus, console, none), the
// log exporter from OTEL_LOGS_EXPORTER (logs are exported only when it
// names an exporter), the sampler from OTEL_TRACES_SAMPLER, the batch
// processors' settings from OTEL_BSP_* and OTEL_BLRP_*, the span and log
// limits from their variables. OTEL_SDK_DISABLED=true makes everything a
// no-op but propagation. The resource carries service.name
// (OTEL_SERVICE_NAME, else [WithServiceName]), service.instance.id,
// OTEL_RESOURCE_ATTRIBUTES, the SDK's and otelomni's name and version,
// the host, and the process id and executable, but never the command-line
// arguments, which can hold secrets.
//
// Setup reads every variable itself, each number within a range (see
// docs/reliability.md), and hands what it read to the SDK and the
// exporters as options. A value that is not valid (an unknown exporter or
// sampler, a queue size out of range or padded with a space, a schedule
// delay of 0, an endpoint that is not a URL, a header gRPC cannot carry,
// ...) is warned about once through the OpenTelemetry error handler
// (otel.Handle), naming the variable, its value (bounded, secrets
// redacted) and what is used instead, and ignored: the variable's default
// takes effect, as the OpenTelemetry specification says. No value turns
// tracing off. Names of a set (otlp, grpc, gzip, always_on, ...) and true
// and false are read in any case.
//
// Setup never dials the collector: an unreachable one neither fails nor
// delays the engine's start, and exports never block a request (the batch
// processor drops, and counts, what does not fit its queue). A metric
// reader or log exporter that cannot be made (a Prometheus port in use)
// is warned about, and the other signals are set up without it. Setup
// returns an error, and a no-op Telemetry, only when the span exporter
// cannot be made.
//
// With [WithJournal] or OTELOMNI_JOURNAL_DIR, spans are also kept in a
// crash journal until exported, and the spans of earlier processes that
// died in that directory are exported on a goroutine of their own.
func Setup(ctx context.Context, opts ...Option) (*Telemetry, error) {
	cfg := config{shutdownTimeout: defaultShutdownTimeout}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	env, warnings := readEnv()
	for _, w := range warnings {
		otel.Handle(w)
	}
	// OTEL_SDK_DISABLED leaves propagation as OTEL_PROPAGATORS says: a
	// process that records nothing still carries its callers' context on.
	prop := envPropagator(env)
	propagateOnly := func() (*Telemetry, error) {
		if !cfg.noGlobal {
			otel.SetTextMapPropagator(prop)
		}
		return &Telemetry{prop: prop}, nil
	}
	if strings.EqualFold(env.str("OTEL_SDK_DISABLED"), "true") {
		return propagateOnly()
	}

	t := &Telemetry{shutdownTimeout: cfg.shutdownTimeout, prop: prop}
	exp, err := spanExporter(ctx, &cfg, env, t)
	if err != nil {
		return &Telemetry{}, err
	}
	readers := metricReaders(ctx, &cfg, env, t)
	var logExp sdklog.Exporter
	if !cfg.noGlobal {
		// The slog bridge logs through the global logger provider: without
		// the globals, no record could reach an exporter.
		if logExp, err = newLogExporter(ctx, env); err != nil {
			otel.Handle(fmt.Errorf("%w; logs are not exported", err))
		}
	}
	if exp == nil && len(cfg.processors) == 0 && len(readers) == 0 && logExp == nil {
		// Nothing would leave the process: recording would only cost.
		return propagateOnly()
	}

	res, err := newResource(ctx, &cfg, env)
	if err != nil {
		// A partial resource is still worth exporting with.
		otel.Handle(fmt.Errorf("otelsetup: detecting the resource: %w", err))
	}
	if exp != nil || len(cfg.processors) > 0 {
		limits := spanLimits(env)
		tpOpts := []sdktrace.TracerProviderOption{
			sdktrace.WithResource(res),
			sdktrace.WithRawSpanLimits(limits),
			sdktrace.WithSampler(sampler(env)),
		}
		if exp != nil {
			t.counts = &exportCounts{}
			safe := &safeExporter{exp: exp, c: t.counts, maxValue: limits.AttributeValueLengthLimit}
			var queued sdktrace.SpanExporter = safe
			if dir := journalDir(&cfg, env); dir != "" {
				if cj := openJournal(dir, env, exp, limits.AttributeValueLengthLimit); cj != nil {
					// The journal's processor goes before the batcher, so
					// that a span's end is journalled before it can be
					// exported; its wrapper confirms what the safe exporter
					// accepted or refused.
					t.journal = cj
					safe.exp = serialExporter{exp, &cj.mu}
					if cj.j != nil { // else only the dead processes' journals are recovered
						queued = cj.j.WrapExporter(safe)
						tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(cj.j.SpanProcessor()))
					}
				}
			}
			t.queue = newSpanQueue(queued, t.counts, limits.AttributeValueLengthLimit, batchOptions(env, cfg.batchOptions))
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(t.queue))
		}
		for _, p := range cfg.processors {
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(p))
		}
		t.tp = sdktrace.NewTracerProvider(tpOpts...)
	}
	if len(readers) > 0 {
		mpOpts := []sdkmetric.Option{
			sdkmetric.WithResource(res),
			sdkmetric.WithExemplarFilter(exemplarFilter(env)),
			sdkmetric.WithCardinalityLimit(env.int(defaultCardinality, "OTEL_GO_X_CARDINALITY_LIMIT")),
		}
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

// envPropagator is the propagator OTEL_PROPAGATORS names, or W3C trace
// context and baggage when it is unset or ignored.
func envPropagator(env *environ) propagation.TextMapPropagator {
	v := env.str("OTEL_PROPAGATORS")
	if v == "" {
		return defaultPropagator()
	}
	names, _, ok := propagatorNames(v)
	p, err := autoprop.TextMapPropagator(names...)
	if !ok || err != nil || p == nil {
		return defaultPropagator() // not reached: readEnv checked every name
	}
	return p
}

func defaultPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// sampler is the sampler OTEL_TRACES_SAMPLER names, with
// OTEL_TRACES_SAMPLER_ARG for the ratio samplers (1 when it is unset or
// ignored), as the SDK reads them.
func sampler(env *environ) sdktrace.Sampler {
	ratio := 1.0
	if arg := env.str("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
		ratio, _ = strconv.ParseFloat(arg, 64) // readEnv checked it
	}
	switch env.lower("OTEL_TRACES_SAMPLER") {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// exemplarFilter is the filter OTEL_METRICS_EXEMPLAR_FILTER names.
func exemplarFilter(env *environ) exemplar.Filter {
	switch env.lower("OTEL_METRICS_EXEMPLAR_FILTER") {
	case "always_on":
		return exemplar.AlwaysOnFilter
	case "always_off":
		return exemplar.AlwaysOffFilter
	}
	return exemplar.TraceBasedFilter
}

// spanExporter returns the exporter: the tests', the fallback when the
// environment names no exporter and no endpoint, or the environment's. It
// is nil when nothing is exported.
func spanExporter(ctx context.Context, cfg *config, env *environ, t *Telemetry) (sdktrace.SpanExporter, error) {
	switch {
	case cfg.exporter != nil:
		t.exporter = fmt.Sprintf("%T", cfg.exporter)
		return cfg.exporter, nil
	case cfg.fallbackSet && !env.names(exporterVars...):
		if cfg.fallback == nil {
			t.exporter = "none (no OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_*ENDPOINT set)"
			return nil, nil
		}
		t.exporter = fmt.Sprintf("%T", cfg.fallback)
		return cfg.fallback, nil
	}
	exp, desc, err := newSpanExporter(ctx, env)
	if exp != nil {
		t.exporter = desc
	}
	return exp, err
}

// metricReaders returns the reader that OTEL_METRICS_EXPORTER selects and
// the extra ones. With a fallback set and no metric exporter or endpoint
// named, none is made: a program that needs no server must not push to
// localhost. A reader that cannot be made is warned about.
func metricReaders(ctx context.Context, cfg *config, env *environ, t *Telemetry) []sdkmetric.Reader {
	readers := append([]sdkmetric.Reader(nil), cfg.metricReaders...)
	if cfg.noMetrics || (cfg.fallbackSet && !env.names(metricVars...)) {
		return readers
	}
	r, desc, err := newMetricReader(ctx, env)
	if err != nil {
		otel.Handle(fmt.Errorf("%w; metrics are not exported", err))
		return readers
	}
	if r == nil {
		return readers
	}
	t.metrics = desc
	return append(readers, r)
}

// exporterVars are the variables that configure where spans go.
var exporterVars = []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}

// metricVars are the variables that configure where metrics go.
var metricVars = []string{"OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}

// names reports whether one of the variables is set to a valid value.
func (e *environ) names(vars ...string) bool {
	for _, v := range vars {
		if e.str(v) != "" {
			return true
		}
	}
	return false
}

// journalDir is the crash journal's directory: OTELOMNI_JOURNAL_DIR, else
// WithJournal's, else none.
func journalDir(cfg *config, env *environ) string {
	if d := env.str(envJournalDir); d != "" {
		return d
	}
	return cfg.journalDir
}

// defaultLinkCountLimit is the links a span keeps when
// OTEL_SPAN_LINK_COUNT_LIMIT is unset: the SDK's own default (128) evicts
// the oldest links of a batch span beyond it, which would leave those
// members linking a batch that no longer links them; otelomni links at most
// 1024 members of a batch.
const defaultLinkCountLimit = 1024

// spanLimits are the SDK's span limits, from the variables readEnv read,
// with otelsetup's default value length: the SDK's own reading of them
// never takes effect.
func spanLimits(env *environ) sdktrace.SpanLimits {
	return sdktrace.SpanLimits{
		AttributeValueLengthLimit: env.int(defaultAttributeValueLengthLimit,
			"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
		AttributeValueDepthLimit:    sdktrace.DefaultAttributeValueDepthLimit,
		AttributeCountLimit:         env.int(defaultCount, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
		EventCountLimit:             env.int(defaultCount, "OTEL_SPAN_EVENT_COUNT_LIMIT"),
		LinkCountLimit:              env.int(defaultLinkCountLimit, "OTEL_SPAN_LINK_COUNT_LIMIT"),
		AttributePerEventCountLimit: env.int(defaultCount, "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT"),
		AttributePerLinkCountLimit:  env.int(defaultCount, "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT"),
	}
}

// newResource is the resource: what Setup detects, then otelsetup's own
// attributes and WithServiceName's name, then OTEL_RESOURCE_ATTRIBUTES,
// then OTEL_SERVICE_NAME, then WithResourceAttributes', each winning over
// those before it. The providers merge the SDK's own reading of the
// environment beneath it: every key of that reading is in it already.
func newResource(ctx context.Context, cfg *config, env *environ) (*resource.Resource, error) {
	var own []attribute.KeyValue
	if cfg.serviceName != "" {
		own = append(own, attribute.String("service.name", cfg.serviceName))
	}
	own = append(own,
		attribute.String("telemetry.distro.name", "otelomni"),
		attribute.String("telemetry.distro.version", otelomni.Version))
	own = append(own, otelenv.ResourceAttributes(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), defaultAttributeValueLengthLimit)...)
	if name := env.str("OTEL_SERVICE_NAME"); name != "" {
		own = append(own, attribute.String("service.name", name))
	}
	for _, kv := range cfg.resource {
		if kv.Key != "" {
			own = append(own, kv)
		}
	}
	// A resource attribute that is not valid UTF-8 would cost every export.
	own = sanitize.KeyValues(own, 256, defaultAttributeValueLengthLimit)
	res, err := resource.New(ctx,
		resource.WithService(), // default service.name and a fresh service.instance.id
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		// Deliberately not resource.WithProcess(): it would add
		// process.command_args, and command lines carry secrets.
		resource.WithProcessPID(),
		resource.WithProcessExecutableName(),
		resource.WithProcessExecutablePath(),
		resource.WithProcessRuntimeName(),
		resource.WithProcessRuntimeVersion(),
		resource.WithAttributes(own...),
	)
	if res == nil {
		res = resource.Default()
	}
	return res, err
}
