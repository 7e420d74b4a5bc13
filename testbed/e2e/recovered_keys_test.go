// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import "go.opentelemetry.io/otel/attribute"

// What a span the crash journal recovered carries, as the wire contract
// writes it: omni.recovered = true, and error.type = process_died on one
// that was still open when its process died.
const (
	recoveredKey = attribute.Key("omni.recovered")
	processDied  = "process_died"
)
