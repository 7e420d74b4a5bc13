// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package otelsetup installs the OpenTelemetry SDK for an omni engine in
// one call, from the standard OTEL_* variables: [Setup] builds the span
// exporter and metric reader (OTLP over gRPC or HTTP, Prometheus, console or
// none), the resource (never the command line, which can hold secrets) and
// the providers, and returns a [Telemetry] to flush and shut them down.
//
// It adds what the SDK leaves to the program:
//
//   - every variable is read as the OpenTelemetry specification says, every
//     number within a range: a value that is not valid is warned about once,
//     through the OpenTelemetry error handler, and ignored, its default
//     taking effect; never a panic, a spinning core or an allocation out of
//     bounds, and no value turns tracing off. Setup hands what it read to
//     the SDK and the exporters as options, so what it takes is what takes
//     effect;
//   - every span handed to the exporter is accounted for
//     ([Telemetry.ExportStats]), a collector's partial success from the
//     collector's own answer, and [Telemetry.Shutdown] and
//     [Telemetry.ForceFlush] report spans that did not reach the collector
//     ([ErrSpansLost]) whatever the protocol;
//   - string attribute values are bounded, by default to 4096 bytes
//     (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT sets it), and a span holding a string that
//     is not valid UTF-8, from any instrumentation in the process, is
//     repaired before export so that it cannot cost the rest of its batch;
//   - shutdown is bounded, by default to 5 s ([WithShutdownTimeout]): a
//     dead collector never holds up an engine's exit;
//   - behind the tail-sampling tier of deploy/, OTELOMNI_EXEMPLARS=kept
//     keeps a histogram's exemplar only for a measurement whose trace the
//     tier keeps, by the tier's own rules and thresholds (its OMNI_*
//     variables), decided on the span as it is exported.
//
// The instrumentation itself (github.com/otelomni/otelomni/otelomni) links
// the OpenTelemetry API only; this package is what links the SDK.
package otelsetup
