// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package spans describes what otelomni turns into spans: the catalogue of
// phases ([Phase]), the measured interval of one phase ([Interval]), the
// timing records an engine that timed itself hands over
// ([DiffusionRecord], [TransferRecord]), the header a sending stage puts in
// its stage message ([TransferHeader]), and the errors of a measurement
// that makes no span ([PhaseError]).
//
// The package holds data, not the tracer: the otelomni package checks each
// measurement against the span tree and starts the spans.
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
