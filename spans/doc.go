// Package spans describes what otelomni turns into spans: the catalogue of
// phases ([Phase]), the measured interval of one phase ([Interval]), and the
// timing record of one request at one diffusion stage ([DiffusionRecord]),
// which [DiffusionRecord.Plan] turns into the list of spans to emit, each
// with its explicit start and end.
//
// The package holds the rules, not the tracer: it decides which phases were
// measured, where each one hangs in the tree and whether its interval is
// valid. The otelomni package starts the spans.
//
// # The absence rule
//
// An [Interval] is either measured or not, and its zero value is "not
// measured". A phase that was not measured produces no span; a phase measured
// as 0 ([Between] with equal ends) produces a span whose end equals its
// start. An interval whose end lies before its start, or with a zero
// [time.Time] at either end, is bad input: it produces no span and a
// [*PhaseError] that names the phase, while the other phases are still
// emitted. Phases overlap and nest (queue wait lies inside exec), so nothing
// here ever adds phases together.
package spans
