// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/otelomni/otelomni/otelsetup"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// handled sets an OpenTelemetry error handler for the test that keeps
// what it is given, and returns a function that reads it.
func handled(t *testing.T) func() []error {
	t.Helper()
	var (
		mu   sync.Mutex
		errs []error
	)
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

// warnings returns the warnings of otelsetup among errs, by variable.
func warnings(errs []error) map[string][]*otelsetup.EnvError {
	by := map[string][]*otelsetup.EnvError{}
	for _, err := range errs {
		var w *otelsetup.EnvError
		if errors.As(err, &w) {
			by[w.Name] = append(by[w.Name], w)
		}
	}
	return by
}

// setupQuietly sets up from the environment without the globals, and
// shuts down without exporting anything: no test sends to a default
// endpoint, where another process may listen.
func setupQuietly(t *testing.T, opts ...otelsetup.Option) *otelsetup.Telemetry {
	t.Helper()
	tel, err := otelsetup.Setup(context.Background(), append([]otelsetup.Option{otelsetup.WithoutGlobal()}, opts...)...)
	if err != nil {
		t.Fatalf("Setup = %v, want no error: no value is an error", err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(canceledContext()) })
	return tel
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// oneWarning checks that the variable name, and no other, was warned
// about, once, in one line of at most 512 bytes that says what is used
// instead.
func oneWarning(t *testing.T, errs []error, name string) *otelsetup.EnvError {
	t.Helper()
	by := warnings(errs)
	if len(by[name]) != 1 || len(by) != 1 {
		t.Fatalf("warnings %v, want one, naming %s", errs, name)
	}
	w := by[name][0]
	if msg := w.Error(); len(msg) > 512 || strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, name) ||
		!strings.Contains(msg, "; ignored, using ") || w.Using == "" {
		t.Errorf("a warning of %d bytes, more than one line, or not saying what is used: %q", len(msg), msg)
	}
	return w
}

// TestInvalidVariablesAreWarnedAboutAndIgnored: each value here is not
// valid; Setup warns about it once, naming it, and goes on with tracing
// on.
func TestInvalidVariablesAreWarnedAboutAndIgnored(t *testing.T) {
	cases := []struct{ name, value string }{
		{"OTEL_BSP_MAX_QUEUE_SIZE", "-5"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-1"},
		{"OTEL_BSP_SCHEDULE_DELAY", "0"},
		{"OTEL_BSP_EXPORT_TIMEOUT", "soon"},
		{"OTEL_TRACES_SAMPLER", "bogus"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "://bad"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://collector:4317"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:99999"},
		{"OTEL_SDK_DISABLED", "maybe"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "-1"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/xml"},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"},
		{"OTEL_EXPORTER_OTLP_INSECURE", "yes"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "a=b%0D%0AX-Injected: 1"},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"},
		{"OTEL_TRACES_EXPORTER", "carrier-pigeon"},
		{"OTEL_METRICS_EXPORTER", "graphite"},
		{"OTEL_LOGS_EXPORTER", "syslog"},
		{"OTEL_SERVICE_NAME", "engine\xff"},
		{"OTEL_SERVICE_NAME", strings.Repeat("s", 300)},
		{"OTEL_RESOURCE_ATTRIBUTES", "deployment=%ff"},
		{"OTEL_RESOURCE_ATTRIBUTES", "novalue"},
		{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "0"},
		{"OTEL_SPAN_EVENT_COUNT_LIMIT", "-3"},
		{"OTEL_METRIC_EXPORT_INTERVAL", "0"},
		{"OTEL_METRIC_EXPORT_INTERVAL", "99"},
		// What the exporters would leave out of a URL.
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces?tenant=a"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/#x"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://" + strings.Repeat("a", 254) + ":4318"},
		{"OTEL_EXPORTER_PROMETHEUS_PORT", "70000"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", strings.Repeat("x", 1<<20)},
		{"OTEL_PROPAGATORS", "tracecontext,zipkin"},
		{"OTEL_PROPAGATORS", "tracecontext,,baggage"},
		{"OTEL_PROPAGATORS", "zipkin,none"}, // a typo is found beside none too
		{"OTEL_PROPAGATORS", "tracecontext,"},
		{"OTEL_PROPAGATORS", strings.Repeat("zipkin,", 500)},
		{"OTEL_PROPAGATORS", "x\nERROR a forged log line,tracecontext"},
	}
	for _, tc := range cases {
		t.Run(tc.name+"="+tc.value[:min(len(tc.value), 20)], func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv(tc.name, tc.value)
			errs := handled(t)
			tel := setupQuietly(t)
			if !tel.Enabled() {
				t.Fatal("tracing off")
			}
			oneWarning(t, errs(), tc.name)
		})
	}
}

// TestInvalidVariablesNeverPrintTheirSecrets: an invalid endpoint or
// header is exactly the value a warning prints, and the warning must not
// show its password, token or header value.
func TestInvalidVariablesNeverPrintTheirSecrets(t *testing.T) {
	cases := []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret pw@127.0.0.1:1"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://user:s3cret@127.0.0.1:1"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:99999/?token=s3cret"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer s3cret,broken"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer s3cret"},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "s3cret"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3c?ret@127.0.0.1:99999"},
		// Valid URLs, but the exporters would silently not send them.
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret@127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://s3cret@collector:4318/v1/traces"},
	}
	for _, tc := range cases {
		clearOTelEnv(t)
		t.Setenv(tc.name, tc.value)
		t.Setenv("OTEL_METRICS_EXPORTER", "none")
		errs := handled(t)
		setupQuietly(t)
		if w := oneWarning(t, errs(), tc.name); strings.Contains(w.Error(), "s3cret") {
			t.Errorf("%s: the warning shows the secret: %v", tc.name, w)
		}
		exp, err := otelsetup.NewSpanExporter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = exp.Shutdown(canceledContext())
		if w := oneWarning(t, errs()[1:], tc.name); strings.Contains(w.Error(), "s3cret") {
			t.Errorf("%s: NewSpanExporter's warning shows the secret: %v", tc.name, w)
		}
	}
}

func TestValidVariablesAreAcceptedWithoutAWarning(t *testing.T) {
	// The control of the tests above: each variable, valid, is taken
	// without a word.
	env := map[string]string{
		"OTEL_BSP_MAX_QUEUE_SIZE": "4096", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "256", "OTEL_BSP_SCHEDULE_DELAY": "200",
		"OTEL_TRACES_SAMPLER": "ParentBased_TraceIdRatio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "FALSE",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "1000", "OTEL_EXPORTER_OTLP_PROTOCOL": "HTTP/Protobuf",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "GZIP", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc%20def,x=y",
		"OTEL_METRICS_EXPORTER": "None", "OTEL_SERVICE_NAME": "dit-engine", "OTEL_TRACES_EXPORTER": "OTLP",
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,team=gen%20ai",
		"OTEL_PROPAGATORS":         "tracecontext, baggage, B3",
	}
	clearOTelEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	errs := handled(t)
	if tel := setupQuietly(t); !tel.Enabled() || tel.Exporter() != "otlp (http/protobuf) to http://127.0.0.1:4318/v1/traces" {
		t.Errorf("enabled %v, exporting %s", tel.Enabled(), tel.Exporter())
	}
	if w := warnings(errs()); len(w) != 0 {
		t.Errorf("warnings %v, want none", w)
	}
}

func TestSamplerArgumentIsCheckedOnlyForARatioSampler(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "abc")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	errs := handled(t)
	setupQuietly(t)
	if w := warnings(errs()); len(w) != 0 {
		t.Errorf("no sampler reads the argument: %v", w)
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	for _, arg := range []string{"abc", "1.5", "-0.1", "NaN", " 0.5"} {
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", arg)
		errs := handled(t)
		setupQuietly(t)
		if w := oneWarning(t, errs(), "OTEL_TRACES_SAMPLER_ARG"); w.Using != "1" {
			t.Errorf("traceidratio with %q: using %s, want a ratio of 1", arg, w.Using)
		}
	}
}

// TestPropagatorsFollowTheEnvironment: the propagator Setup installs, and
// Telemetry.TextMapPropagator returns, is the one OTEL_PROPAGATORS names,
// with the SDK disabled too.
func TestPropagatorsFollowTheEnvironment(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"", "baggage,traceparent,tracestate"},
		{"b3", "b3"},
		{" b3multi , tracecontext ", "traceparent,tracestate,x-b3-flags,x-b3-sampled,x-b3-spanid,x-b3-traceid"},
		{"jaeger,xray,ottrace", "ot-tracer-sampled,ot-tracer-spanid,ot-tracer-traceid,uber-trace-id,x-amzn-trace-id"},
		{"none", ""},
		{"tracecontext,none", ""},
		{"TraceContext, TRACECONTEXT,tracecontext", "traceparent,tracestate"}, // case ignored, each once
	} {
		for _, disabled := range []string{"false", "true"} {
			t.Run(c.env+" disabled="+disabled, func(t *testing.T) {
				clearOTelEnv(t)
				t.Setenv("OTEL_SDK_DISABLED", disabled)
				t.Setenv("OTEL_TRACES_EXPORTER", "console")
				t.Setenv("OTEL_METRICS_EXPORTER", "none")
				t.Setenv("OTEL_PROPAGATORS", c.env)
				before := otel.GetTextMapPropagator()
				t.Cleanup(func() { otel.SetTextMapPropagator(before) })
				tel, err := otelsetup.Setup(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tel.Shutdown(context.Background()) }()
				fields := func(p propagation.TextMapPropagator) string {
					f := p.Fields()
					for i := range f {
						f[i] = strings.ToLower(f[i])
					}
					sort.Strings(f)
					return strings.Join(f, ",")
				}
				if got := fields(tel.TextMapPropagator()); got != c.want {
					t.Errorf("Telemetry's propagator carries %q, want %q", got, c.want)
				}
				if got := fields(otel.GetTextMapPropagator()); got != c.want {
					t.Errorf("the global propagator carries %q, want %q", got, c.want)
				}
			})
		}
	}
}

var registerOnce sync.Once

// TestPropagatorRegisteredWithCapitalsIsFound: a propagator a program
// registers with autoprop under a name with capitals is found as given;
// an unknown name is quoted as the user wrote it.
func TestPropagatorRegisteredWithCapitalsIsFound(t *testing.T) {
	registerOnce.Do(func() { autoprop.RegisterTextMapPropagator("OmniTest", propagation.Baggage{}) })
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_PROPAGATORS", "OmniTest")
	tel := setupQuietly(t)
	if f := tel.TextMapPropagator().Fields(); len(f) != 1 || f[0] != "baggage" {
		t.Errorf("fields %v, want the registered baggage propagator", f)
	}
	t.Setenv("OTEL_PROPAGATORS", "tracecontext,ZipKin")
	errs := handled(t)
	tel = setupQuietly(t)
	if w := oneWarning(t, errs(), "OTEL_PROPAGATORS"); !strings.Contains(w.Error(), `"ZipKin"`) {
		t.Errorf("%v, want the unknown name as written", w)
	}
	if f := tel.TextMapPropagator().Fields(); len(f) != 3 {
		t.Errorf("fields %v, want the default, trace context and baggage", f)
	}
}

// TestNumbersOutOfRangeOrPaddedAreIgnored: each value here, handed to the
// SDK, would panic Setup, exhaust memory, spin a core, or be read by the
// SDK otherwise than otelsetup reads it. Each is warned about and
// ignored: the default takes effect (what takes effect is shown for every
// variable by TestEveryVariableTakesEffectOrIsIgnored).
func TestNumbersOutOfRangeOrPaddedAreIgnored(t *testing.T) {
	cases := []struct{ name, value, using string }{
		{"OTEL_BSP_MAX_QUEUE_SIZE", "9223372036854775807", "2048"}, // makechan: size out of range
		{"OTEL_BSP_MAX_QUEUE_SIZE", "100000000000", "2048"},        // out of memory
		{"OTEL_BSP_SCHEDULE_DELAY", "9223372036855", "5000"},       // overflows to a negative delay: a core spins
		{"OTEL_BSP_EXPORT_TIMEOUT", "9223372036855", "30000"},
		{"OTEL_METRIC_EXPORT_INTERVAL", "9223372036855", "60000"},
		{"OTEL_METRIC_EXPORT_TIMEOUT", "9223372036855", "30000"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "9223372036855", "10000"},
		{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "9223372036855", "10000"},
		{"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "9223372036855", "10000"},
		{"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "9223372036855", "10000"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "100000 ", "2048"}, // the SDK, which does not trim, would use 2048
		{"OTEL_BSP_MAX_QUEUE_SIZE", " 100000", "2048"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "+5", "2048"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0x10", "2048"},
		{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100 ", "4096"},
		{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100\u00a0", "4096"},
		{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "5 ", "128"},
		{"OTEL_ATTRIBUTE_COUNT_LIMIT", "-1", "128"},      // no limit, to the SDK
		{"OTEL_BLRP_MAX_QUEUE_SIZE", "20000000", "2048"}, // 12 GiB and 104 s inside Setup
		{"OTEL_BLRP_SCHEDULE_DELAY", "soon", "1000"},
		{"OTEL_BLRP_EXPORT_TIMEOUT", "0", "30000"},
		{"OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", "-1", "512"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096", "512"}, // more than the default queue of 2048
		{"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "-1", "128"},
		{"OTEL_TRACES_EXPORTER", " otlp", "otlp"},
		{"OTEL_METRICS_EXEMPLAR_FILTER", "sometimes", "trace_based"},
		{"OTEL_EXPORTER_PROMETHEUS_HOST", "0x10", "localhost"},
	}
	for _, tc := range cases {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv(tc.name, tc.value)
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			errs := handled(t)
			if tel := setupQuietly(t); !tel.Enabled() {
				t.Fatal("tracing off")
			}
			if w := oneWarning(t, errs(), tc.name); w.Using != tc.using {
				t.Errorf("using %q, want %q", w.Using, tc.using)
			}
		})
	}
}

// TestHeadersTheExportersWouldNotSendAreIgnored: each of these, handed to
// the exporters, would not be sent over one protocol or both (a quoted
// name, as an env file leaves it), or would cost every span over gRPC (a
// value gRPC cannot carry), reported only at Shutdown.
func TestHeadersTheExportersWouldNotSendAreIgnored(t *testing.T) {
	for _, v := range []string{
		`"api-key"=x`, `"api-key=x"`, `'api-key'=x`,
		"api-key=%C3%A9", "api-key=caf\u00e9", "api-key=%00x", "api-key=%7F",
		"api-key=a,API-Key=b",     // one header twice: HTTP keeps one of them, at random
		"content-type=text/plain", // set by the exporters themselves
		"grpc-timeout=1S", "user-agent=x", "te=trailers",
		"api!key=x", "api key=x", "api:key=x", // gRPC carries letters, digits, '-', '_', '.' only
		"=x", "api-key", "a=b,,c=d", "a=b,",
	} {
		t.Run(v, func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", v)
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			errs := handled(t)
			setupQuietly(t)
			if w := oneWarning(t, errs(), "OTEL_EXPORTER_OTLP_HEADERS"); w.Using != "no headers" {
				t.Errorf("using %s, want no headers", w.Using)
			}
		})
	}
}

// TestAGRPCEndpointWithAPathIsIgnoredForTheSignalsOverGRPC: the gRPC
// exporters send to the host only, so a path would be left out; over
// HTTP it is used.
func TestAGRPCEndpointWithAPathIsIgnoredForTheSignalsOverGRPC(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317/otlp")
	errs := handled(t)
	if tel := setupQuietly(t); len(warnings(errs())) != 0 || tel.Exporter() != "otlp (http/protobuf) to http://collector:4317/otlp/v1/traces" {
		t.Fatalf("over HTTP, a base path is used: %v, exporting %s", errs(), tel.Exporter())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
	errs = handled(t)
	tel := setupQuietly(t)
	if w := oneWarning(t, errs(), "OTEL_EXPORTER_OTLP_ENDPOINT"); !strings.Contains(w.Error(), "traces") ||
		w.Using != "the default endpoint for traces" || tel.Exporter() != "otlp (grpc) to https://localhost:4317" {
		t.Errorf("%v, exporting %s: want the endpoint ignored for traces", w, tel.Exporter())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4317")
	errs = handled(t)
	if tel := setupQuietly(t); len(warnings(errs())) != 0 || tel.Exporter() != "otlp (grpc) to http://collector:4317" {
		t.Errorf("traces have an endpoint of their own: %v, exporting %s", errs(), tel.Exporter())
	}
}
