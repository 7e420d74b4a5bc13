// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
)

// otlpClient returns the OTLP client the environment names, as autoexport
// would choose it (OTEL_TRACES_EXPORTER unset or "otlp", and
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
// "http/protobuf", the default, or "grpc"), and false when the environment
// names anything else. The client reads its endpoint, headers, TLS,
// compression, timeout and retries from the same variables as the
// exporter autoexport would build.
func otlpClient() (otlptrace.Client, bool) {
	if k := os.Getenv("OTEL_TRACES_EXPORTER"); k != "" && k != "otlp" {
		return nil, false
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		return otlptracehttp.NewClient(), true
	case "grpc":
		return otlptracegrpc.NewClient(), true
	}
	return nil, false
}
