// Package otelomni traces requests through omni inference pipelines
// (diffusion text-to-image, image-to-image and text-to-video, and
// multi-stage speech and LLM pipelines) with OpenTelemetry: one span per
// request ([spans.RequestSpanName]) and one child span per measured phase of
// it (queue wait, preprocess, exec, output-ready wait, postprocess, and the
// parts inside exec).
//
// # The absence rule
//
// A phase that was not measured makes no span; a phase measured as 0 makes
// a span whose end equals its start. Phases overlap (queue wait lies inside
// exec) and are never added together. A bad measurement (an end before its
// start, a zero time) makes no span: the caller gets an error naming the
// phase, and the instrumenter counts it ([Instrumenter.Stats]).
//
// # Two ways in, one model
//
// The live path wraps the engine's calls: [Instrumenter.Start] starts the
// request span, [Request.StartPhase] and [ActivePhase.End] mark a phase, or
// [Request.Run] runs a function inside one, and [Request.End] ends the
// request (with an error when it failed). End times come from the monotonic
// clock.
//
// The record path takes the timing an engine measured itself: hand a
// [spans.DiffusionRecord] to [Request.Record], or one interval to
// [Request.RecordPhase], and get the same spans with the record's own
// timestamps.
//
// # Cost
//
// Like all OpenTelemetry instrumentation, otelomni follows the global
// tracer provider unless given one ([WithTracerProvider]): installing an SDK
// turns it on. With a no-op provider, or the global one before an SDK is
// installed, a request and its phases allocate nothing. When a request is
// not sampled, no phase span is started. Nothing in the package panics into,
// blocks or fails the engine it wraps.
package otelomni
