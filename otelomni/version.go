// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

// Version is the version of otelomni, reported as the instrumentation
// scope's version on every span.
const Version = "0.1.0"
