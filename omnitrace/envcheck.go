// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// checkEnvironment refuses, before anything is read or sent, the values
// of the OTEL_* variables that import and recover read themselves and
// could not use as written: a number out of the range that bounds what it
// sizes, an endpoint that is not an http:// or https:// URL with a host
// (or carries credentials, a query or a fragment, which the exporters
// would silently leave out), headers that are not name=value pairs. A
// command refuses what an engine's otelsetup.Setup warns about and
// ignores: nothing is lost by not starting, and the exporters would
// otherwise log such a value, secrets and all. The error names each
// variable; an endpoint or header is printed without its secrets.
func checkEnvironment() error {
	var errs []error
	bad := func(name, shown string, err error) {
		errs = append(errs, fmt.Errorf("%s=%q: %w", name, sanitize.String(shown, 64), err))
	}
	for _, n := range []struct {
		name   string
		lo, hi int64
	}{
		{"OTEL_BSP_MAX_QUEUE_SIZE", 1, 1 << 17}, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, 1 << 17},
		{"OTEL_BSP_SCHEDULE_DELAY", 1, 86_400_000}, {"OTEL_BSP_EXPORT_TIMEOUT", 1, 86_400_000},
		{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", 0, 1 << 10}, {"OTEL_ATTRIBUTE_COUNT_LIMIT", 0, 1 << 10},
		{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, 1 << 16}, {"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", 1, 1 << 16},
	} {
		if v := os.Getenv(n.name); v != "" {
			if i, err := strconv.ParseInt(v, 10, 64); err != nil || strconv.FormatInt(i, 10) != v || i < n.lo || i > n.hi {
				bad(n.name, v, fmt.Errorf("want a whole number from %d to %d, in decimal digits", n.lo, n.hi))
			}
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v := os.Getenv(name); v != "" {
			if err := checkEndpoint(v); err != nil {
				bad(name, sanitize.URL(v, 64), err)
			}
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if v := os.Getenv(name); v != "" {
			for _, pair := range strings.Split(v, ",") {
				k, val, ok := strings.Cut(pair, "=")
				if _, err := url.PathUnescape(val); !ok || strings.TrimSpace(k) == "" || err != nil {
					bad(name, "[REDACTED]", errors.New("want name=value pairs separated by commas, values percent-encoded"))
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

func checkEndpoint(v string) error {
	u, err := url.Parse(strings.TrimSpace(v))
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an http:// or https:// URL")
	case u.Hostname() == "":
		return errors.New("the URL has no host")
	case u.User != nil:
		return errors.New("credentials in the URL, which the exporters do not send: give them in OTEL_EXPORTER_OTLP_HEADERS")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(v, "#"):
		return errors.New("a query or a fragment, which the exporters do not send")
	}
	return nil
}
