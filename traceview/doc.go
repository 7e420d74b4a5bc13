// Package traceview shows omni traces as people read them in a terminal: a
// waterfall per request (one row per expected phase, a bar on the
// request's own timeline, "not measured" where a phase has no span), a
// table per request, and a summary per phase across requests. It never adds
// phases together.
//
// Traces come from the SDK in process ([Exporter], a span exporter, and
// [Collector], a span processor) or from OTLP/JSON, as Jaeger's /api/v3 and
// the OTLP file exporter write it ([ParseOTLPJSON]). Strings from clients
// (ids, names, error messages) are shown bounded, with control characters
// defused.
package traceview
