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

	"github.com/otelomni/otelomni/internal/sanitize"
)

// One rule for every variable Setup, the SDK and the exporters read: a
// value is taken as it is written, and a value that is not well formed is
// an error. Setup then returns that error, naming each bad variable, and a
// no-op Telemetry, so that an engine logs one clear line and runs untraced,
// rather than running with a setting the operator did not ask for (spans
// silently sent to localhost, a sampler silently replaced, a default queue
// in place of a padded one, a core spinning, a panic). An empty or unset
// variable takes its default.
//
// "As written" is what makes the check and the readers agree: some readers
// trim a value and some do not, some fold its case and some do not, so a
// single value may carry no white space at either end, and a name the
// exporters compare exactly (otlp, grpc, gzip, ...) must be written in
// lowercase. A number is written in decimal digits, without sign or leading
// zeros, and has a range: what is in range is what the SDK uses, and no
// conversion of it can overflow. Setup itself reads the numbers it can hand
// to the SDK as options (the batch processors, the span and log limits), so
// that the SDK's own reading of the same variable never takes effect. The
// table is documented in docs/reliability.md.

// envVar is one variable Setup reads, and what a well-formed value is.
type envVar struct {
	name string
	// lo and hi bound a number: the variable is a number when hi > 0.
	lo, hi int64
	// ms says the number counts milliseconds.
	ms bool
	// list allows white space around the value and its items, which every
	// reader of the variable trims.
	list bool
	// check checks a value that is not a number.
	check func(string) error
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
	// maxFileSize bounds a certificate or key file: the exporters read it
	// whole.
	maxFileSize = 1 << 20
)

// The SDK's defaults, which the cross-variable checks need.
const (
	defaultSpanQueue = 2048 // sdktrace.DefaultMaxQueueSize
	defaultSpanBatch = 512  // sdktrace.DefaultMaxExportBatchSize
	defaultLogQueue  = 2048
	defaultLogBatch  = 512
)

// signals are the per-signal infixes of the OTLP variables.
var signals = []string{"", "TRACES_", "METRICS_", "LOGS_"}

func number(name string, lo, hi int64) envVar { return envVar{name: name, lo: lo, hi: hi} }

func millis(name string, lo int64) envVar {
	return envVar{name: name, lo: lo, hi: maxMillis, ms: true}
}

// envVars lists every variable that Setup, the SDK and the exporters it
// builds read (OpenTelemetry Go v1.47.0, contrib v0.72.0).
var envVars = func() []envVar {
	vs := []envVar{
		{name: "OTEL_SDK_DISABLED", check: isBool},
		{name: "OTEL_PROPAGATORS", list: true, check: isPropagators},
		{name: "OTEL_SERVICE_NAME", check: isText},
		{name: "OTEL_RESOURCE_ATTRIBUTES", list: true, check: isResourceAttributes},
		{name: "OTEL_TRACES_EXPORTER", check: exactly("otlp", "console", "none")},
		{name: "OTEL_METRICS_EXPORTER", check: exactly("otlp", "prometheus", "console", "none")},
		{name: "OTEL_LOGS_EXPORTER", check: exactly("otlp", "console", "none")},
		{name: "OTEL_METRICS_PRODUCERS", check: isProducers},
		{name: "OTEL_TRACES_SAMPLER", check: anyCase("always_on", "always_off", "traceidratio",
			"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio")},
		millis("OTEL_BSP_SCHEDULE_DELAY", 1),
		millis("OTEL_BSP_EXPORT_TIMEOUT", 1),
		number("OTEL_BSP_MAX_QUEUE_SIZE", 1, maxSpanQueue),
		number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, maxSpanQueue),
		number("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength),
		number("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength),
		number("OTEL_ATTRIBUTE_COUNT_LIMIT", 0, maxCount),
		number("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", 0, maxCount),
		number("OTEL_SPAN_EVENT_COUNT_LIMIT", 0, maxCount),
		number("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", 0, maxCount),
		number("OTEL_SPAN_LINK_COUNT_LIMIT", 0, maxCount),
		number("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", 0, maxCount),
		millis("OTEL_BLRP_SCHEDULE_DELAY", 1),
		millis("OTEL_BLRP_EXPORT_TIMEOUT", 1),
		number("OTEL_BLRP_MAX_QUEUE_SIZE", 1, maxLogQueue),
		number("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", 1, maxLogQueue),
		number("OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, maxValueLength),
		number("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", 0, maxCount),
		// Each export sends every series: more than ten a second is a
		// core's work, and the collector's.
		millis("OTEL_METRIC_EXPORT_INTERVAL", 100),
		millis("OTEL_METRIC_EXPORT_TIMEOUT", 1),
		{name: "OTEL_METRICS_EXEMPLAR_FILTER", check: anyCase("always_on", "always_off", "trace_based")},
		number("OTEL_GO_X_CARDINALITY_LIMIT", 1, maxSeries),
		{name: "OTEL_GO_X_OBSERVABILITY", check: isBool},
		{name: "OTEL_GO_X_SELF_OBSERVABILITY", check: isBool},
		{name: "OTEL_GO_X_RESOURCE", check: isBool},
		{name: "OTEL_GO_X_PER_SERIES_START_TIMESTAMPS", check: isBool},
		{name: "OTEL_EXPORTER_PROMETHEUS_HOST", check: isHost},
		number("OTEL_EXPORTER_PROMETHEUS_PORT", 1, 65535),
		{name: "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", check: anyCase("cumulative", "delta", "lowmemory")},
		{name: "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", check: anyCase("explicit_bucket_histogram",
			"base2_exponential_bucket_histogram")},
		// otelsetup's own: the crash journal (WithJournal).
		{name: envJournalDir, check: isJournalDir},
		number(envJournalSize, minJournalMiB, maxJournalMiB),
		{name: envJournalSync, lo: minJournalSync, hi: maxJournalSync, ms: true},
	}
	// OTELOMNI_EXEMPLARS and the tier's OMNI_* variables are read, and
	// warned about, by the kept-exemplar choice (exemplar.go).
	for _, s := range signals {
		p := "OTEL_EXPORTER_OTLP_" + s
		vs = append(vs,
			envVar{name: p + "ENDPOINT", check: isEndpoint},
			envVar{name: p + "PROTOCOL", check: exactly("grpc", "http/protobuf")},
			millis(p+"TIMEOUT", 0),
			envVar{name: p + "COMPRESSION", check: exactly("gzip", "none")},
			envVar{name: p + "INSECURE", check: isBool},
			envVar{name: p + "HEADERS", list: true, check: isHeaders},
			envVar{name: p + "CERTIFICATE", check: isCertificate},
			envVar{name: p + "CLIENT_CERTIFICATE", check: isFile},
			envVar{name: p + "CLIENT_KEY", check: isFile},
		)
	}
	return vs
}()

// envError reports a variable whose value is not well formed; its message
// names the variable.
type envError struct {
	// Name is the variable.
	Name string
	// Value is its value, valid UTF-8 and cut to 64 bytes.
	Value string
	// Err says what is wrong.
	Err error
}

func (e *envError) Error() string {
	return fmt.Sprintf("otelsetup: %s=%q: %v", e.Name, e.Value, e.Err)
}

func (e *envError) Unwrap() error { return e.Err }

// printable is what an error may print of a variable's value: at most 64
// bytes, and never a secret. An endpoint's password and query values and
// every header's value are replaced by sanitize.Redacted, whether or not
// the value is well formed: a malformed one is exactly the one printed.
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

// CheckEnvironment checks the OTEL_* variables as [Setup] does, and sets
// nothing up. A program that builds an exporter of its own from the
// environment before calling Setup calls it first, so that a malformed
// value is reported once, clearly and without its secrets, rather than
// by the exporter's own log.
func CheckEnvironment() error {
	_, err := readEnv()
	return err
}

// envValues holds the numbers readEnv read, each in its range.
type envValues struct {
	nums map[string]int64
}

// int returns the first of the variables names that is set, or def.
func (e envValues) int(def int64, names ...string) int {
	for _, n := range names {
		if v, ok := e.nums[n]; ok {
			return int(v)
		}
	}
	return int(def)
}

// duration returns the first of the millisecond variables names that is
// set, or def.
func (e envValues) duration(def time.Duration, names ...string) time.Duration {
	for _, n := range names {
		if v, ok := e.nums[n]; ok {
			return time.Duration(v) * time.Millisecond // v <= maxMillis: no overflow
		}
	}
	return def
}

// readEnv checks every variable of the table, and the combinations the
// table cannot see, and returns one error per bad variable, and the
// numbers it read.
func readEnv() (envValues, error) {
	e := envValues{nums: map[string]int64{}}
	var errs []error
	refused := map[string]bool{}
	bad := func(name, v string, err error) {
		errs = append(errs, &envError{Name: name, Value: printable(name, v), Err: err})
		refused[name] = true
	}
	for _, v := range envVars {
		val, ok := os.LookupEnv(v.name)
		if !ok || val == "" {
			continue
		}
		if err := wellWritten(val, v.list); err != nil {
			bad(v.name, val, err)
			continue
		}
		if v.hi > 0 {
			n, err := parseNumber(val, v.lo, v.hi, v.ms)
			if err != nil {
				bad(v.name, val, err)
				continue
			}
			e.nums[v.name] = n
			continue
		}
		if err := v.check(val); err != nil {
			bad(v.name, val, err)
		}
	}
	// A batch larger than its queue is one the queue never fills.
	for _, q := range []struct {
		queue, batch string
		def          int
	}{{"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaultSpanQueue},
		{"OTEL_BLRP_MAX_QUEUE_SIZE", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", defaultLogQueue}} {
		if b, ok := e.nums[q.batch]; ok {
			if queue := e.int(int64(q.def), q.queue); b > int64(queue) {
				bad(q.batch, os.Getenv(q.batch), fmt.Errorf("greater than the queue size (%s, %d by default)", q.queue, q.def))
				delete(e.nums, q.batch)
			}
		}
	}
	// The argument is read only by the ratio samplers.
	if s := strings.ToLower(os.Getenv("OTEL_TRACES_SAMPLER")); strings.HasSuffix(s, "traceidratio") {
		if arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
			err := wellWritten(arg, false)
			if err == nil {
				err = isRatio(arg)
			}
			if err != nil {
				bad("OTEL_TRACES_SAMPLER_ARG", arg, err)
			}
		}
	}
	// Over gRPC an endpoint's path is not used: one given would be left out.
	for _, s := range signals[1:] {
		p := "OTEL_EXPORTER_OTLP_"
		proto := os.Getenv(p + s + "PROTOCOL")
		if proto == "" {
			proto = os.Getenv(p + "PROTOCOL")
		}
		name := p + s + "ENDPOINT"
		if os.Getenv(name) == "" {
			name = p + "ENDPOINT"
		}
		if v := os.Getenv(name); proto == "grpc" && v != "" && !refused[name] {
			if u, err := url.Parse(v); err == nil && u.Path != "" && u.Path != "/" {
				bad(name, v, fmt.Errorf("a path, which the gRPC exporter of %s does not use", strings.ToLower(strings.TrimSuffix(s, "_"))))
			}
		}
	}
	// A client certificate is used only with its key.
	for _, s := range signals {
		p := "OTEL_EXPORTER_OTLP_" + s
		cert, key := os.Getenv(p+"CLIENT_CERTIFICATE"), os.Getenv(p+"CLIENT_KEY")
		switch {
		case refused[p+"CLIENT_CERTIFICATE"] || refused[p+"CLIENT_KEY"] || cert == "" && key == "":
		case cert == "":
			bad(p+"CLIENT_KEY", key, fmt.Errorf("set without %sCLIENT_CERTIFICATE", p))
		case key == "":
			bad(p+"CLIENT_CERTIFICATE", cert, fmt.Errorf("set without %sCLIENT_KEY", p))
		default:
			if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
				bad(p+"CLIENT_CERTIFICATE", cert, fmt.Errorf("not a certificate matching %sCLIENT_KEY, both PEM", p))
			}
		}
	}
	if len(errs) > 0 {
		return envValues{}, errors.Join(errs...)
	}
	return e, nil
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
		return errors.New("only white space (leave it empty, or unset it, for the default)")
	case !list && strings.TrimSpace(v) != v:
		return errors.New("white space at its start or end (some readers trim it, others then use their default)")
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

// isBool accepts what every reader of a switch takes: true or false, in
// any case.
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

// exactly accepts one of the names as written: its readers compare them
// byte for byte.
func exactly(allowed ...string) func(string) error {
	return func(v string) error {
		if slices.Contains(allowed, v) {
			return nil
		}
		return fmt.Errorf("want one of %s, in lowercase", strings.Join(allowed, ", "))
	}
}

// anyCase accepts one of the names in any case: its reader folds it.
func anyCase(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
	}
}

// isProducers checks OTEL_METRICS_PRODUCERS, which autoexport splits at
// commas and looks up as written.
func isProducers(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p != "prometheus" && p != "none" {
			return errors.New("want prometheus or none, separated by commas without spaces")
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

// isHost checks the address the Prometheus exporter listens on, which
// autoexport joins to the port as host:port: an IPv4 address, an IPv6
// address in brackets, or localhost. A name that needs a lookup is not
// taken: whether it resolves, and to an address of this host, is known
// only when the exporter binds it.
func isHost(v string) error {
	if v == "localhost" {
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

// isHeaders checks the list the OTLP exporters read: name=value pairs
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

// isFile checks a file an exporter reads whole: a regular file (not a
// device or a pipe, which could block or never end) of at most
// maxFileSize bytes, readable.
func isFile(v string) error {
	st, err := os.Stat(v)
	switch {
	case err != nil:
		return errors.New("cannot read the file")
	case st.IsDir():
		return errors.New("is a folder, not a file")
	case !st.Mode().IsRegular():
		return errors.New("not a regular file")
	case st.Size() > maxFileSize:
		return fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	f, err := os.Open(v)
	if err != nil {
		return errors.New("cannot read the file")
	}
	return f.Close()
}

// isCertificate checks a file of PEM certificates: the exporters ignore
// one they cannot parse, and then trust no collector.
func isCertificate(v string) error {
	if err := isFile(v); err != nil {
		return err
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return errors.New("cannot read the file")
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return errors.New("holds no PEM certificate")
	}
	return nil
}

// isResourceAttributes checks key=value pairs separated by commas, values
// percent-encoded, every key and decoded value valid UTF-8 (a resource
// attribute that is not would cost every export), each key once (the SDK
// would keep the last).
func isResourceAttributes(v string) error {
	seen := map[string]bool{}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return errors.New("want key=value pairs separated by commas")
		}
		if seen[k] {
			return fmt.Errorf("key %s given twice", sanitize.String(k, 32))
		}
		seen[k] = true
		d, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return errors.New("a value is not percent-encoded correctly")
		}
		if !utf8.ValidString(d) {
			return errors.New("a decoded value is not valid UTF-8")
		}
	}
	return nil
}
