// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/otelenv"
	"github.com/otelomni/otelomni/internal/sanitize"
)

// The OTEL_* variables the commands read, and the OTLP clients they build
// read, are read as the OpenTelemetry specification says, and as
// otelsetup reads them for an engine: a value that is not valid is warned
// about once, on stderr, and ignored, as if the variable were not set;
// its default then takes effect. No value stops a command or turns its
// export off (OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none are
// valid values, and keep their meaning). The command unsets each value it
// ignores before anything reads the environment, so that the OTLP
// clients, which read it themselves, never see one either.
//
// A value is valid as otelsetup takes it: at most maxEnvValue bytes of
// valid UTF-8 without control characters; a single value (a number, a
// name, a URL, a path) without white space at either end; a number in
// decimal digits, without sign or leading zeros, within its range (the
// same ranges as otelsetup's: TestOmnitraceAndOtelsetupAgree); a name of
// a set in any case. An empty variable is an unset one.

// envVar is one variable a command reads, and what a valid value is.
type envVar struct {
	name string
	// lo and hi bound a number: the variable is a number when hi > 0.
	lo, hi int64
	// ms says the number counts milliseconds.
	ms bool
	// list allows white space around the value and its items.
	list bool
	// check checks a value that is not a number.
	check func(string) error
	// using says what takes effect when the value is ignored, once every
	// value ignored is unset.
	using func(c *envCommand) string
}

// maxEnvValue bounds any variable's value, as otelsetup does.
const maxEnvValue = 16 << 10

// The ranges of the numbers: otelsetup's.
const (
	maxMillis      = 24 * 60 * 60 * 1000 // a day
	maxSpanQueue   = 1 << 17
	maxValueLength = 1 << 16
	maxCount       = 1 << 10
)

// defaultOTLPTimeout is the OTLP clients' own timeout, in milliseconds.
const defaultOTLPTimeout = 10000

// defaultEndpoints describes the OTLP clients' default endpoints.
const defaultEndpoints = "localhost:4318 (http/protobuf) or localhost:4317 (grpc), " +
	"with TLS unless OTEL_EXPORTER_OTLP_INSECURE (or OTEL_EXPORTER_OTLP_TRACES_INSECURE) is true"

func is(what string) func(*envCommand) string { return func(*envCommand) string { return what } }

// number is a number variable whose ignored value leaves def, or the
// first of fallbacks that is set.
func number(name string, lo, hi, def int64, fallbacks ...string) envVar {
	return envVar{name: name, lo: lo, hi: hi, using: func(*envCommand) string {
		for _, f := range fallbacks {
			if v := os.Getenv(f); v != "" {
				return fmt.Sprintf("%s, from %s", v, f)
			}
		}
		return strconv.FormatInt(def, 10)
	}}
}

func millis(name string, lo, def int64) envVar {
	v := number(name, lo, maxMillis, def)
	v.ms = true
	return v
}

// envSwitch is a switch, false unless set.
func envSwitch(name string) envVar { return envVar{name: name, check: isBool, using: is("false")} }

// otlp is the OTLP variable of the traces (signal "TRACES_") or the
// general one (signal ""), which the traces' falls back to.
func otlp(signal, suffix string, v envVar) envVar {
	v.name = "OTEL_EXPORTER_OTLP_" + signal + suffix
	if signal == "" {
		return v
	}
	def := v.using
	v.using = func(c *envCommand) string {
		if general := "OTEL_EXPORTER_OTLP_" + suffix; os.Getenv(general) != "" {
			return general + "'s value"
		}
		return def(c)
	}
	return v
}

// envVars lists every variable a command reads, itself or through the
// OTLP clients and otelsetup's exporter it builds.
var envVars = func() []envVar {
	vs := []envVar{
		envSwitch("OTEL_SDK_DISABLED"),
		{name: "OTEL_SERVICE_NAME", check: isText, using: is("omnitrace")},
		{name: "OTEL_RESOURCE_ATTRIBUTES", list: true, check: otelenv.CheckResourceAttributes, using: is("no attributes")},
		{name: "OTEL_TRACES_EXPORTER", check: oneOf("otlp", "console", "none"), using: func(c *envCommand) string {
			if endpointSet() {
				return "otlp"
			}
			return c.noExporter
		}},
		{name: "OTEL_TRACES_SAMPLER", check: oneOf("always_on", "always_off", "traceidratio",
			"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"), using: is("parentbased_always_on: every trace kept")},
		millis("OTEL_BSP_SCHEDULE_DELAY", 1, int64(scheduleDelay.Milliseconds())),
		millis("OTEL_BSP_EXPORT_TIMEOUT", 1, int64(exportTimeout.Milliseconds())),
		number("OTEL_BSP_MAX_QUEUE_SIZE", 1, maxSpanQueue, importQueueSize),
		{name: "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", lo: 1, hi: maxSpanQueue, using: func(*envCommand) string {
			return strconv.Itoa(min(importBatchSize, queueSize()))
		}},
		number("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength, valueLengthLimit),
		number("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength, valueLengthLimit, "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
		number("OTEL_ATTRIBUTE_COUNT_LIMIT", 0, maxCount, sdktrace.DefaultAttributeCountLimit),
		number("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", 0, maxCount, sdktrace.DefaultAttributeCountLimit, "OTEL_ATTRIBUTE_COUNT_LIMIT"),
	}
	for _, s := range []string{"", "TRACES_"} {
		vs = append(vs,
			otlp(s, "ENDPOINT", envVar{check: isEndpoint, using: func(*envCommand) string {
				if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "otlp") {
					return defaultEndpoints
				}
				return "no endpoint"
			}}),
			otlp(s, "PROTOCOL", envVar{check: oneOf("grpc", "http/protobuf"), using: is("http/protobuf")}),
			otlp(s, "TIMEOUT", millis("", 0, defaultOTLPTimeout)),
			otlp(s, "COMPRESSION", envVar{check: oneOf("gzip", "none"), using: is("none")}),
			otlp(s, "INSECURE", envSwitch("")),
			otlp(s, "HEADERS", envVar{list: true, check: isHeaders, using: is("no headers")}),
			otlp(s, "CERTIFICATE", envVar{check: otelenv.CheckCertificate, using: is("the system's roots")}),
			otlp(s, "CLIENT_CERTIFICATE", envVar{check: otelenv.CheckFile, using: is("no client certificate")}),
			otlp(s, "CLIENT_KEY", envVar{check: otelenv.CheckFile, using: is("no client certificate")}),
		)
	}
	return vs
}()

// byName finds a variable of envVars.
func byName(name string) (envVar, bool) {
	i := slices.IndexFunc(envVars, func(v envVar) bool { return v.name == name })
	if i < 0 {
		return envVar{}, false
	}
	return envVars[i], true
}

// envCommand is what one command reads of the environment.
type envCommand struct {
	// name prefixes the warnings: "omnitrace import".
	name string
	// reads says whether the command reads a variable of envVars.
	reads func(name string) bool
	// noExporter is where spans go when no variable names an exporter.
	noExporter string
}

var (
	// importEnv: import reads every variable, itself (the export's
	// settings, the sampler, the resource) or through its OTLP client.
	importEnv = &envCommand{name: "omnitrace import", reads: func(string) bool { return true },
		noExporter: "the console (no OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_*ENDPOINT set)"}
	// recoverEnv: recover reads the exporter's variables, through
	// otelsetup.NewSpanExporter, and the value length limits, through
	// otelsetup.Recover.
	recoverEnv = &envCommand{name: "omnitrace recover", reads: func(name string) bool {
		return name == "OTEL_TRACES_EXPORTER" || strings.HasPrefix(name, "OTEL_EXPORTER_OTLP_") ||
			strings.HasSuffix(name, "ATTRIBUTE_VALUE_LENGTH_LIMIT")
	}, noExporter: "none: name where the spans go"}
	// diffEnv: diff makes spans of forms as import does, within the same
	// attribute limits, and exports none.
	diffEnv = &envCommand{name: "omnitrace diff", reads: func(name string) bool {
		return strings.HasSuffix(name, "ATTRIBUTE_VALUE_LENGTH_LIMIT") || strings.HasSuffix(name, "ATTRIBUTE_COUNT_LIMIT")
	}}
)

// envWarning is the warning about a value ignored.
type envWarning struct {
	name, value string // the value printable: bounded, secrets redacted
	err         error
	using       string
}

func (w envWarning) String() string {
	return fmt.Sprintf("%s=%q: %v; ignored, using %s", w.name, w.value, w.err, w.using)
}

// ignoreInvalidEnv unsets every variable c reads whose value is not
// valid, and writes one warning for each on stderr, naming the variable
// and why, its value printed without secrets (a URL's password and query
// values, every header's value).
func ignoreInvalidEnv(stderr io.Writer, c *envCommand) {
	for _, w := range checkEnv(c) {
		fmt.Fprintf(stderr, "%s: %s\n", c.name, sanitize.Display(w.String(), 1024))
	}
}

// checkEnv unsets every variable c reads whose value is not valid, and
// returns a warning for each.
func checkEnv(c *envCommand) []envWarning {
	type ignored struct {
		v   envVar
		val string
		err error
	}
	var bad []ignored
	unset := func(v envVar, val string, err error) {
		bad = append(bad, ignored{v: v, val: val, err: err})
		os.Unsetenv(v.name)
	}
	for _, v := range envVars {
		val := os.Getenv(v.name)
		if val == "" || !c.reads(v.name) {
			continue
		}
		err := wellWritten(val, v.list)
		switch {
		case err != nil:
		case v.hi > 0:
			_, err = parseNumber(val, v.lo, v.hi, v.ms)
		default:
			err = v.check(val)
		}
		if err != nil {
			unset(v, val, err)
		}
	}
	// A batch larger than its queue is one the queue never fills.
	if b := os.Getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"); b != "" && c.reads("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") {
		if n, _ := strconv.Atoi(b); n > queueSize() {
			v, _ := byName("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
			unset(v, b, fmt.Errorf("greater than the queue size (OTEL_BSP_MAX_QUEUE_SIZE, %d by default)", importQueueSize))
		}
	}
	// The argument is read only by the ratio samplers: a value that is not
	// a ratio is ignored, as if unset (a ratio of 1).
	if strings.HasSuffix(strings.ToLower(os.Getenv("OTEL_TRACES_SAMPLER")), "traceidratio") && c.reads("OTEL_TRACES_SAMPLER_ARG") {
		if arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
			err := wellWritten(arg, false)
			if err == nil {
				err = isRatio(arg)
			}
			if err != nil {
				unset(envVar{name: "OTEL_TRACES_SAMPLER_ARG", using: is("1")}, arg, err)
			}
		}
	}
	if c.reads("OTEL_EXPORTER_OTLP_ENDPOINT") {
		// Over gRPC an endpoint's path is not used: one given would be
		// left out. The next endpoint is used (the general variable's,
		// else the default).
		if proto := otlpValue("PROTOCOL"); strings.EqualFold(proto, "grpc") {
			for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
				val := os.Getenv(name)
				if val == "" {
					continue
				}
				if u, err := url.Parse(val); err == nil && u.Path != "" && u.Path != "/" {
					v, _ := byName(name)
					unset(v, val, errors.New("a path, which the gRPC exporter of traces does not use"))
					continue
				}
				break
			}
		}
		// A client certificate is used only with its key.
		for _, p := range []string{"OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_"} {
			cert, key := os.Getenv(p+"CLIENT_CERTIFICATE"), os.Getenv(p+"CLIENT_KEY")
			name, value := p+"CLIENT_CERTIFICATE", cert
			var err error
			switch {
			case cert == "" && key == "":
				continue
			case cert == "":
				name, value, err = p+"CLIENT_KEY", key, fmt.Errorf("set without %sCLIENT_CERTIFICATE", p)
			case key == "":
				err = fmt.Errorf("set without %sCLIENT_KEY", p)
			default:
				if _, lerr := tls.LoadX509KeyPair(cert, key); lerr == nil {
					continue
				}
				err = fmt.Errorf("not a certificate matching %sCLIENT_KEY, both PEM", p)
			}
			v, _ := byName(name)
			unset(v, value, err)
			os.Unsetenv(p + "CLIENT_CERTIFICATE")
			os.Unsetenv(p + "CLIENT_KEY")
		}
	}
	warnings := make([]envWarning, 0, len(bad))
	for _, b := range bad {
		warnings = append(warnings, envWarning{name: b.v.name, value: printable(b.v.name, b.val), err: b.err, using: b.v.using(c)})
	}
	return warnings
}

// otlpValue is the traces' OTLP variable suffix, else the general one.
func otlpValue(suffix string) string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + suffix); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_" + suffix)
}

// queueSize is OTEL_BSP_MAX_QUEUE_SIZE, else the import's default.
func queueSize() int {
	if n, err := parseNumber(os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE"), 1, maxSpanQueue, false); err == nil {
		return int(n)
	}
	return importQueueSize
}

// endpointSet reports whether an OTLP endpoint variable is set.
func endpointSet() bool { return otlpValue("ENDPOINT") != "" }

// envInt returns the first of the number variables names that is set to
// a valid value, or def.
func envInt(def int, names ...string) int {
	for _, n := range names {
		v, ok := byName(n)
		if s := os.Getenv(n); ok && s != "" {
			if i, err := parseNumber(s, v.lo, v.hi, v.ms); err == nil {
				return int(i)
			}
		}
	}
	return def
}

// printable is what a warning may print of a variable's value: at most 64
// bytes, and never a secret. An endpoint's password and query values and
// every header's value are replaced by sanitize.Redacted.
func printable(name, v string) string {
	switch {
	case strings.HasSuffix(name, "_ENDPOINT"):
		return sanitize.URL(v, 64)
	case strings.HasSuffix(name, "_HEADERS"):
		// A header's name is shown only when it is one: an entry without
		// '=' ("Authorization: Bearer …") is all secret.
		parts := strings.Split(v, ",")
		for i, kv := range parts {
			k, _, ok := strings.Cut(kv, "=")
			if k = strings.TrimSpace(k); !ok || !isToken(k) {
				parts[i] = sanitize.Redacted
				continue
			}
			parts[i] = k + "=" + sanitize.Redacted
		}
		return sanitize.String(strings.Join(parts, ","), 64)
	}
	return sanitize.String(v, 64)
}

// isToken reports whether s is a header name: letters, digits and the
// punctuation RFC 9110 allows in a token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// wellWritten checks what every value must be: at most maxEnvValue bytes
// of valid UTF-8 without control characters, and, unless it is a list,
// without white space at either end.
func wellWritten(v string, list bool) error {
	switch {
	case len(v) > maxEnvValue:
		return fmt.Errorf("longer than %d bytes", maxEnvValue)
	case !utf8.ValidString(v):
		return errors.New("not valid UTF-8")
	case strings.ContainsFunc(v, unicode.IsControl):
		return errors.New("holds a control character")
	case strings.TrimSpace(v) == "":
		return errors.New("only white space")
	case !list && strings.TrimSpace(v) != v:
		return errors.New("white space at its start or end")
	}
	return nil
}

// parseNumber parses v, written in decimal digits without sign or leading
// zeros, from lo to hi.
func parseNumber(v string, lo, hi int64, ms bool) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err == nil && strconv.FormatInt(n, 10) == v && n >= lo && n <= hi {
		return n, nil
	}
	unit := ""
	if ms {
		unit = " of milliseconds"
	}
	return 0, fmt.Errorf("want a whole number%s from %d to %d, in decimal digits without sign or leading zeros", unit, lo, hi)
}

// isBool accepts a switch: true or false, in any case.
func isBool(v string) error {
	if strings.EqualFold(v, "true") || strings.EqualFold(v, "false") {
		return nil
	}
	return errors.New("want true or false")
}

func isText(v string) error {
	if len(v) > 255 {
		return errors.New("longer than 255 bytes")
	}
	return nil
}

// oneOf accepts one of the names, in any case.
func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
	}
}

func isRatio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return errors.New("want a number from 0 to 1")
	}
	return nil
}

func isEndpoint(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("want an http:// or https:// URL")
	}
	if u.Hostname() == "" {
		return errors.New("the URL has no host")
	}
	if len(u.Hostname()) > 253 {
		return errors.New("a host name longer than 253 bytes, which no name server resolves")
	}
	// The exporters send to the host and path only: credentials, a query
	// or a fragment would be silently left out.
	switch {
	case u.User != nil:
		return errors.New("credentials in the URL, which the exporters do not send: give them in OTEL_EXPORTER_OTLP_HEADERS")
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("a query, which the exporters do not send")
	case u.Fragment != "" || strings.Contains(v, "#"):
		return errors.New("a fragment, which the exporters do not send")
	}
	if p := u.Port(); p != "" {
		if _, err := parseNumber(p, 1, 65535, false); err != nil {
			return errors.New("want a port from 1 to 65535")
		}
	}
	return nil
}

// reservedHeaders are the header names that the exporters or their
// transports set themselves.
var reservedHeaders = []string{"content-type", "content-encoding", "content-length", "user-agent", "te", "host",
	"connection", "transfer-encoding", "upgrade", "keep-alive", "proxy-connection", "trailer"}

// isHeaders checks the list the OTLP clients are given: name=value pairs
// separated by commas, values percent-encoded, white space around names
// and decoded values ignored; what both clients send (gRPC carries header
// names of letters, digits, '-', '_' and '.' only, values of printable
// ASCII only); each name once, whatever its case.
func isHeaders(v string) error {
	seen := map[string]bool{}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return errors.New("want name=value pairs separated by commas")
		}
		for _, c := range k {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				return errors.New("a header name holds a character other than letters, digits, '-', '_' and '.' (quotes included), which gRPC does not carry")
			}
		}
		lk := strings.ToLower(k)
		if slices.Contains(reservedHeaders, lk) || strings.HasPrefix(lk, "grpc-") {
			return fmt.Errorf("the exporters set %s themselves", lk)
		}
		if seen[lk] {
			return fmt.Errorf("header %s given twice", lk)
		}
		seen[lk] = true
		d, err := url.PathUnescape(val)
		if err != nil {
			return errors.New("a value is not percent-encoded correctly")
		}
		for _, c := range []byte(strings.TrimSpace(d)) {
			if c < 0x20 || c > 0x7e {
				return errors.New("a decoded value holds a character other than printable ASCII, which gRPC does not carry (a control character, or a non-ASCII letter)")
			}
		}
	}
	return nil
}
