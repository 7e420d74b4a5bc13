// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"testing"

	"github.com/otelomni/otelomni/otelomni"
)

// BenchmarkExemplars is the live path of a request with its five phases
// and metrics on, its exemplars chosen for the traces the collector tier
// keeps (kept, the default) beside the SDK's own choice (sampled: every
// measurement under a sampled span offered, nothing decided), in one run.
func BenchmarkExemplars(b *testing.B) {
	for _, mode := range []string{"sampled", "kept"} {
		b.Run(mode, func(b *testing.B) {
			b.Setenv("OTELOMNI_EXEMPLARS", mode)
			in := otelomni.New(otelomni.WithTracerProvider(benchProvider(b)), otelomni.WithMeterProvider(benchMeterProvider(b)))
			b.ReportAllocs()
			for b.Loop() {
				otelomniRequest(in)
			}
		})
	}
}
