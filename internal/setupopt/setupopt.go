// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package setupopt holds what otelsetup shares with the module's own
// commands and tests only: its defaults, and the settings of Setup that no
// user program needs (a seeded id generator, the batch processor's options,
// an exporter that replaces the environment's), carried on the context
// given to Setup.
package setupopt

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// AttributeValueLengthLimit bounds every string attribute value of spans
// and log records, in bytes, when neither
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT (for log records,
// OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT) nor
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is set. The SDK's own default is no
// limit, so one 10 MB value (a prompt, a base64 image) would cost a whole
// export batch; 4 KiB keeps every id, model name and error message whole.
// The SDK counts its limit in characters; the exporter otelsetup builds
// cuts again in bytes, so the bound holds in bytes on the wire.
const AttributeValueLengthLimit = 4096

// ShutdownTimeout bounds otelsetup's Telemetry.Shutdown when neither
// otelsetup.WithShutdownTimeout nor the caller's context sets an earlier
// deadline: long enough to flush a full batch to a live collector, short
// enough that a dead one never holds up an engine's exit.
const ShutdownTimeout = 5 * time.Second

// Options are the settings of otelsetup.Setup that only the module's own
// programs and tests give. A zero field is not set.
type Options struct {
	// IDGenerator draws the trace and span ids, such as ids derived from a
	// seed so that a synthetic run is the same twice.
	IDGenerator sdktrace.IDGenerator
	// BatchOptions tune the span batch processor after the OTEL_BSP_*
	// variables; an option that does not fit a bound is replaced by the
	// SDK's default, and logged through the OpenTelemetry error handler.
	BatchOptions []sdktrace.BatchSpanProcessorOption
	// SpanExporter replaces the exporter the environment selects.
	SpanExporter sdktrace.SpanExporter
	// NoMetrics keeps Setup from making the metric reader that
	// OTEL_METRICS_EXPORTER selects.
	NoMetrics bool
}

type key struct{}

// With returns ctx carrying o, for otelsetup.Setup(With(ctx, o), ...).
func With(ctx context.Context, o Options) context.Context {
	return context.WithValue(ctx, key{}, o)
}

// From returns the Options ctx carries, zero when it carries none.
func From(ctx context.Context) Options {
	o, _ := ctx.Value(key{}).(Options)
	return o
}
