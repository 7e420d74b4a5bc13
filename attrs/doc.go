// Package attrs holds otelomni's semantic conventions: every attribute key
// that otelomni puts on a span, as a typed [attribute.Key] constant with a
// constructor that returns an [attribute.KeyValue].
//
// The keys are the product's contract with its users: Jaeger searches,
// TraceQL queries, dashboards and alerts are written against them. They live
// in the omni.* namespace, except where an OpenTelemetry GenAI convention
// already names the thing (gen_ai.request.model, gen_ai.usage.input_tokens,
// ...). The Go semconv packages after v1.41.0 no longer carry the gen_ai.*
// keys, so they are defined here.
//
// Each constructor's comment gives the unit (when there is one) and an
// example value, the way the semconv packages do.
package attrs
