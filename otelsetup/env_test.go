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

func TestMalformedVariablesGiveAnErrorAndANoopTelemetry(t *testing.T) {
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
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
			var envErr *otelsetup.EnvError
			if !errors.As(err, &envErr) || envErr.Name != tc.name {
				t.Fatalf("Setup = %v, want an *EnvError naming %s", err, tc.name)
			}
			if len(err.Error()) > 512 || strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("an error of %d bytes, or of more than one line: %q", len(err.Error()), err.Error())
			}
			if tel == nil || tel.Enabled() {
				t.Fatal("want a no-op Telemetry")
			}
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMalformedVariablesNeverPrintTheirSecrets: a malformed endpoint or
// header is exactly the value an error prints, and the error must not
// show its password, token or header value.
func TestMalformedVariablesNeverPrintTheirSecrets(t *testing.T) {
	cases := []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret pw@127.0.0.1:1"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://user:s3cret@127.0.0.1:1"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:99999/?token=s3cret"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer s3cret,broken"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer s3cret"},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "s3cret"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3c?ret@127.0.0.1:99999"},
		// Well formed, but the exporters would silently not send them.
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret@127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://s3cret@collector:4318/v1/traces"},
	}
	for _, tc := range cases {
		clearOTelEnv(t)
		t.Setenv(tc.name, tc.value)
		for _, check := range []func() error{otelsetup.CheckEnvironment, func() error {
			_, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
			return err
		}} {
			err := check()
			var envErr *otelsetup.EnvError
			if !errors.As(err, &envErr) || envErr.Name != tc.name {
				t.Fatalf("%s=%q: %v, want an *EnvError naming it", tc.name, tc.value, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: the error shows the secret: %v", tc.name, err)
			}
		}
	}
}

func TestWellFormedVariablesAreAccepted(t *testing.T) {
	// The control of the test above: each variable, well formed, passes.
	env := map[string]string{
		"OTEL_BSP_MAX_QUEUE_SIZE": "4096", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "256", "OTEL_BSP_SCHEDULE_DELAY": "200",
		"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "false",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "1000", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc%20def,x=y",
		"OTEL_METRICS_EXPORTER": "none", "OTEL_SERVICE_NAME": "dit-engine",
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,team=gen%20ai",
		"OTEL_PROPAGATORS":         "tracecontext, baggage, b3",
	}
	clearOTelEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
	if err != nil || !tel.Enabled() {
		t.Fatalf("Setup = %v, enabled %v", err, tel.Enabled())
	}
	_ = tel.Shutdown(context.Background())
}

func TestSamplerArgumentIsCheckedOnlyForARatioSampler(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "abc")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if _, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal()); err != nil {
		t.Errorf("no sampler reads the argument: %v", err)
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	for _, arg := range []string{"abc", "1.5", "-0.1", "NaN"} {
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", arg)
		if _, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal()); err == nil {
			t.Errorf("traceidratio with %q accepted", arg)
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
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	_ = tel.Shutdown(context.Background())
	if f := tel.TextMapPropagator().Fields(); len(f) != 1 || f[0] != "baggage" {
		t.Errorf("fields %v, want the registered baggage propagator", f)
	}
	t.Setenv("OTEL_PROPAGATORS", "tracecontext,ZipKin")
	if _, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal()); err == nil || !strings.Contains(err.Error(), `"ZipKin"`) {
		t.Errorf("Setup = %v, want the unknown name as written", err)
	}
}

// TestNumbersOutOfRangeOrPaddedAreRefused: each value here, handed to the
// SDK, would panic Setup, exhaust memory, spin a core, or be silently
// replaced by the SDK's default. CheckEnvironment is asked first: a value
// it accepted here would cost gigabytes or a panic in Setup, so Setup is
// not called then.
func TestNumbersOutOfRangeOrPaddedAreRefused(t *testing.T) {
	cases := []struct{ name, value string }{
		{"OTEL_BSP_MAX_QUEUE_SIZE", "9223372036854775807"}, // makechan: size out of range
		{"OTEL_BSP_MAX_QUEUE_SIZE", "100000000000"},        // out of memory
		{"OTEL_BSP_SCHEDULE_DELAY", "9223372036855"},       // overflows to a negative delay: a core spins
		{"OTEL_BSP_EXPORT_TIMEOUT", "9223372036855"},
		{"OTEL_METRIC_EXPORT_INTERVAL", "9223372036855"},
		{"OTEL_METRIC_EXPORT_TIMEOUT", "9223372036855"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "9223372036855"},
		{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "9223372036855"},
		{"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "9223372036855"},
		{"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "9223372036855"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "100000 "}, // the SDK, which does not trim, would use 2048
		{"OTEL_BSP_MAX_QUEUE_SIZE", " 100000"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "+5"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0x10"},
		{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100 "},
		{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100\u00a0"},
		{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "5 "},
		{"OTEL_ATTRIBUTE_COUNT_LIMIT", "-1"},     // no limit, to the SDK
		{"OTEL_BLRP_MAX_QUEUE_SIZE", "20000000"}, // 12 GiB and 104 s inside Setup
		{"OTEL_BLRP_SCHEDULE_DELAY", "soon"},     // the SDK's default, silently
		{"OTEL_BLRP_EXPORT_TIMEOUT", "0"},
		{"OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", "-1"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096"}, // more than the default queue of 2048
		{"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "-1"},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP"}, // the exporters compare it as written: no compression
		{"OTEL_TRACES_EXPORTER", " otlp"},          // autoexport looks it up as written
		{"OTEL_METRICS_EXEMPLAR_FILTER", "sometimes"},
		{"OTEL_EXPORTER_PROMETHEUS_HOST", "0x10"},
	}
	for _, tc := range cases {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv(tc.name, tc.value)
			var envErr *otelsetup.EnvError
			if err := otelsetup.CheckEnvironment(); !errors.As(err, &envErr) || envErr.Name != tc.name {
				t.Fatalf("CheckEnvironment = %v, want an *EnvError naming %s", err, tc.name)
			}
			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
			if !errors.As(err, &envErr) || envErr.Name != tc.name {
				t.Fatalf("Setup = %v, want an *EnvError naming %s", err, tc.name)
			}
			if tel == nil || tel.Enabled() || tel.Exporter() != "none" || tel.MetricsExporter() != "none" {
				t.Fatal("want a no-op Telemetry")
			}
		})
	}
}

// TestHeadersTheExportersWouldNotSendAreRefused: each of these, handed to
// the exporters, would not be sent over one protocol or both (a quoted
// name, as an env file leaves it), or would cost every span over gRPC (a
// value gRPC cannot carry), reported only at Shutdown.
func TestHeadersTheExportersWouldNotSendAreRefused(t *testing.T) {
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
			var envErr *otelsetup.EnvError
			if err := otelsetup.CheckEnvironment(); !errors.As(err, &envErr) || envErr.Name != "OTEL_EXPORTER_OTLP_HEADERS" {
				t.Fatalf("CheckEnvironment = %v, want an *EnvError", err)
			}
		})
	}
}

// TestAGRPCEndpointWithAPathIsRefused: the gRPC exporters send to the
// host only, so a path would be left out; over HTTP it is used.
func TestAGRPCEndpointWithAPathIsRefused(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317/otlp")
	if err := otelsetup.CheckEnvironment(); err != nil {
		t.Fatalf("over HTTP, a base path is used: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
	var envErr *otelsetup.EnvError
	if err := otelsetup.CheckEnvironment(); !errors.As(err, &envErr) || envErr.Name != "OTEL_EXPORTER_OTLP_ENDPOINT" ||
		!strings.Contains(err.Error(), "traces") {
		t.Errorf("CheckEnvironment = %v, want the endpoint's path refused for traces", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4317")
	if err := otelsetup.CheckEnvironment(); err != nil {
		t.Errorf("traces have an endpoint of their own: %v", err)
	}
}
