package otelsetup

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/propagators/autoprop"

	"github.com/otelomni/otelomni/sanitize"
)

// One rule for every variable Setup reads: a value that is not well formed
// is an error. Setup then returns that error, naming each bad variable, and
// a no-op Telemetry, so that an engine logs one clear line and runs
// untraced, rather than running with a setting the operator did not ask for
// (spans silently sent to localhost, a sampler silently replaced, a core
// spinning). An empty or unset variable takes its default. The table is
// documented in docs/reliability.md.

// envVar is one variable Setup reads, and what a well-formed value is.
type envVar struct {
	name  string
	check func(string) error
}

// maxEnvValue bounds any variable's value: a header with a token fits, a
// megabyte does not.
const maxEnvValue = 16 << 10

// signals are the per-signal infixes of the OTLP variables.
var signals = []string{"", "TRACES_", "METRICS_", "LOGS_"}

// envVars lists every variable that Setup, the SDK and the exporters it
// builds read.
var envVars = func() []envVar {
	vs := []envVar{
		{"OTEL_SDK_DISABLED", isBool},
		{"OTEL_PROPAGATORS", isPropagators},
		{"OTEL_SERVICE_NAME", isText},
		{"OTEL_RESOURCE_ATTRIBUTES", isResourceAttributes},
		{"OTEL_TRACES_EXPORTER", oneOf("otlp", "console", "none")},
		{"OTEL_METRICS_EXPORTER", oneOf("otlp", "prometheus", "console", "none")},
		{"OTEL_LOGS_EXPORTER", oneOf("otlp", "console", "none")},
		{"OTEL_TRACES_SAMPLER", oneOf("always_on", "always_off", "traceidratio",
			"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio")},
		{"OTEL_BSP_SCHEDULE_DELAY", positiveInt},
		{"OTEL_BSP_EXPORT_TIMEOUT", positiveInt},
		{"OTEL_BSP_MAX_QUEUE_SIZE", positiveInt},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", positiveInt},
		{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", positiveInt},
		{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", positiveInt},
		{"OTEL_ATTRIBUTE_COUNT_LIMIT", nonNegativeInt},
		{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", nonNegativeInt},
		{"OTEL_SPAN_EVENT_COUNT_LIMIT", nonNegativeInt},
		{"OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", nonNegativeInt},
		{"OTEL_SPAN_LINK_COUNT_LIMIT", nonNegativeInt},
		{"OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", nonNegativeInt},
		{"OTEL_METRIC_EXPORT_INTERVAL", positiveInt},
		{"OTEL_METRIC_EXPORT_TIMEOUT", positiveInt},
		{"OTEL_EXPORTER_PROMETHEUS_HOST", isHost},
		{"OTEL_EXPORTER_PROMETHEUS_PORT", isPort},
	}
	for _, s := range signals {
		p := "OTEL_EXPORTER_OTLP_" + s
		vs = append(vs,
			envVar{p + "ENDPOINT", isEndpoint},
			envVar{p + "PROTOCOL", oneOf("grpc", "http/protobuf")},
			envVar{p + "TIMEOUT", nonNegativeInt},
			envVar{p + "COMPRESSION", oneOf("gzip", "none")},
			envVar{p + "INSECURE", isBool},
			envVar{p + "HEADERS", isHeaders},
			envVar{p + "CERTIFICATE", isFile},
			envVar{p + "CLIENT_CERTIFICATE", isFile},
			envVar{p + "CLIENT_KEY", isFile},
		)
	}
	return vs
}()

// EnvError reports a variable whose value is not well formed.
type EnvError struct {
	// Name is the variable.
	Name string
	// Value is its value, valid UTF-8 and cut to 64 bytes.
	Value string
	// Err says what is wrong.
	Err error
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("otelsetup: %s=%q: %v", e.Name, e.Value, e.Err)
}

func (e *EnvError) Unwrap() error { return e.Err }

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
func CheckEnvironment() error { return checkEnv() }

// checkEnv checks every variable of the table, and the combinations the
// table cannot see, and returns one error per bad variable.
func checkEnv() error {
	var errs []error
	bad := func(name, v string, err error) {
		errs = append(errs, &EnvError{Name: name, Value: printable(name, v), Err: err})
	}
	for _, v := range envVars {
		raw, ok := os.LookupEnv(v.name)
		val := strings.TrimSpace(raw)
		if !ok || val == "" {
			continue
		}
		if len(val) > maxEnvValue {
			bad(v.name, val, fmt.Errorf("longer than %d bytes", maxEnvValue))
			continue
		}
		if !utf8.ValidString(val) {
			bad(v.name, val, errors.New("not valid UTF-8"))
			continue
		}
		if err := v.check(val); err != nil {
			bad(v.name, val, err)
		}
	}
	// The argument is read only by the ratio samplers.
	if s := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER"))); strings.HasSuffix(s, "traceidratio") {
		if arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG")); arg != "" {
			if err := isRatio(arg); err != nil {
				bad("OTEL_TRACES_SAMPLER_ARG", arg, err)
			}
		}
	}
	return errors.Join(errs...)
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

func isBool(v string) error {
	switch strings.ToLower(v) {
	case "true", "false":
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

func positiveInt(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return errors.New("want a whole number above 0")
	}
	return nil
}

func nonNegativeInt(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return errors.New("want a whole number, 0 or above")
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
	if p := u.Port(); p != "" {
		if err := isPort(p); err != nil {
			return err
		}
	}
	return nil
}

func isHost(v string) error {
	if strings.ContainsAny(v, "/ ?#@") {
		return errors.New("want a host name or address")
	}
	return nil
}

func isPort(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return errors.New("want a port from 1 to 65535")
	}
	return nil
}

// isHeaders checks the W3C-baggage-like list the OTLP exporters read:
// key=value pairs separated by commas, values percent-encoded.
func isHeaders(v string) error {
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return errors.New("want key=value pairs separated by commas")
		}
		d, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return errors.New("a value is not percent-encoded correctly")
		}
		if strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			return errors.New("a value holds a control character, which no HTTP header may carry")
		}
	}
	return nil
}

func isFile(v string) error {
	st, err := os.Stat(v)
	if err != nil {
		return errors.New("cannot read the file")
	}
	if st.IsDir() {
		return errors.New("is a folder, not a file")
	}
	return nil
}

// isResourceAttributes checks key=value pairs separated by commas, values
// percent-encoded, every key and decoded value valid UTF-8: a resource
// attribute that is not would cost every export.
func isResourceAttributes(v string) error {
	for _, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return errors.New("want key=value pairs separated by commas")
		}
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
