// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
)

// otlpClient returns the OTLP client of OpenTelemetry Go's own exporter
// for the protocol the environment names
// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
// http/protobuf, the default, or grpc, in any case). The client reads its
// endpoint, headers, TLS, timeout and retries from the same variables
// itself, once checkEnv has unset the values not valid; the compression
// is handed to it, since it would read gzip only in lowercase.
func otlpClient() otlptrace.Client {
	gzip := strings.EqualFold(otlpValue("COMPRESSION"), "gzip")
	if strings.EqualFold(otlpValue("PROTOCOL"), "grpc") {
		var opts []otlptracegrpc.Option
		if gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		return otlptracegrpc.NewClient(opts...)
	}
	compression := otlptracehttp.NoCompression
	if gzip {
		compression = otlptracehttp.GzipCompression
	}
	return otlptracehttp.NewClient(otlptracehttp.WithCompression(compression))
}
