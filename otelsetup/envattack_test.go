// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The attack: every variable of the table, set to a padded, an
// upper-case, a negative, a huge, a non-ASCII, an overflowing, an empty
// and a white-space-only value. A value that is not valid is warned about
// once, naming the variable, tracing stays on, and what takes effect is
// what takes effect with the variable unset: the default. A valid one
// (an upper-case name of a set, a padded list) is taken without a word,
// and takes the effect of the value it spells. What takes effect is read
// from what Setup built: the exporter, the sampler, the resource, the
// propagator, the limits of exported spans, the exporters' own settings.

// attack is one value an operator, an env file or an attacker may write.
type attack struct{ kind, value string }

func attacks(sample string) []attack {
	return []attack{
		{"padded", " " + sample + " "},
		{"upper-case", strings.ToUpper(sample)},
		{"negative", "-1"},
		{"huge", strings.Repeat("9", maxEnvValue+1)},
		{"non-ASCII", "\uff58" + sample}, // a fullwidth x
		{"overflowing", "99999999999999999999999"},
		{"empty", ""},
		{"white space only", " \t "},
	}
}

// attackSpec says how one variable is attacked and observed.
type attackSpec struct {
	// sample is a valid value whose effect is not the default's.
	sample string
	// valid lists the kinds of attack whose value is valid; "upper-case"
	// in it means an upper-case sample takes the sample's own effect
	// (the value is read in any case).
	valid []string
	// asWritten lists the kinds whose value is valid and takes effect as
	// written: its effect is neither the default's nor the sample's.
	asWritten []string
	// env is set around each attack.
	env map[string]string
	// extra are further values, each not valid, that a reader other than
	// Setup would take.
	extra []attack
	// skip lists the kinds not tried: an upper-case path names another
	// directory, which Setup would make.
	skip []string
	// partner is a variable that an ignored value leaves alone, so
	// warned about too (a client key without its certificate).
	partner string
	// effect is what took effect, read from what Setup built.
	effect func(t *testing.T) string
}

// TestEveryVariableTakesEffectOrIsIgnored walks every variable Setup
// reads (the table, and the sampler's argument) with every attack.
func TestEveryVariableTakesEffectOrIsIgnored(t *testing.T) {
	specs := attackSpecs(t)
	names := []string{"OTEL_TRACES_SAMPLER_ARG"}
	for _, v := range envVars {
		names = append(names, v.name)
	}
	for _, name := range names {
		spec, ok := specs[name]
		if !ok {
			t.Errorf("%s is not attacked", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			at := func(value string) (string, []error) {
				unsetOTel(t)
				for k, v := range spec.env {
					t.Setenv(k, v)
				}
				t.Setenv(name, value)
				if value == "" {
					os.Unsetenv(name)
				}
				errs := keptErrors(t)
				if on := setupQuiet(t, enabled); on != "true" && !(name == "OTEL_SDK_DISABLED" || name == "OTEL_TRACES_EXPORTER") {
					t.Fatalf("%s=%.40q: tracing off", name, value)
				}
				var warned []error
				for _, err := range errs() {
					var w *EnvError
					if value != "" || !errors.As(err, &w) || w.Name != spec.partner {
						warned = append(warned, err) // unset, the partner is alone
					}
				}
				return spec.effect(t), warned
			}
			unset, warned := at("")
			if len(warned) != 0 {
				t.Fatalf("unset: %v", warned)
			}
			sample, warned := at(spec.sample)
			if len(warned) != 0 {
				t.Fatalf("%s=%q, valid, was warned about: %v", name, spec.sample, warned)
			}
			if sample == unset && name != "OTELOMNI_EXEMPLARS" && !strings.HasPrefix(name, "OMNI_") {
				t.Fatalf("%s=%q has the default's effect, %q: the observer sees nothing", name, spec.sample, unset)
			}
			for _, a := range append(attacks(spec.sample), spec.extra...) {
				if a.kind == "upper-case" && a.value == spec.sample || slices.Contains(spec.skip, a.kind) {
					continue // no letter to raise, or not to be tried
				}
				got, warned := at(a.value)
				want, valid := unset, true
				switch {
				case a.kind == "empty":
					// Unset, as the specification says.
				case slices.Contains(spec.asWritten, a.kind):
					if got == unset || got == sample {
						t.Errorf("%s %s %.40q: effect %q, want the value's own", name, a.kind, a.value, got)
					}
					want = got
				case slices.Contains(spec.valid, a.kind) || a.kind == "padded" && spec.list():
					want = sample
				default:
					valid = false
				}
				if valid && len(warned) != 0 {
					t.Errorf("%s %s %.40q, valid, was warned about: %v", name, a.kind, a.value, warned)
				}
				if !valid {
					checkOneWarning(t, name+" "+a.kind, spec.partner, warned)
				}
				if got != want {
					t.Errorf("%s %s %.40q: took effect as %q, want %q", name, a.kind, a.value, got, want)
				}
			}
		})
	}
}

func (s attackSpec) list() bool { return slices.Contains(s.valid, "padded") }

// checkOneWarning checks that warned holds one warning of otelsetup naming
// name (and at most one naming partner), in one line of at most 512
// bytes, and nothing else but the SDK's own reports.
func checkOneWarning(t *testing.T, what, partner string, warned []error) {
	name, _, _ := strings.Cut(what, " ")
	t.Helper()
	n := 0
	for _, err := range warned {
		var w *EnvError
		switch {
		case !errors.As(err, &w):
			if !sdkReport(name, err) {
				t.Errorf("%s: an error that is not a warning of otelsetup: %v", name, err)
			}
		case w.Name == name:
			n++
			if msg := w.Error(); len(msg) > 512 || strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, "using "+w.Using) {
				t.Errorf("%s: a warning of %d bytes, of more than one line, or not saying what is used: %q", name, len(msg), msg)
			}
		case w.Name != partner:
			t.Errorf("%s: a warning about %s", name, w.Name)
		}
	}
	if n != 1 {
		t.Errorf("%s: %d warnings naming it, want 1: %v", what, n, warned)
	}
}

// sdkReport reports whether err is one the SDK sends the error handler
// itself for a value of name, which it reads whatever Setup hands it: an
// unknown sampler (sdk/trace/provider.go:538), a ratio that is not one
// (sdk/trace/sampler_env.go), OTEL_RESOURCE_ATTRIBUTES that does not parse
// (sdk/resource/env.go, under every provider), a cardinality limit that
// is not a number (sdk/metric/config.go:217).
func sdkReport(name string, err error) bool {
	msg := err.Error()
	switch name {
	case "OTEL_TRACES_SAMPLER":
		return strings.HasPrefix(msg, "unsupported sampler: ")
	case "OTEL_TRACES_SAMPLER_ARG":
		return strings.HasPrefix(msg, "parsing sampler argument: ") || strings.HasPrefix(msg, "invalid trace ID ratio: ")
	case "OTEL_RESOURCE_ATTRIBUTES":
		return strings.Contains(msg, "partial resource") || strings.Contains(msg, "invalid URL escape")
	case "OTEL_GO_X_CARDINALITY_LIMIT":
		return strings.HasPrefix(msg, "strconv.Atoi: ")
	}
	return false
}

// setupQuiet sets up from the environment without the globals, with the
// span exporter the environment selects, runs read, and shuts down
// sending nothing.
func setupQuiet(t *testing.T, read func(*Telemetry) string, opts ...Option) string {
	t.Helper()
	tel, err := Setup(context.Background(), append([]Option{WithoutGlobal()}, opts...)...)
	if err != nil {
		t.Fatalf("Setup = %v: no value is an error", err)
	}
	defer tel.Shutdown(canceled())
	return read(tel)
}

func enabled(tel *Telemetry) string           { return fmt.Sprint(tel.Enabled()) }
func exporterOf(tel *Telemetry) string        { return tel.Exporter() }
func metricsExporterOf(tel *Telemetry) string { return tel.MetricsExporter() }

// exported sets up with an in-memory exporter, runs do with the tracer,
// and returns the spans exported.
func exported(t *testing.T, do func(trace.Tracer), opts ...Option) tracetest.SpanStubs {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	setupQuiet(t, func(tel *Telemetry) string {
		do(tel.TracerProvider().Tracer("t"))
		if err := tel.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		return ""
	}, append([]Option{WithSpanExporter(exp), WithoutMetrics()}, opts...)...)
	return exp.GetSpans()
}

func oneSpan(tr trace.Tracer) {
	_, s := tr.Start(context.Background(), "s")
	s.End()
}

// standardResource are the keys Setup puts on every resource itself.
var standardResource = []string{"service.name", "service.instance.id", "telemetry.sdk.name", "telemetry.sdk.language",
	"telemetry.sdk.version", "telemetry.distro.name", "telemetry.distro.version", "host.name", "process.pid",
	"process.executable.name", "process.executable.path", "process.runtime.name", "process.runtime.version",
	"process.runtime.description"}

func attackSpecs(t *testing.T) map[string]attackSpec {
	certs := testCertificates(t)
	endpoint := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_LOGS_EXPORTER": "otlp"}
	specs := map[string]attackSpec{
		"OTEL_SDK_DISABLED": {sample: "true", valid: []string{"upper-case"}, effect: func(t *testing.T) string {
			return setupQuiet(t, enabled, WithSpanExporter(discardExporter{}))
		}},
		"OTEL_PROPAGATORS": {sample: "b3, baggage", valid: []string{"padded", "upper-case"}, effect: func(t *testing.T) string {
			return setupQuiet(t, func(tel *Telemetry) string {
				f := tel.TextMapPropagator().Fields()
				sort.Strings(f)
				return strings.Join(f, ",")
			}, WithSpanExporter(discardExporter{}), WithoutMetrics())
		}},
		"OTEL_SERVICE_NAME": {sample: "dit-engine", asWritten: []string{"upper-case", "negative", "non-ASCII", "overflowing"},
			effect: func(t *testing.T) string {
				ss := exported(t, oneSpan, WithServiceName("from-code"))
				v, _ := ss[0].Resource.Set().Value("service.name")
				return v.AsString()
			}},
		"OTEL_RESOURCE_ATTRIBUTES": {sample: "deployment.environment=prod", valid: []string{"padded"}, asWritten: []string{"upper-case", "non-ASCII"},
			effect: func(t *testing.T) string {
				var kvs []string
				for _, kv := range exported(t, oneSpan)[0].Resource.Attributes() {
					if !slices.Contains(standardResource, string(kv.Key)) {
						kvs = append(kvs, string(kv.Key)+"="+kv.Value.String())
					}
				}
				return strings.Join(kvs, ",")
			}},
		"OTEL_TRACES_EXPORTER": {sample: "console", valid: []string{"upper-case"}, env: endpoint, effect: func(t *testing.T) string {
			return setupQuiet(t, exporterOf, WithoutMetrics())
		}},
		"OTEL_METRICS_EXPORTER": {sample: "console", valid: []string{"upper-case"}, env: endpoint, effect: func(t *testing.T) string {
			return setupQuiet(t, metricsExporterOf, WithSpanExporter(discardExporter{}))
		}},
		"OTEL_LOGS_EXPORTER": {sample: "console", valid: []string{"upper-case"}, effect: func(t *testing.T) string {
			env, _ := readEnv()
			exp, err := newLogExporter(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%T", exp)
		}},
		"OTEL_METRICS_PRODUCERS": {sample: "prometheus", valid: []string{"padded", "upper-case"},
			env: map[string]string{"OTEL_METRICS_EXPORTER": "console"}, effect: func(t *testing.T) string {
				env, _ := readEnv()
				r, _, err := newMetricReader(context.Background(), env)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Shutdown(canceled())
				f, _ := field(reflect.ValueOf(r), "externalProducers", 0)
				if p, ok := field(f, "v", 0); ok && p.IsValid() && (p.Kind() != reflect.Interface || !p.IsNil()) {
					for p.Kind() == reflect.Interface {
						p = p.Elem()
					}
					return fmt.Sprintf("%d producers", p.Len())
				}
				return "no producer"
			}},
		"OTEL_TRACES_SAMPLER":                   {sample: "always_off", valid: []string{"upper-case"}, effect: samplerEffect},
		"OTEL_TRACES_SAMPLER_ARG":               {sample: "0", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio"}, effect: samplerEffect},
		"OTEL_METRICS_EXEMPLAR_FILTER":          {sample: "always_on", valid: []string{"upper-case"}, effect: exemplarEffect},
		"OTEL_GO_X_OBSERVABILITY":               {sample: "true", valid: []string{"upper-case"}, effect: observabilityEffect},
		"OTEL_GO_X_SELF_OBSERVABILITY":          {sample: "true", valid: []string{"upper-case"}, effect: observabilityEffect},
		"OTEL_GO_X_PER_SERIES_START_TIMESTAMPS": {sample: "true", valid: []string{"upper-case"}, effect: startTimestampsEffect},
		// Read by resource.Default only, which Setup does not use: the
		// effect is the SDK's reading, the one the SDK documents.
		"OTEL_GO_X_RESOURCE": {sample: "true", valid: []string{"upper-case"}, effect: func(*testing.T) string {
			return fmt.Sprint(strings.EqualFold(os.Getenv("OTEL_GO_X_RESOURCE"), "true"))
		}},
		"OTEL_EXPORTER_PROMETHEUS_HOST": {sample: "127.0.0.1",
			env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_PORT": freePort(t)},
			effect: func(t *testing.T) string {
				return setupQuiet(t, metricsExporterOf, WithSpanExporter(discardExporter{}))
			}},
		"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": {sample: "delta", valid: []string{"upper-case"}, effect: metricExporterEffect},
		"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": {sample: "base2_exponential_bucket_histogram",
			valid: []string{"upper-case"}, effect: metricExporterEffect},
		envJournalDir: {sample: filepath.Join(t.TempDir(), "journal"), skip: []string{"upper-case"}, effect: func(t *testing.T) string {
			return setupQuiet(t, func(tel *Telemetry) string {
				if tel.journal == nil {
					return "no journal"
				}
				return filepath.Dir(tel.journal.j.Path())
			}, WithSpanExporter(discardExporter{}), WithoutMetrics())
		}},
	}
	// The numbers: what the observers of TestEveryNumberTakesEffectAsWrittenOrIsIgnored
	// observe, read here as the limits of an exported span and the
	// processors' settings.
	for _, v := range envVars {
		if v.hi == 0 || specs[v.name].effect != nil {
			continue
		}
		sample := fmt.Sprint(v.lo + 1)
		if v.name == "OTEL_EXPORTER_PROMETHEUS_PORT" {
			sample = freePort(t)
		}
		specs[v.name] = attackSpec{sample: sample, env: numberEnv(v.name), effect: numberEffect(v.name)}
	}
	for _, s := range signals {
		p := "OTEL_EXPORTER_OTLP_" + s
		withEndpoint := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_LOGS_EXPORTER": "otlp"}
		secure := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:1", "OTEL_LOGS_EXPORTER": "otlp"}
		specs[p+"ENDPOINT"] = attackSpec{sample: "http://collector.example:4318", asWritten: []string{"upper-case"},
			env: map[string]string{"OTEL_LOGS_EXPORTER": "otlp"}, effect: otlpEffect}
		specs[p+"PROTOCOL"] = attackSpec{sample: "grpc", valid: []string{"upper-case"}, env: withEndpoint, effect: otlpEffect}
		specs[p+"TIMEOUT"] = attackSpec{sample: "2500", env: withEndpoint, effect: otlpEffect}
		specs[p+"COMPRESSION"] = attackSpec{sample: "gzip", valid: []string{"upper-case"}, extra: []attack{{"padded gzip", "gzip "}},
			env: withEndpoint, effect: otlpEffect}
		specs[p+"INSECURE"] = attackSpec{sample: "true", valid: []string{"upper-case"},
			env: map[string]string{"OTEL_LOGS_EXPORTER": "otlp"}, effect: otlpEffect}
		specs[p+"HEADERS"] = attackSpec{sample: "api-key=abc", valid: []string{"padded"}, asWritten: []string{"upper-case"},
			extra: []attack{{"set by the exporters", "user-agent=x"}, {"twice", "a=1,A=2"}}, env: withEndpoint, effect: otlpEffect}
		specs[p+"CERTIFICATE"] = attackSpec{sample: certs.ca, env: secure, effect: otlpEffect}
		withKey := maps(secure, map[string]string{p + "CLIENT_KEY": certs.key})
		specs[p+"CLIENT_CERTIFICATE"] = attackSpec{sample: certs.cert, env: withKey, partner: p + "CLIENT_KEY", effect: otlpEffect}
		withCert := maps(secure, map[string]string{p + "CLIENT_CERTIFICATE": certs.cert})
		specs[p+"CLIENT_KEY"] = attackSpec{sample: certs.key, env: withCert, partner: p + "CLIENT_CERTIFICATE", effect: otlpEffect}
	}
	return specs
}

func maps(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// samplerEffect is what the sampler of the tracer provider decides: for a
// root span, a child of a sampled remote parent, a child of an unsampled
// one; and the sampler Setup hands the SDK, by its description.
func samplerEffect(t *testing.T) string {
	return setupQuiet(t, decisions, WithSpanExporter(discardExporter{}), WithoutMetrics())
}

func decisions(tel *Telemetry) string {
	tr := tel.TracerProvider().Tracer("t")
	parent := func(flags trace.TraceFlags) context.Context {
		return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: flags, Remote: true}))
	}
	var decisions []string
	for _, ctx := range []context.Context{context.Background(), parent(trace.FlagsSampled), parent(0)} {
		_, s := tr.Start(ctx, "s")
		decisions = append(decisions, fmt.Sprint(s.SpanContext().IsSampled()))
		s.End()
	}
	env, _ := readEnv()
	return sampler(env).Description() + " " + strings.Join(decisions, ",")
}

// exemplarEffect is which measurements carry an exemplar: under an
// unsampled span, and under a sampled one.
func exemplarEffect(t *testing.T) string {
	r := sdkmetric.NewManualReader()
	return setupQuiet(t, func(tel *Telemetry) string { return exemplars(t, tel, r) },
		WithSpanExporter(discardExporter{}), WithMetricReader(r), WithoutMetrics())
}

func exemplars(t *testing.T, tel *Telemetry, r *sdkmetric.ManualReader) string {
	h, _ := tel.MeterProvider().Meter("t").Float64Histogram("h")
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{byte(flags) + 1}, SpanID: trace.SpanID{1}, TraceFlags: flags}))
		h.Record(ctx, 1, metric.WithAttributes(attribute.Bool("sampled", flags.IsSampled())))
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, dp := range rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints {
		s, _ := dp.Attributes.Value("sampled")
		got = append(got, fmt.Sprintf("sampled=%v:%d", s.AsBool(), len(dp.Exemplars)))
	}
	sort.Strings(got)
	return strings.Join(got, ",")
}

// observabilityEffect is whether the SDK reports its own spans' starts, as
// it does with its self-observability on, through the global meter
// provider Setup installs.
func observabilityEffect(t *testing.T) string {
	restoreGlobals(t)
	r := sdkmetric.NewManualReader()
	tel, err := Setup(context.Background(), WithSpanExporter(discardExporter{}), WithMetricReader(r), WithoutMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(canceled())
	oneSpan(tel.TracerProvider().Tracer("t"))
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "otel.sdk.span.started" {
				return "the SDK observes itself"
			}
		}
	}
	return "no self-observability"
}

// restoreGlobals puts back the OpenTelemetry globals after the test.
func restoreGlobals(t *testing.T) {
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(tp); otel.SetMeterProvider(mp); otel.SetTextMapPropagator(prop) })
}

// startTimestampsEffect is whether a series that appears later starts
// when it appears, or when the instrument's first series did.
func startTimestampsEffect(t *testing.T) string {
	var got string
	synctest.Test(t, func(t *testing.T) {
		r := sdkmetric.NewManualReader()
		tel, err := Setup(context.Background(), WithoutGlobal(), WithSpanExporter(discardExporter{}), WithMetricReader(r), WithoutMetrics())
		if err != nil {
			t.Fatal(err)
		}
		c, _ := tel.MeterProvider().Meter("t").Int64Counter("c")
		c.Add(context.Background(), 1, metric.WithAttributes(attribute.Int("series", 1)))
		time.Sleep(time.Second)
		c.Add(context.Background(), 1, metric.WithAttributes(attribute.Int("series", 2)))
		var rm metricdata.ResourceMetrics
		if err := r.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		dps := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64]).DataPoints
		got = fmt.Sprint("one start: ", dps[0].StartTime.Equal(dps[1].StartTime))
		_ = tel.Shutdown(context.Background())
	})
	return got
}

// metricExporterEffect is the temporality and the histogram aggregation
// of the OTLP metric exporter Setup builds.
func metricExporterEffect(t *testing.T) string {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	env, _ := readEnv()
	exp, _, err := newMetricExporter(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(canceled())
	return fmt.Sprintf("%v %T", exp.Temporality(sdkmetric.InstrumentKindCounter), exp.Aggregation(sdkmetric.InstrumentKindHistogram))
}

// numberEnv are the variables set beside a number variable for its
// effect to be seen.
func numberEnv(name string) map[string]string {
	switch {
	case name == "OTEL_EXPORTER_PROMETHEUS_PORT":
		return map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1"}
	case strings.HasPrefix(name, "OTEL_EXPORTER_OTLP_"):
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_LOGS_EXPORTER": "otlp"}
	}
	return nil
}

// numberEffect is what a number variable sets, read from what Setup
// built: the batch processors' and the metric reader's settings, the
// limits an exported span keeps, the journal's size.
func numberEffect(name string) func(t *testing.T) string {
	return func(t *testing.T) string {
		switch {
		case strings.HasPrefix(name, "OTEL_BSP_"):
			return setupQuiet(t, func(tel *Telemetry) string {
				c := sdkBatchConfig(t, tel)
				return fmt.Sprintf("queue %d, batch %d, delay %v, timeout %v", tel.queue.limit, c.MaxExportBatchSize, c.BatchTimeout, c.ExportTimeout)
			}, WithSpanExporter(discardExporter{}), WithoutMetrics())
		case strings.HasPrefix(name, "OTEL_BLRP_"), strings.HasPrefix(name, "OTEL_LOGRECORD_"):
			// The queue, the batch and the timeout as the SDK holds them;
			// the delay and the limits as Setup hands them to it (observed
			// on a synctest clock and on exported records by
			// TestEveryNumberTakesEffectAsWrittenOrIsIgnored).
			_, bp := loggerProvider(t, &logs{})
			defer bp.Shutdown(canceled())
			env, _ := readEnv()
			return fmt.Sprintf("queue %d, batch %d, timeout %v, delay %v, value %d, count %d", intField(t, bp, "cap"),
				intField(t, bp, "batchSize"), time.Duration(intField(t, bp, "timeout")), env.duration(defaultLogDelay, "OTEL_BLRP_SCHEDULE_DELAY"),
				env.int(defaultAttributeValueLengthLimit, "OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
				env.int(defaultCount, "OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"))
		case strings.HasPrefix(name, "OTEL_METRIC_EXPORT_"):
			env, _ := readEnv()
			r := sdkmetric.NewPeriodicReader(&metrics{exports: make(chan time.Time, 1)}, periodicOptions(env, nil)...)
			defer r.Shutdown(canceled())
			return fmt.Sprintf("interval %v, timeout %v", time.Duration(intField(t, r, "interval")), time.Duration(intField(t, r, "timeout")))
		case name == "OTEL_GO_X_CARDINALITY_LIMIT":
			return setupQuiet(t, func(tel *Telemetry) string { return fmt.Sprint(intField(t, tel.mp, "cardinalityLimit")) },
				WithSpanExporter(discardExporter{}), WithMetricReader(sdkmetric.NewManualReader()), WithoutMetrics())
		case name == "OTEL_EXPORTER_PROMETHEUS_PORT":
			// Where the exporter listens: the default port may be another
			// process's (observePrometheusPort serves on an accepted one).
			env, _ := readEnv()
			return fmt.Sprint(env.int(defaultPrometheusPort, "OTEL_EXPORTER_PROMETHEUS_PORT"))
		case strings.HasPrefix(name, "OTEL_EXPORTER_OTLP_"):
			return otlpEffect(t)
		case name == envJournalSize || name == envJournalSync:
			return setupQuiet(t, func(tel *Telemetry) string {
				st, err := os.Stat(tel.journal.j.Path())
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("%d MiB, flushed every %v", (st.Size()+1<<20-1)>>20, tel.journal.j.SyncInterval())
			}, WithSpanExporter(discardExporter{}), WithoutMetrics(), WithJournal(t.TempDir()))
		}
		// The span limits: what an exported span keeps of more than the
		// largest limit.
		// More than every default: 128 attributes, events and attributes
		// per event or link, 1024 links, 4096 bytes of a value.
		kvs := make([]attribute.KeyValue, defaultCount+1)
		for i := range kvs {
			kvs[i] = attribute.Int(fmt.Sprint("k", i), i)
		}
		links := make([]trace.Link, defaultLinkCountLimit+1)
		for i := range links {
			links[i] = trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(i), byte(i >> 8), 1}})}
		}
		links[len(links)-1].Attributes = kvs // the SDK keeps the last links
		long := attribute.String("v", strings.Repeat("x", defaultAttributeValueLengthLimit+1))
		ss := exported(t, func(tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "s", trace.WithLinks(links...),
				trace.WithAttributes(append([]attribute.KeyValue{long}, kvs...)...))
			for range defaultCount + 1 {
				s.AddEvent("e", trace.WithAttributes(kvs...))
			}
			s.End()
		})
		s := ss[0]
		value := 0
		for _, kv := range s.Attributes {
			if kv.Key == "v" {
				value = len(kv.Value.AsString())
			}
		}
		return fmt.Sprintf("value %d, attributes %d, events %d, event attributes %d, links %d, link attributes %d",
			value, len(s.Attributes), len(s.Events), len(s.Events[0].Attributes), len(s.Links), len(s.Links[len(s.Links)-1].Attributes))
	}
}

// otlpEffect is where and how each OTLP exporter sends: the destination
// Setup resolved for each signal, and the trace exporter's own settings,
// which show that Setup's options won over the exporter's own reading of
// the environment.
func otlpEffect(t *testing.T) string {
	env, _ := readEnv()
	var b strings.Builder
	for _, s := range signals[1:] {
		d := env.otlpDest(s)
		h := make([]string, 0, len(d.headers))
		for k, v := range d.headers {
			h = append(h, k+"="+v)
		}
		sort.Strings(h)
		tlsDesc := "plain"
		if d.tls != nil {
			tlsDesc = fmt.Sprintf("tls (own roots %v, %d client certificates)", d.tls.RootCAs != nil, len(d.tls.Certificates))
		}
		fmt.Fprintf(&b, "%s%s %s headers %v timeout %v gzip %v %s; ", s, d.protocol, d.url.String(), h, d.timeout, d.gzip, tlsDesc)
	}
	exporterTakesDest(t, env)
	return b.String()
}

// exporterTakesDest checks that the trace and metric exporters Setup
// builds hold the destination Setup resolved, whatever they read from the
// environment themselves: each setting reached them as an option.
func exporterTakesDest(t *testing.T, env *environ) {
	t.Helper()
	get := func(v any, name string) (reflect.Value, bool) { return field(reflect.ValueOf(v), name, 0) }
	d := env.otlpDest("TRACES_")
	exp, _, err := newSpanExporter(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(canceled())
	var got, want string
	if d.protocol == "grpc" {
		ep, _ := get(exp, "endpoint")
		md, _ := get(exp, "metadata")
		to, _ := get(exp, "exportTimeout")
		got = fmt.Sprintf("grpc %s, %d headers, timeout %v", ep.String(), md.Len(), time.Duration(to.Int()))
		want = fmt.Sprintf("grpc %s, %d headers, timeout %v", d.url.Host, len(d.headers), d.timeout)
	} else {
		ep, _ := get(exp, "Endpoint")
		p, _ := get(exp, "URLPath")
		ins, _ := get(exp, "Insecure")
		comp, _ := get(exp, "Compression")
		h, _ := get(exp, "Headers")
		to, _ := get(exp, "Timeout") // the client's
		got = fmt.Sprintf("http %s%s, insecure %v, gzip %v, %d headers, timeout %v", ep.String(), p.String(), ins.Bool(),
			comp.Int() != 0, h.Len(), time.Duration(to.Int()))
		want = fmt.Sprintf("http %s%s, insecure %v, gzip %v, %d headers, timeout %v", d.url.Host, d.url.Path, d.tls == nil,
			d.gzip, len(d.headers), d.timeout)
	}
	if got != want {
		t.Errorf("the trace exporter holds %s, Setup resolved %s", got, want)
	}
	md := env.otlpDest("METRICS_")
	mexp, _, err := newMetricExporter(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	defer mexp.Shutdown(canceled())
	if md.protocol == "grpc" {
		h, _ := get(mexp, "metadata")
		to, _ := get(mexp, "exportTimeout")
		got = fmt.Sprintf("%d headers, timeout %v", h.Len(), time.Duration(to.Int()))
	} else {
		req, _ := get(mexp, "req")
		comp, _ := get(mexp, "compression")
		to, _ := get(mexp, "Timeout")
		u, _ := field(req, "URL", 0)
		host, _ := field(u, "Host", 0)
		path, _ := field(u, "Path", 0)
		scheme, _ := field(u, "Scheme", 0)
		got = fmt.Sprintf("%s://%s%s, gzip %v, timeout %v", scheme.String(), host.String(), path.String(), comp.Int() != 0, time.Duration(to.Int()))
		want = fmt.Sprintf("%s://%s%s, gzip %v, timeout %v", md.url.Scheme, md.url.Host, md.url.Path, md.gzip, md.timeout)
	}
	if md.protocol == "grpc" {
		want = fmt.Sprintf("%d headers, timeout %v", len(md.headers), md.timeout)
	}
	if got != want {
		t.Errorf("the metric exporter holds %s, Setup resolved %s", got, want)
	}
}

// certFiles are a CA certificate, and a client certificate and its key,
// in PEM files.
type certFiles struct{ ca, cert, key string }

// testCertificates writes a self-signed certificate and its key into a
// directory of t's.
func testCertificates(t *testing.T) certFiles {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "otelsetup test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return certFiles{ca: write("ca.pem", "CERTIFICATE", der), cert: write("cert.pem", "CERTIFICATE", der),
		key: write("key.pem", "EC PRIVATE KEY", kder)}
}
