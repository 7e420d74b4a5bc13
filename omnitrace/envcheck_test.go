// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelsetup"
)

// The attack: every variable a command reads, set to a padded, an
// upper-case, a negative, a huge, a non-ASCII, a non-ASCII-digit, an
// overflowing, an empty, a white-space-only value and one with a control
// character (and, for a number, a sign, a leading zero, hex, a fraction,
// one beyond its range). A value that is not valid is warned about once,
// naming the variable, and what takes effect is what takes effect with
// the variable unset; the import still exports every span. A valid one
// (an upper-case name of a set, a padded list) is taken without a word,
// and takes the effect of the value it spells.

// envAttack is one value an operator, an env file or an attacker may write.
type envAttack struct{ kind, value string }

func envAttacks(sample string) []envAttack {
	return []envAttack{
		{"padded", " " + sample + " "},
		{"upper-case", strings.ToUpper(sample)},
		{"negative", "-1"},
		{"huge", strings.Repeat("9", maxEnvValue+1)},
		{"non-ASCII", "\uff58" + sample},             // a fullwidth x
		{"non-ASCII digits", "\u0661\u0662\u0663"},   // 123 in Arabic-Indic digits
		{"overflowing", "99999999999999999999999"},   // beyond any integer
		{"overflowing int64", "9223372036854775808"}, // 2^63
		{"empty", ""},                                        // unset, as the specification says
		{"white space only", " \t "},                         //
		{"control character", sample + "\x1b[2J"},            // clears a terminal
		{"invalid UTF-8", sample + "\xff"},                   //
		{"no-break space", sample + "\u00a0"},                // white space strings.TrimSpace knows, Atoi does not
		{"full-width digits", "\uff11\uff12\uff13"},          // 123
		{"plus sign", "+" + strings.TrimPrefix(sample, "+")}, // a number's, and a name's
	}
}

// numberAttacks are further attacks on a number: its bounds, valid, and
// beyond them (each bound checked against otelsetup's by
// TestOmnitraceAndOtelsetupAgree, whichever side is the wider).
func numberAttacks(t *testing.T, name, sample string) []envAttack {
	v, ok := byName(name)
	if !ok || v.hi == 0 {
		t.Fatalf("%s is not a number", name)
	}
	return []envAttack{
		{"leading zero", "0" + sample},
		{"hex", "0x10"},
		{"fraction", sample + ".5"},
		{"exponent", "1e3"},
		{"the lower bound", strconv.FormatInt(v.lo, 10)},
		{"below the range", strconv.FormatInt(v.lo-1, 10)},
		{"the upper bound", strconv.FormatInt(v.hi, 10)},
		{"beyond the range", strconv.FormatInt(v.hi+1, 10)},
		{"int64 max", "9223372036854775807"},
		{"int64 min", "-9223372036854775808"},
	}
}

// envSpec says how one variable is attacked and observed.
type envSpec struct {
	// sample is a valid value whose effect is not the default's.
	sample string
	// valid lists the kinds of attack whose value is valid and takes the
	// sample's effect.
	valid []string
	// asWritten lists the kinds whose value is valid and takes effect as
	// written: neither the default's effect nor the sample's.
	asWritten []string
	// env is set around each attack.
	env map[string]string
	// extra are further values, each not valid.
	extra []envAttack
	// partner is a variable that an ignored value leaves alone, so warned
	// about too (a client key without its certificate).
	partner string
	// effect is what took effect, read from what the import built.
	effect func(x *export) string
}

func (s envSpec) list() bool { return slices.Contains(s.valid, "padded") }

// testCerts are a certificate of a CA, and a client's certificate and key.
type testCerts struct{ ca, cert, key string }

func writeTestCerts(t *testing.T) testCerts {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "omnitrace test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := testCerts{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem")}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for path, b := range map[string][]byte{c.ca: certPEM, c.cert: certPEM,
		c.key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func dest(x *export) string { return x.dest }

func settings(x *export) string {
	s := x.pipe.set
	return fmt.Sprintf("queue %d, batch %d, delay %v, timeout %v", s.queue, s.batch, s.delay, s.exportTimeout)
}

func limits(x *export) string { return fmt.Sprintf("%+v", x.limits) }

// kept is how many of 64 traces the sampler keeps.
func kept(x *export) string {
	n := 0
	for i := range 64 {
		id := trace.TraceID{15: byte(i)}
		id[8] = byte(i * 4)
		if x.sample == nil || x.sample(id) {
			n++
		}
	}
	return fmt.Sprintf("%d of 64", n)
}

func resourceOf(x *export, service bool) string {
	var kvs []string
	for _, kv := range x.pipe.set.resource {
		if (kv.Key == "service.name") == service {
			kvs = append(kvs, string(kv.Key)+"="+kv.Value.String())
		}
	}
	return strings.Join(kvs, ",")
}

// client is the OTLP client the import built.
func client(x *export) string {
	if s, ok := x.pipe.sink.(*otlpSink); ok {
		return fmt.Sprintf("%T", s.client)
	}
	return "no OTLP client"
}

// clientReads is what the OTLP client reads of the variable name, which
// it reads itself: the value left in the environment, read as the client
// reads it (trimmed; a switch true in any case; headers decoded).
func clientReads(name string) func(*export) string {
	return func(*export) string {
		v := strings.TrimSpace(os.Getenv(name))
		switch {
		case strings.HasSuffix(name, "_INSECURE"):
			return strconv.FormatBool(strings.EqualFold(v, "true"))
		case strings.HasSuffix(name, "_HEADERS") && v != "":
			var hs []string
			for _, pair := range strings.Split(v, ",") {
				k, val, _ := strings.Cut(pair, "=")
				d, _ := url.PathUnescape(val)
				hs = append(hs, strings.TrimSpace(k)+"="+strings.TrimSpace(d))
			}
			sort.Strings(hs)
			return strings.Join(hs, ",")
		}
		return v
	}
}

// compression is what the OTLP client is handed: gzip or not.
func compression(*export) string {
	return strconv.FormatBool(strings.EqualFold(otlpValue("COMPRESSION"), "gzip"))
}

func envSpecs(t *testing.T) map[string]envSpec {
	certs := writeTestCerts(t)
	withEndpoint := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
	secure := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:1"}
	secrets := []envAttack{{"credentials", "http://user:s3cret@collector.example:4318"}, {"a token alone", "http://s3cret@collector.example:4318"},
		{"a query", "http://collector.example:4318/?token=s3cret"}, {"a fragment", "http://collector.example:4318/#s3cret"},
		{"a malformed URL with a password", "http://user:s3 cret@collector.example:4318"},
		{"no scheme", "collector.example:4318"}, {"another scheme", "ftp://collector.example"}, {"no host", "http://:4318"},
		{"port 0", "http://collector.example:0"}, {"port out of range", "http://collector.example:99999"},
		{"a host of 300 bytes", "http://" + strings.Repeat("a", 300) + ":4318"}}
	specs := map[string]envSpec{
		"OTEL_SDK_DISABLED": {sample: "true", valid: []string{"upper-case"}, extra: []envAttack{{"yes", "yes"}, {"1", "1"}}, effect: dest},
		"OTEL_SERVICE_NAME": {sample: "dit-engine",
			asWritten: []string{"upper-case", "negative", "non-ASCII", "non-ASCII digits", "overflowing", "overflowing int64", "full-width digits", "plus sign"},
			extra:     []envAttack{{"256 bytes", strings.Repeat("n", 256)}},
			effect:    func(x *export) string { return resourceOf(x, true) }},
		"OTEL_RESOURCE_ATTRIBUTES": {sample: "deployment.environment=prod", valid: []string{"padded"},
			asWritten: []string{"upper-case", "non-ASCII", "plus sign"},
			effect:    func(x *export) string { return resourceOf(x, false) }},
		"OTEL_TRACES_EXPORTER": {sample: "console", valid: []string{"upper-case"}, env: withEndpoint,
			extra: []envAttack{{"a list", "otlp,console"}, {"unknown", "zipkin"}}, effect: dest},
		"OTEL_TRACES_SAMPLER": {sample: "always_off", valid: []string{"upper-case"},
			extra: []envAttack{{"unknown", "jaeger_remote"}}, effect: kept},
		"OTEL_TRACES_SAMPLER_ARG": {sample: "0", valid: []string{"plus sign"}, env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio"},
			extra: []envAttack{{"above 1", "1.5"}, {"NaN", "NaN"}, {"infinite", "Inf"}}, effect: kept},
	}
	for _, v := range envVars {
		if v.hi == 0 || strings.HasPrefix(v.name, "OTEL_EXPORTER_OTLP_") {
			continue
		}
		sample := strconv.FormatInt(v.lo+1, 10)
		s := envSpec{sample: sample, asWritten: []string{"the lower bound", "the upper bound"}, extra: numberAttacks(t, v.name, sample), effect: limits}
		if strings.HasPrefix(v.name, "OTEL_BSP_") {
			s.effect = settings
		}
		if v.name == "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" {
			// Below the queue, valid; above it, ignored.
			s.env = map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "4096"}
			s.asWritten = []string{"the lower bound"}
			s.extra = append(s.extra, envAttack{"above the queue", "4097"})
		}
		specs[v.name] = s
	}
	for _, s := range []string{"", "TRACES_"} {
		p := "OTEL_EXPORTER_OTLP_" + s
		specs[p+"ENDPOINT"] = envSpec{sample: "http://collector.example:4318", asWritten: []string{"upper-case"}, extra: secrets, effect: dest}
		specs[p+"PROTOCOL"] = envSpec{sample: "grpc", valid: []string{"upper-case"}, env: withEndpoint,
			extra: []envAttack{{"http/json", "http/json"}, {"a list", "grpc,http/protobuf"}}, effect: client}
		specs[p+"TIMEOUT"] = envSpec{sample: "2500", asWritten: []string{"the lower bound", "the upper bound"}, env: withEndpoint,
			extra: numberAttacks(t, p+"TIMEOUT", "2500"), effect: clientReads(p + "TIMEOUT")}
		specs[p+"COMPRESSION"] = envSpec{sample: "gzip", valid: []string{"upper-case"}, env: withEndpoint,
			extra: []envAttack{{"padded gzip", "gzip "}, {"deflate", "deflate"}}, effect: compression}
		specs[p+"INSECURE"] = envSpec{sample: "true", valid: []string{"upper-case"}, extra: []envAttack{{"1", "1"}}, effect: clientReads(p + "INSECURE")}
		specs[p+"HEADERS"] = envSpec{sample: "api-key=abc", valid: []string{"padded"}, asWritten: []string{"upper-case"}, env: withEndpoint,
			extra: []envAttack{{"set by the exporters", "user-agent=x"}, {"twice", "a=1,A=2"}, {"a header as written in HTTP", "Authorization: Bearer s3cret"},
				{"a quoted name", `"api-key"=s3cret`}, {"a bad escape", "api-key=s3cret%zz"}, {"a value gRPC cannot carry", "api-key=s3cr\u00e9t"}},
			effect: clientReads(p + "HEADERS")}
		specs[p+"CERTIFICATE"] = envSpec{sample: certs.ca, env: secure,
			extra: []envAttack{{"a folder", t.TempDir()}, {"a device", os.DevNull}, {"no certificate", certs.key}}, effect: clientReads(p + "CERTIFICATE")}
		specs[p+"CLIENT_CERTIFICATE"] = envSpec{sample: certs.cert, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:1", p + "CLIENT_KEY": certs.key},
			partner: p + "CLIENT_KEY", extra: []envAttack{{"not matching the key", certs.key}},
			effect: func(x *export) string {
				return clientReads(p+"CLIENT_CERTIFICATE")(x) + " " + clientReads(p+"CLIENT_KEY")(x)
			}}
		specs[p+"CLIENT_KEY"] = envSpec{sample: certs.key, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:1", p + "CLIENT_CERTIFICATE": certs.cert},
			partner: p + "CLIENT_CERTIFICATE",
			effect: func(x *export) string {
				return clientReads(p+"CLIENT_CERTIFICATE")(x) + " " + clientReads(p+"CLIENT_KEY")(x)
			}}
	}
	return specs
}

// setEnv leaves the environment holding env and name=value alone of the
// OTEL_* variables (name unset when value is empty).
func setEnv(t *testing.T, env map[string]string, name, value string) {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv(name, value)
	if value == "" {
		os.Unsetenv(name)
	}
}

// built sets an import up from the environment, as the command does
// (without -out), and returns read's reading of what it built and what
// it wrote on stderr; what it built is then shut down, sending nothing.
func built(t *testing.T, read func(*export) string) (string, string) {
	t.Helper()
	var stderr bytes.Buffer
	x, err := exportSetup(context.Background(), "", io.Discard, &stderr)
	if err != nil {
		t.Fatalf("exportSetup = %v: no value is an error", err)
	}
	got := read(x)
	if x.pipe != nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = x.pipe.shutdown(ctx)
	}
	return got, stderr.String()
}

// warningsIn returns the warnings a command wrote on stderr, by variable.
func warningsIn(t *testing.T, cmd, stderr string) map[string][]string {
	t.Helper()
	by := map[string][]string{}
	for _, line := range strings.Split(stderr, "\n") {
		msg, ok := strings.CutPrefix(line, cmd+": ")
		if !ok || !strings.Contains(msg, "; ignored, using ") {
			continue
		}
		name, _, _ := strings.Cut(msg, "=")
		by[name] = append(by[name], line)
	}
	return by
}

// checkWarned checks that stderr holds one warning naming name (and at
// most one naming partner) when warned, none at all otherwise, each
// within 1 KiB, and no secret.
func checkWarned(t *testing.T, what, cmd, stderr, name, partner string, warned bool) {
	t.Helper()
	if strings.Contains(stderr, "s3cret") || strings.Contains(stderr, "s3 cret") || strings.Contains(stderr, "s3cr\u00e9t") {
		t.Errorf("%s: a secret printed:\n%s", what, stderr)
	}
	by := warningsIn(t, cmd, stderr)
	for n, ws := range by {
		for _, w := range ws {
			if len(w) > len(cmd)+2+1024 || strings.ContainsAny(w, "\r\x1b") {
				t.Errorf("%s: a warning of %d bytes, or with a control character: %q", what, len(w), w)
			}
		}
		if n != name && n != partner {
			t.Errorf("%s: a warning about %s: %v", what, n, ws)
		}
		if n == partner && len(ws) > 1 {
			t.Errorf("%s: %d warnings about %s", what, len(ws), partner)
		}
	}
	if want := map[bool]int{true: 1}[warned]; len(by[name]) != want {
		t.Errorf("%s: %d warnings naming %s, want %d:\n%s", what, len(by[name]), name, want, stderr)
	}
}

// TestEveryVariableTakesEffectOrIsIgnored walks every variable the
// import reads (itself, or through its OTLP client) with every attack:
// a value that is not valid is warned about once, takes the effect of the
// variable unset, and the import still exports every span, exit 0.
func TestEveryVariableTakesEffectOrIsIgnored(t *testing.T) {
	specs := envSpecs(t)
	names := []string{"OTEL_TRACES_SAMPLER_ARG"}
	for _, v := range envVars {
		names = append(names, v.name)
	}
	// What the import reads: itself, and through its OTLP client
	// (OpenTelemetry Go v1.47.0's otlptracehttp and otlptracegrpc).
	reads := []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT",
		"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
		"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"}
	for _, p := range []string{"OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_"} {
		for _, s := range []string{"ENDPOINT", "PROTOCOL", "TIMEOUT", "COMPRESSION", "INSECURE", "HEADERS",
			"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
			reads = append(reads, p+s)
		}
	}
	for _, name := range reads {
		if !slices.Contains(names, name) {
			t.Errorf("%s is read, and not checked", name)
		}
	}
	clearEnv(t)
	all := len(importSpans(t, goodLine+"\n"))
	for _, name := range names {
		spec, ok := specs[name]
		if !ok {
			t.Errorf("%s is not attacked", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			at := func(value string) (string, string) {
				setEnv(t, spec.env, name, value)
				effect, stderr := built(t, spec.effect)
				if value == "" && spec.partner != "" {
					// Unset, the partner is alone: warned about.
					var kept []string
					for _, line := range strings.SplitAfter(stderr, "\n") {
						if !strings.HasPrefix(line, importEnv.name+": "+spec.partner+"=") {
							kept = append(kept, line)
						}
					}
					stderr = strings.Join(kept, "")
				}
				return effect, stderr
			}
			unset, stderr := at("")
			if stderr != "" {
				t.Fatalf("unset: %s", stderr)
			}
			sample, stderr := at(spec.sample)
			if stderr != "" {
				t.Fatalf("%s=%q, valid, was warned about: %s", name, spec.sample, stderr)
			}
			if sample == unset {
				t.Fatalf("%s=%q has the default's effect, %q: the test sees nothing", name, spec.sample, unset)
			}
			for _, a := range append(envAttacks(spec.sample), spec.extra...) {
				if a.kind == "upper-case" && a.value == spec.sample {
					continue // no letter to raise
				}
				what := fmt.Sprintf("%s %s %.40q", name, a.kind, a.value)
				got, stderr := at(a.value)
				want, valid := unset, true
				switch {
				case a.kind == "empty":
				case slices.Contains(spec.asWritten, a.kind):
					if got == unset || got == sample {
						t.Errorf("%s: effect %q, want the value's own", what, got)
					}
					want = got
				case slices.Contains(spec.valid, a.kind) || (a.kind == "padded" || a.kind == "no-break space") && spec.list():
					want = sample
				default:
					valid = false
				}
				checkWarned(t, what, importEnv.name, stderr, name, spec.partner, !valid)
				if got != want {
					t.Errorf("%s: took effect as %q, want %q", what, got, want)
				}
				if valid {
					continue
				}
				// The import goes on: every span to -out, exit 0, the
				// value warned about once.
				setEnv(t, spec.env, name, a.value)
				out := filepath.Join(t.TempDir(), "out.json")
				code, _, stderr := runCmd(t, goodLine+"\n", "import", "-out", out)
				if n := len(readTraces(t, out)); code != 0 || n != all {
					t.Errorf("%s: exit %d, %d spans, want 0 and %d:\n%s", what, code, n, all, stderr)
				}
				checkWarned(t, what, importEnv.name, stderr, name, spec.partner, true)
			}
		})
	}
}

// TestOmnitraceAndOtelsetupAgree: for every variable the import reads
// and every attack on it, the import warns about a value exactly when an
// engine's otelsetup.Setup does: the same ranges, the same rules.
func TestOmnitraceAndOtelsetupAgree(t *testing.T) {
	specs := envSpecs(t)
	var (
		mu     sync.Mutex
		engine []string
	)
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if msg, ok := strings.CutPrefix(err.Error(), "otelsetup: "); ok {
			name, _, _ := strings.Cut(msg, "=")
			engine = append(engine, name)
		}
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	// Over gRPC, a path in the traces' endpoint; in the general one.
	grpc := map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	extra := []struct {
		env         map[string]string
		name, value string
	}{
		{grpc, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector.example:4317/v1/traces"},
		{grpc, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector.example:4317/"},
		{grpc, "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4317/otlp"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector.example:4317/v1/traces"},
		{map[string]string{"OTEL_TRACES_SAMPLER": "always_on"}, "OTEL_TRACES_SAMPLER_ARG", "not read"},
	}
	compared := 0
	compare := func(env map[string]string, name, value string) {
		setEnv(t, env, name, value)
		// Nothing leaves the engine: only its reading is compared.
		if name != "OTEL_SDK_DISABLED" {
			t.Setenv("OTEL_SDK_DISABLED", "true")
		}
		t.Setenv("OTEL_METRICS_EXPORTER", "none")
		t.Setenv("OTEL_TRACES_EXPORTER", cmp.Or(os.Getenv("OTEL_TRACES_EXPORTER"), "none"))
		mu.Lock()
		engine = nil
		mu.Unlock()
		tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = tel.Shutdown(ctx)
		mu.Lock()
		want := slices.Clone(engine)
		mu.Unlock()
		var got []string
		for _, w := range checkEnv(importEnv) {
			got = append(got, w.name)
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s=%.40q (with %v): omnitrace warns about %v, otelsetup about %v", name, value, env, got, want)
		}
		compared++
	}
	for name, spec := range specs {
		values := append([]envAttack{{"sample", spec.sample}}, envAttacks(spec.sample)...)
		for _, a := range append(values, spec.extra...) {
			compare(spec.env, name, a.value)
		}
	}
	for _, c := range extra {
		compare(c.env, c.name, c.value)
	}
	if compared < 500 {
		t.Errorf("%d values compared", compared)
	}
}

// TestAGRPCEndpointWithAPathIsIgnored: the gRPC client sends to the
// host only, so an endpoint's path would be left out: the endpoint is
// warned about and the next one used (the general variable's, else
// none); over HTTP the path is used.
func TestAGRPCEndpointWithAPathIsIgnored(t *testing.T) {
	for _, c := range []struct {
		protocol, traces, general string
		want, warned              string
	}{
		{"grpc", "http://collector.example:4317/v1/traces", "http://127.0.0.1:1", "otlp to http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"grpc", "http://collector.example:4317/v1/traces", "", importEnv.noExporter, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"grpc", "", "http://collector.example:4317/otlp", importEnv.noExporter, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"grpc", "http://collector.example:4317/", "", "otlp to http://collector.example:4317/", ""},
		{"http/protobuf", "http://collector.example:4318/v1/traces", "", "otlp to http://collector.example:4318/v1/traces", ""},
	} {
		clearEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.protocol)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", c.traces)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.general)
		got, stderr := built(t, dest)
		if got != c.want {
			t.Errorf("%+v: to %s", c, got)
		}
		checkWarned(t, fmt.Sprint(c), importEnv.name, stderr, c.warned, "", c.warned != "")
	}
}

// TestDiffIgnoresALimitThatIsNotValid: diff makes spans of forms within
// the attribute limits, as import does: a limit that is not valid is
// warned about once and ignored (-1 would have meant no limit at all),
// and the diff runs.
func TestDiffIgnoresALimitThatIsNotValid(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "-1")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "-1") // not read by diff
	log := filepath.Join(testdata, "vllm.log")
	code, out, stderr := diffRun(t, "", "-format", "json", log, log)
	if code != 0 || out == "" {
		t.Errorf("exit %d, want 0 and the rows:\n%s", code, stderr)
	}
	checkWarned(t, "diff", diffEnv.name, stderr, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "", true)
	if got := spanLimits().Attributes; got != 128 {
		t.Errorf("attribute count limit %d, want the default 128", got)
	}
}
