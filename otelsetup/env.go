// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/propagators/autoprop"

	"github.com/otelomni/otelomni/internal/otelenv"
	"github.com/otelomni/otelomni/internal/sanitize"
)

// One rule for every variable Setup, the SDK and the exporters read, the
// rule of the OpenTelemetry specification (sdk-environment-variables.md):
// a value that is not valid is warned about once, through the
// OpenTelemetry error handler, and ignored, as if the variable were not
// set; its default then takes effect. No value turns tracing off, and
// none can cost more than its range allows: a number out of its range is
// a warning and the default, never a panic, an allocation out of bounds or
// a spinning core. An empty variable is an unset one.
//
// A value is valid as written: a single value (a number, a name, a switch,
// a URL, a path) carries no white space at either end, and a number is
// written in decimal digits, without sign or leading zeros, within its
// range. Names of a set (exporters, protocols, samplers, ...) and switches
// are read in any case, as the specification says. Setup reads every
// variable itself and hands what it read to the SDK and the exporters as
// options, which win over their own reading of the same variable: what
// Setup warns about never takes effect, and what it accepts takes effect
// exactly. The table is documented in docs/reliability.md.

// envVar is one variable Setup reads, and what a valid value is.
type envVar struct {
	name string
	// lo and hi bound a number: the variable is a number when hi > 0.
	lo, hi int64
	// ms says the number counts milliseconds.
	ms bool
	// list allows white space around the value and its items, which
	// otelsetup trims, as every reader of the variable does.
	list bool
	// check checks a value that is not a number.
	check func(string) error
	// using says what takes effect when the value is ignored.
	using func(*environ) string
}

// maxEnvValue bounds any variable's value: a header with a token fits, a
// megabyte does not.
const maxEnvValue = 16 << 10

// The ranges of the numbers. Each upper bound keeps what the SDK allocates
// or holds within the formulas of docs/reliability.md.
const (
	// maxMillis is a day: no schedule or timeout needs more, and a day in
	// milliseconds is far from overflowing a time.Duration (292 years).
	maxMillis = 24 * 60 * 60 * 1000
	// maxSpanQueue bounds OTEL_BSP_MAX_QUEUE_SIZE: the SDK allocates the
	// queue's channel when Setup runs, and holds up to that many spans
	// while the collector is down.
	maxSpanQueue = 1 << 17
	// maxLogQueue bounds OTEL_BLRP_MAX_QUEUE_SIZE: the SDK allocates a
	// whole log record (about 640 bytes) per slot when Setup runs.
	maxLogQueue = 1 << 16
	// maxValueLength bounds the attribute value length limits: a value
	// longer than 64 KiB is content, not telemetry.
	maxValueLength = 1 << 16
	// maxCount bounds the attribute, event and link count limits: a span
	// holds up to events x attributes of values, and the log SDK checks
	// each attribute added against those before it, so its cost grows with
	// the square of the limit.
	maxCount = 1 << 10
	// maxSeries bounds the metric cardinality limit, the series an
	// instrument holds.
	maxSeries = 1 << 16
)

// The defaults: the SDK's own, but for those otelsetup documents as its
// own (the value length and link count limits, see setup.go).
const (
	defaultSpanQueue      = 2048 // sdktrace.DefaultMaxQueueSize
	defaultSpanBatch      = 512  // sdktrace.DefaultMaxExportBatchSize
	defaultSpanDelay      = 5000 // sdktrace.DefaultScheduleDelay, ms
	defaultSpanTimeout    = 30000
	defaultLogQueue       = 2048
	defaultLogBatch       = 512
	defaultLogDelay       = 1000
	defaultLogTimeout     = 30000
	defaultCount          = 128 // every count limit but the links'
	defaultMetricInterval = 60000
	defaultMetricTimeout  = 30000
	defaultCardinality    = 2000
	defaultOTLPTimeout    = 10000
	defaultPrometheusPort = 9464
	defaultSampler        = "parentbased_always_on"
	defaultJournalMiB     = 64 // the journal's own (journal.DefaultSize)
)

// signals are the per-signal infixes of the OTLP variables.
var signals = []string{"", "TRACES_", "METRICS_", "LOGS_"}

// is says what is used instead of an ignored value: always the same.
func is(what string) func(*environ) string { return func(*environ) string { return what } }

// number is a number variable whose ignored value leaves def, or the
// first of fallbacks that is set.
func number(name string, lo, hi, def int64, fallbacks ...string) envVar {
	return envVar{name: name, lo: lo, hi: hi, using: func(e *environ) string {
		for _, f := range fallbacks {
			if n, ok := e.nums[f]; ok {
				return fmt.Sprintf("%d, from %s", n, f)
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

// flag is a switch, false unless set: the SDK and the exporters read true,
// in any case, as true, and anything else as false.
func flag(name string) envVar {
	return envVar{name: name, check: isBool, using: is("false")}
}

// otlp is an OTLP variable of the signal s ("" for the general one), which
// falls back to the general one.
func otlp(s, suffix string, v envVar) envVar {
	v.name = "OTEL_EXPORTER_OTLP_" + s + suffix
	if s == "" {
		return v
	}
	def := v.using
	v.using = func(e *environ) string {
		if name, _ := e.signal(s, suffix); name != "" {
			return name + "'s value"
		}
		return def(e)
	}
	return v
}

// envVars lists every variable that Setup, the SDK and the exporters it
// builds read (OpenTelemetry Go v1.47.0, contrib v0.72.0).
var envVars = func() []envVar {
	vs := []envVar{
		flag("OTEL_SDK_DISABLED"),
		{name: "OTEL_PROPAGATORS", list: true, check: isPropagators, using: is("tracecontext,baggage")},
		{name: "OTEL_SERVICE_NAME", check: isText, using: is("the program's name (WithServiceName), else unknown_service:<executable>")},
		{name: "OTEL_RESOURCE_ATTRIBUTES", list: true, check: otelenv.CheckResourceAttributes,
			using: is("as the SDK reads it, under every provider: each key=value pair, the others left out, a value that does not decode kept as written, invalid UTF-8 replaced")},
		{name: "OTEL_TRACES_EXPORTER", check: oneOf("otlp", "console", "none"), using: is("otlp")},
		{name: "OTEL_METRICS_EXPORTER", check: oneOf("otlp", "prometheus", "console", "none"), using: is("otlp")},
		{name: "OTEL_LOGS_EXPORTER", check: oneOf("otlp", "console", "none"), using: is("none: logs are exported only when asked for")},
		{name: "OTEL_METRICS_PRODUCERS", list: true, check: isProducers, using: is("none")},
		{name: "OTEL_TRACES_SAMPLER", check: oneOf("always_on", "always_off", "traceidratio",
			"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"), using: is(defaultSampler)},
		millis("OTEL_BSP_SCHEDULE_DELAY", 1, defaultSpanDelay),
		millis("OTEL_BSP_EXPORT_TIMEOUT", 1, defaultSpanTimeout),
		number("OTEL_BSP_MAX_QUEUE_SIZE", 1, maxSpanQueue, defaultSpanQueue),
		{name: "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", lo: 1, hi: maxSpanQueue, using: func(e *environ) string {
			return strconv.Itoa(min(defaultSpanBatch, e.int(defaultSpanQueue, "OTEL_BSP_MAX_QUEUE_SIZE")))
		}},
		number("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength, defaultAttributeValueLengthLimit),
		number("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength, defaultAttributeValueLengthLimit, "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
		number("OTEL_ATTRIBUTE_COUNT_LIMIT", 0, maxCount, defaultCount),
		number("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", 0, maxCount, defaultCount, "OTEL_ATTRIBUTE_COUNT_LIMIT"),
		number("OTEL_SPAN_EVENT_COUNT_LIMIT", 0, maxCount, defaultCount),
		number("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", 0, maxCount, defaultCount),
		number("OTEL_SPAN_LINK_COUNT_LIMIT", 0, maxCount, defaultLinkCountLimit),
		number("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", 0, maxCount, defaultCount),
		millis("OTEL_BLRP_SCHEDULE_DELAY", 1, defaultLogDelay),
		millis("OTEL_BLRP_EXPORT_TIMEOUT", 1, defaultLogTimeout),
		number("OTEL_BLRP_MAX_QUEUE_SIZE", 1, maxLogQueue, defaultLogQueue),
		{name: "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", lo: 1, hi: maxLogQueue, using: func(e *environ) string {
			return strconv.Itoa(min(defaultLogBatch, e.int(defaultLogQueue, "OTEL_BLRP_MAX_QUEUE_SIZE")))
		}},
		number("OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength, defaultAttributeValueLengthLimit, "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
		number("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", 0, maxCount, defaultCount, "OTEL_ATTRIBUTE_COUNT_LIMIT"),
		// Each export sends every series: more than ten a second is a
		// core's work, and the collector's.
		millis("OTEL_METRIC_EXPORT_INTERVAL", 100, defaultMetricInterval),
		millis("OTEL_METRIC_EXPORT_TIMEOUT", 1, defaultMetricTimeout),
		{name: "OTEL_METRICS_EXEMPLAR_FILTER", check: oneOf("always_on", "always_off", "trace_based"), using: is("trace_based")},
		number("OTEL_GO_X_CARDINALITY_LIMIT", 1, maxSeries, defaultCardinality),
		// Read by the SDK and the exporters themselves, which take only
		// true, in any case, as true.
		flag("OTEL_GO_X_OBSERVABILITY"),
		flag("OTEL_GO_X_SELF_OBSERVABILITY"),
		flag("OTEL_GO_X_RESOURCE"),
		flag("OTEL_GO_X_PER_SERIES_START_TIMESTAMPS"),
		{name: "OTEL_EXPORTER_PROMETHEUS_HOST", check: isHost, using: is("localhost")},
		number("OTEL_EXPORTER_PROMETHEUS_PORT", 1, 65535, defaultPrometheusPort),
		{name: "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", check: oneOf("cumulative", "delta", "lowmemory"), using: is("cumulative")},
		{name: "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", check: oneOf("explicit_bucket_histogram",
			"base2_exponential_bucket_histogram"), using: is("explicit_bucket_histogram")},
		// otelsetup's own: the crash journal (WithJournal).
		{name: envJournalDir, check: isJournalDir, using: is("WithJournal's directory, else no journal")},
		number(envJournalSize, minJournalMiB, maxJournalMiB, defaultJournalMiB),
		{name: envJournalSync, lo: minJournalSync, hi: maxJournalSync, ms: true, using: is("never")},
	}
	// OTELOMNI_EXEMPLARS and the tier's OMNI_* variables are read, and
	// warned about, by the kept-exemplar choice (exemplar.go).
	for _, s := range signals {
		vs = append(vs,
			otlp(s, "ENDPOINT", envVar{check: isEndpoint, using: is(defaultEndpoints)}),
			otlp(s, "PROTOCOL", envVar{check: oneOf("grpc", "http/protobuf"), using: is("http/protobuf")}),
			otlp(s, "TIMEOUT", millis("", 0, defaultOTLPTimeout)),
			otlp(s, "COMPRESSION", envVar{check: oneOf("gzip", "none"), using: is("none")}),
			otlp(s, "INSECURE", flag("")),
			otlp(s, "HEADERS", envVar{list: true, check: isHeaders, using: is("no headers")}),
			otlp(s, "CERTIFICATE", envVar{check: otelenv.CheckCertificate, using: is("the system's roots")}),
			otlp(s, "CLIENT_CERTIFICATE", envVar{check: otelenv.CheckFile, using: is("no client certificate")}),
			otlp(s, "CLIENT_KEY", envVar{check: otelenv.CheckFile, using: is("no client certificate")}),
		)
	}
	return vs
}()

// defaultEndpoints describes the exporters' default endpoints.
const defaultEndpoints = "localhost:4318 (http/protobuf) or localhost:4317 (grpc), " +
	"with TLS unless OTEL_EXPORTER_OTLP_INSECURE (or the signal's own) is true"

// envError is the warning about a variable whose value is not valid; its
// message names the variable, quotes its value (bounded, secrets
// redacted) and says what is used instead.
type envError struct {
	// Name is the variable.
	Name string
	// Value is its value, valid UTF-8 and cut to 64 bytes, secrets
	// redacted.
	Value string
	// Err says what is wrong.
	Err error
	// Using says what takes effect instead.
	Using string
}

func (e *envError) Error() string {
	return fmt.Sprintf("otelsetup: %s=%q: %v; ignored, using %s", e.Name, e.Value, e.Err, e.Using)
}

func (e *envError) Unwrap() error { return e.Err }

// printable is what a warning may print of a variable's value: at most 64
// bytes, and never a secret. An endpoint's password and query values and
// every header's value are replaced by sanitize.Redacted, whether or not
// the value is valid: an invalid one is exactly the one printed.
func printable(name, v string) string {
	switch {
	case strings.HasSuffix(name, "_ENDPOINT"):
		return sanitize.URL(v, 64)
	case strings.HasSuffix(name, "_HEADERS"):
		// A header's name is shown only when it is one: an entry without
		// '=' ("Authorization: Bearer …", the commonest slip) or whose
		// name holds anything but a token's characters is all secret.
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

// environ is the environment as Setup reads it: only valid values, so
// that a value ignored is exactly a variable not set.
type environ struct {
	// vals are the valid values, as written.
	vals map[string]string
	// nums are the numbers among them.
	nums map[string]int64
	// notFor holds, by signal ("TRACES_", ...), the variables valid in
	// themselves that the signal cannot use: an endpoint with a path over
	// gRPC, a client certificate without its key.
	notFor map[string]map[string]bool
	// roots are the certificate pools the CERTIFICATE variables hold;
	// pairs the client certificates, by prefix (OTEL_EXPORTER_OTLP_ and
	// each signal's).
	roots map[string]*x509.CertPool
	pairs map[string]tls.Certificate
}

// str returns the value of name, "" when it is unset or ignored.
func (e *environ) str(name string) string { return e.vals[name] }

// lower returns the value of name in lowercase: a name of a set, which
// Setup reads in any case.
func (e *environ) lower(name string) string { return strings.ToLower(e.vals[name]) }

// int returns the first of the variables names that is set, or def.
func (e *environ) int(def int64, names ...string) int {
	for _, n := range names {
		if v, ok := e.nums[n]; ok {
			return int(v)
		}
	}
	return int(def)
}

// duration returns the first of the millisecond variables names that is
// set, or def milliseconds.
func (e *environ) duration(def int64, names ...string) time.Duration {
	return time.Duration(e.int(def, names...)) * time.Millisecond // at most maxMillis: no overflow
}

// signal returns the value of the OTLP variable suffix for the signal s
// ("TRACES_", ...): the signal's own, else the general one, each only
// when valid and usable by the signal.
func (e *environ) signal(s, suffix string) (name, value string) {
	for _, n := range []string{"OTEL_EXPORTER_OTLP_" + s + suffix, "OTEL_EXPORTER_OTLP_" + suffix} {
		if v, ok := e.vals[n]; ok && !e.notFor[s][n] {
			return n, v
		}
	}
	return "", ""
}

// readEnv reads every variable of the table, and the combinations the
// table cannot see, and returns what it read and one warning per variable
// whose value it ignored.
func readEnv() (*environ, []*envError) {
	e := &environ{vals: map[string]string{}, nums: map[string]int64{}, notFor: map[string]map[string]bool{},
		roots: map[string]*x509.CertPool{}, pairs: map[string]tls.Certificate{}}
	type ignored struct {
		v   envVar
		val string
		err error
	}
	var bad []ignored
	byName := map[string]envVar{}
	for _, v := range envVars {
		byName[v.name] = v
		val, ok := os.LookupEnv(v.name)
		if !ok || val == "" {
			continue
		}
		err := wellWritten(val, v.list)
		if err == nil && v.hi > 0 {
			var n int64
			if n, err = parseNumber(val, v.lo, v.hi, v.ms); err == nil {
				e.nums[v.name] = n
			}
		} else if err == nil {
			err = v.check(val)
		}
		if err != nil {
			bad = append(bad, ignored{v, val, err})
			continue
		}
		e.vals[v.name] = val
	}
	ignore := func(name string, err error) {
		bad = append(bad, ignored{byName[name], e.vals[name], err})
		delete(e.vals, name)
		delete(e.nums, name)
	}
	// A batch larger than its queue is one the queue never fills.
	for _, q := range []struct {
		queue, batch string
		def          int64
	}{{"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaultSpanQueue},
		{"OTEL_BLRP_MAX_QUEUE_SIZE", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", defaultLogQueue}} {
		if b, ok := e.nums[q.batch]; ok {
			if queue := e.int(q.def, q.queue); b > int64(queue) {
				ignore(q.batch, fmt.Errorf("greater than the queue size (%s, %d by default)", q.queue, q.def))
			}
		}
	}
	// The argument is read only by the ratio samplers: a value that is not
	// a ratio is ignored, as if unset (a ratio of 1).
	if strings.HasSuffix(e.lower("OTEL_TRACES_SAMPLER"), "traceidratio") {
		if arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
			err := wellWritten(arg, false)
			if err == nil {
				err = isRatio(arg)
			}
			if err == nil {
				e.vals["OTEL_TRACES_SAMPLER_ARG"] = arg
			} else {
				bad = append(bad, ignored{envVar{name: "OTEL_TRACES_SAMPLER_ARG", using: is("1")}, arg, err})
			}
		}
	}
	warnings := e.checkSignals()
	for _, b := range bad {
		warnings = append(warnings, &envError{Name: b.v.name, Value: printable(b.v.name, b.val), Err: b.err, Using: b.v.using(e)})
	}
	return e, warnings
}

// checkSignals checks what one OTLP variable cannot say alone, for each
// signal, loads the certificates and the client certificates, and returns
// a warning for each variable some signal cannot use.
func (e *environ) checkSignals() []*envError {
	for _, s := range signals {
		p := "OTEL_EXPORTER_OTLP_" + s
		if ca := e.vals[p+"CERTIFICATE"]; ca != "" {
			e.roots[p] = certPool(ca)
		}
	}
	notUsable := func(s, name string) {
		if e.notFor[s] == nil {
			e.notFor[s] = map[string]bool{}
		}
		e.notFor[s][name] = true
	}
	var warnings []*envError
	// Over gRPC an endpoint's path is not used: one given would be left
	// out. The signals that cannot use an endpoint take the next one
	// (the general variable's, else the default).
	var pathless []string
	by := map[string][]string{}
	for _, s := range signals[1:] {
		_, proto := e.signal(s, "PROTOCOL")
		if name, v := e.signal(s, "ENDPOINT"); strings.EqualFold(proto, "grpc") && v != "" {
			if u, err := url.Parse(v); err == nil && u.Path != "" && u.Path != "/" {
				if by[name] == nil {
					pathless = append(pathless, name)
				}
				by[name] = append(by[name], s)
				notUsable(s, name)
			}
		}
	}
	for _, name := range pathless {
		var of, using []string
		for _, s := range by[name] {
			sig := strings.ToLower(strings.TrimSuffix(s, "_"))
			next, _ := e.signal(s, "ENDPOINT")
			if next == "" {
				next = "the default endpoint"
			}
			of, using = append(of, sig), append(using, next+" for "+sig)
		}
		warnings = append(warnings, &envError{Name: name, Value: printable(name, e.vals[name]),
			Err:   fmt.Errorf("a path, which the gRPC exporter of %s does not use", strings.Join(of, " and ")),
			Using: strings.Join(using, ", ")})
	}
	// A client certificate is used only with its key; a pair that cannot
	// be used is not used by any signal, which takes the next pair.
	for _, s := range signals {
		p := "OTEL_EXPORTER_OTLP_" + s
		cert, key := e.vals[p+"CLIENT_CERTIFICATE"], e.vals[p+"CLIENT_KEY"]
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
			pair, lerr := tls.LoadX509KeyPair(cert, key)
			if lerr == nil {
				e.pairs[p] = pair
				continue
			}
			err = fmt.Errorf("not a certificate matching %sCLIENT_KEY, both PEM", p)
		}
		for _, t := range signals[1:] {
			if s == "" || s == t {
				notUsable(t, p+"CLIENT_CERTIFICATE")
				notUsable(t, p+"CLIENT_KEY")
			}
		}
		using := "no client certificate"
		if _, ok := e.pairs["OTEL_EXPORTER_OTLP_"]; ok && s != "" {
			using = "the pair of OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY"
		}
		warnings = append(warnings, &envError{Name: name, Value: printable(name, value), Err: err, Using: using})
	}
	return warnings
}

// certPool returns the pool of the certificates of the file path, which
// isCertificate checked.
func certPool(path string) *x509.CertPool {
	b, err := os.ReadFile(path)
	p := x509.NewCertPool()
	if err == nil {
		p.AppendCertsFromPEM(b)
	}
	return p
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

// propagatorNames are the names in an OTEL_PROPAGATORS value: separated by
// commas, spaces around each ignored, case ignored, each kept once in its
// first place. It returns the first name it does not know, and a name
// left empty between commas is one.
func propagatorNames(v string) (names []string, unknown string, ok bool) {
	known := func(n string) bool {
		_, err := autoprop.TextMapPropagator(n)
		return n != "" && err == nil
	}
	for _, given := range strings.Split(v, ",") {
		given = strings.TrimSpace(given)
		n := given // as given first: a propagator registered with capitals
		if !known(n) {
			n = strings.ToLower(given)
		}
		if !known(n) {
			return nil, given, false
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, "", true
}

func isPropagators(v string) error {
	if _, unknown, ok := propagatorNames(v); !ok {
		if unknown == "" {
			return errors.New("an empty name between commas")
		}
		return fmt.Errorf("unknown propagator %q (known: tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace, none)", sanitize.String(unknown, 32))
	}
	return nil
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

// oneOf accepts one of the names, in any case, as the specification reads
// the values of a set.
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

// producerNames are the names of an OTEL_METRICS_PRODUCERS value, in
// lowercase, each once.
func producerNames(v string) []string {
	var names []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.ToLower(strings.TrimSpace(p)); !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	return names
}

func isProducers(v string) error {
	for _, p := range producerNames(v) {
		if p != "prometheus" && p != "none" {
			return errors.New("want prometheus or none, separated by commas")
		}
	}
	return nil
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

// isHost checks the address the Prometheus exporter listens on, joined to
// the port as host:port: an IPv4 address, an IPv6 address in brackets, or
// localhost. A name that needs a lookup is not taken: whether it resolves,
// and to an address of this host, is known only when the exporter binds
// it.
func isHost(v string) error {
	if strings.EqualFold(v, "localhost") {
		return nil
	}
	if ip, ok := strings.CutPrefix(v, "["); ok {
		if ip, ok = strings.CutSuffix(ip, "]"); ok && net.ParseIP(ip) != nil && strings.Contains(ip, ":") {
			return nil
		}
		return errors.New("want an IPv6 address in brackets")
	}
	if ip := net.ParseIP(v); ip != nil {
		if ip.To4() == nil {
			return errors.New("an IPv6 address goes in brackets: [::1]")
		}
		return nil
	}
	return errors.New("want an IP address (IPv6 in brackets) or localhost")
}

// reservedHeaders are the header names that the exporters or their
// transports set themselves: one given in OTEL_EXPORTER_OTLP_HEADERS would
// be dropped or overwritten over one protocol or the other.
var reservedHeaders = []string{"content-type", "content-encoding", "content-length", "user-agent", "te", "host",
	"connection", "transfer-encoding", "upgrade", "keep-alive", "proxy-connection", "trailer"}

// isHeaders checks the list the OTLP exporters are given: name=value pairs
// separated by commas, values percent-encoded, white space around names
// and decoded values ignored. What it accepts is what both exporters send:
// gRPC carries header names of letters, digits, '-', '_' and '.' only (a
// name in quotes, as an env file may leave it, is not one) and values of
// printable ASCII only; each name once, whatever its case, since HTTP
// folds it.
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
		// As the exporters do: decode, then trim.
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

// headers returns the headers of a value isHeaders accepted, as the
// exporters decode them.
func headers(v string) map[string]string {
	h := map[string]string{}
	if v == "" {
		return h
	}
	for _, pair := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(pair, "=")
		d, _ := url.PathUnescape(val)
		h[strings.TrimSpace(k)] = strings.TrimSpace(d)
	}
	return h
}
