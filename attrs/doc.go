// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package attrs holds otelomni's semantic conventions: every omni.*
// attribute key that otelomni puts on a span, as a typed [attribute.Key]
// constant, and the values otelomni defines for them (modalities, stage
// types, error types).
//
// The keys are the product's contract with its users: Jaeger searches,
// TraceQL queries, dashboards and alerts are written against them. Where an
// OpenTelemetry convention already names the thing (gen_ai.request.model,
// gen_ai.operation.name, gen_ai.output.type, gen_ai.provider.name,
// gen_ai.usage.input_tokens and output_tokens, error.type), otelomni uses
// it, and its key is semconv's (go.opentelemetry.io/otel/semconv/v1.41.0):
// semconv.GenAIRequestModelKey and friends.
//
// otelomni sets the identifying attributes itself, from RequestInfo,
// StageInfo and the records; a program reads the keys (span processors,
// queries, tests), and writes the others with the key's typed method, such
// as attrs.NumPreemptionsKey.Int(1) on a stage span, or, for a phase's
// output and step, attrs.OutputIndexKey.Int(2) among the phase's start
// attributes. Each key's comment gives its type, its unit when there is
// one, and an example value.
package attrs
