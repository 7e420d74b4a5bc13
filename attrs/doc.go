// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package attrs holds otelomni's semantic conventions: every attribute key
// that otelomni puts on a span, as a typed [attribute.Key] constant, and the
// values otelomni defines for them (modalities, stage types, error types).
//
// The keys are the product's contract with its users: Jaeger searches,
// TraceQL queries, dashboards and alerts are written against them. They live
// in the omni.* namespace, except where an OpenTelemetry GenAI convention
// already names the thing (gen_ai.request.model, gen_ai.usage.input_tokens,
// ...). The Go semconv packages after v1.41.0 no longer carry the gen_ai.*
// keys, so they are defined here.
//
// otelomni sets the attributes itself, from RequestInfo, StageInfo and the
// records; a program reads the keys (span processors, queries, tests) and
// writes one itself with the key's typed method, such as
// attrs.BatchSizeKey.Int(4). Each key's comment gives its type, its unit
// when there is one, and an example value.
package attrs
