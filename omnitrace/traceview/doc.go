// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package traceview shows omni traces as people read them in a terminal: a
// waterfall per request (one row per expected phase, a bar on the
// request's own timeline, "not measured" where a phase has no span), and a
// summary per phase across requests. It never adds phases together.
//
// Traces come from the SDK in process ([Exporter], a span exporter, or
// [FromSDK]) or from OTLP/JSON as the OpenTelemetry Collector's file
// exporter and Jaeger's /api/v3 write it ([ReadOTLPJSON], through the
// Collector's own decoding, pdata's ptrace); [WriteOTLPJSON] writes it.
// Strings from clients (ids, names, error messages) are shown bounded,
// with control characters defused.
package traceview
