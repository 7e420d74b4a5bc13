// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package otelomni traces requests through omni inference pipelines
// (diffusion text-to-image, image-to-image and text-to-video, and
// multi-stage speech and LLM pipelines) with OpenTelemetry: one span per
// request (omni.request), one per stage in a multi-stage pipeline
// (omni.stage), and one child span per measured phase (queue wait,
// preprocess, exec, output-ready wait, postprocess, and the parts inside
// exec), with histograms from the same measurements.
//
// Like all OpenTelemetry instrumentation, the package uses the
// OpenTelemetry API alone: it follows the global tracer and meter providers
// unless given some ([WithTracerProvider], [WithMeterProvider]), so
// installing an SDK turns it on. The package
// github.com/otelomni/otelomni/otelsetup installs one from the standard
// OTEL_* variables.
//
// # The absence rule
//
// A phase that was not measured makes no span; a phase measured as 0 makes
// a span whose end equals its start. Phases overlap (queue wait lies inside
// exec) and are never added together. A bad measurement (an end before its
// start, a zero time, a time outside what a span can carry) makes no span:
// the caller gets an error naming the phase ([*spans.PhaseError]), and the
// instrumenter counts it ([Instrumenter.Stats]). So does a measurement that
// contradicts the tree: a phase measured twice for one request, or one
// that lies outside the span it hangs under.
//
// # How a refusal is reported
//
// Whatever otelomni refuses, moves or repairs instead of exporting it wrong
// is reported one way: it is counted in [Instrumenter.Stats], by kind
// (RejectedIntervals, Conflicts, Misuse, ClockSkew, ClampedEnds,
// RepairedStrings, OtherModels), and the first of each kind is logged
// through the OpenTelemetry error handler (otel.Handle). A call that
// returns an error also returns it to the caller: a [*spans.PhaseError]
// naming the phase, or an error matching [ErrRequestEnded] or
// [ErrInvalidPhase]. A call that returns none (StartPhase, SetAttributes,
// End) has nothing more to say than the count and the log line.
//
// # Two ways in, one model
//
// The live path wraps the engine's calls: [Instrumenter.Start] starts the
// request span, [Request.StartPhase] and [ActivePhase.End] mark a phase
// or a part of one (exec's kv_recv, forward and vae_decode, forward's
// denoise steps: each hangs under its open parent), and [Request.End] ends the
// request; each End takes the error the request or phase failed with, nil
// when it succeeded. A stage that streams chunks marks its outputs
// ([Request.MarkOutput]) with the time each happened.
//
// The record path takes the timing an engine measured itself: hand a
// [spans.DiffusionRecord] to [Request.Record], or one interval to
// [Request.RecordPhase] (an LLM stage's queue, prefill and decode among
// them), and get the same spans with the record's own timestamps, a failed
// phase marked failed as on the live path.
//
// In a multi-stage pipeline, each stage process extracts the request's
// context from its stage message ([Instrumenter.Extract]) and records its
// phases on the [Request] that [Instrumenter.StartStage] returns: the same
// type, under an omni.stage span.
//
// # Time, and a tree that stays whole
//
// Each edge of a span (its start, its end) is one reading of the clock,
// given both to the span (trace.WithTimestamp) and to its measurement, so
// a histogram sample is its span's duration exactly, whatever the SDK's
// span processors cost; the readings of one request are its start plus the
// monotonic time elapsed, so a step of the wall clock cannot make a span
// negative or differ from its measurement. They are read under the
// request's lock: a child that ends first ends no later than its parent,
// and a parent that ends first ends its open children at its own end,
// whatever the goroutines do. The same holds for a stage started in the
// same process under its request, an engine's steps, and a batch's links,
// made both ways or neither. No call waits for another goroutine: a span
// still being started on another goroutine when its parent ends is ended
// there, at its parent's end, by the goroutine starting it.
//
// # Untrusted input
//
// Request ids, model names, error text and attribute values come from
// clients. Every string otelomni records is valid UTF-8 (invalid bytes
// replaced: one invalid byte would make an OTLP exporter refuse its whole
// batch) and bounded to 1024 bytes, cut at a UTF-8 boundary and copied (the
// SDK's span limits may cut further on export). The models on the
// histograms are capped ([WithMetricModelLimit]), and so are their
// modalities (those package attrs defines, else "_OTHER"). An incoming
// trace context decides the trace id and, under a parent-based sampler,
// sampling: an engine facing untrusted clients starts a new trace with
// [WithPublicEndpoint].
//
// # Cost
//
// With a no-op tracer provider and no metrics, a request and its phases
// allocate nothing. With the global provider and no SDK installed, the cost
// is the API's own for the request span, and no phase span is started; the
// same when a request is not sampled. Nothing in the package panics into
// or fails the engine it wraps; user span processors never run under
// otelomni's locks. The package reads no environment variable: exemplars,
// limits and exporters are the SDK's, configured where it is set up.
package otelomni
