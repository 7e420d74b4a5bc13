// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package emit places the phases of a request on the timeline (in the
// documented phase order, from the times the input gives and an anchor
// for those it lacks) and makes its spans as OpenTelemetry Collector data
// (pdata's ptrace): the spans otelomni's record path makes through the
// SDK for the same request, with ids derived from the request, so that an
// import of the same input makes the same spans.
package emit
