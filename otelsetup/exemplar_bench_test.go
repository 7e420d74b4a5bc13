// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// BenchmarkExemplars runs a request of five phases with metrics on, with
// the SDK's exemplars and with the kept ones, in one run.
func BenchmarkExemplars(b *testing.B) {
	for _, mode := range []string{"sdk", "kept"} {
		b.Run(mode, func(b *testing.B) {
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
					b.Setenv(k, "")
				}
			}
			(tierRules{image: 20000, video: 300000, audio: 15000, other: 10000, queue: 2000, percent: 10, salt: "s"}).env(b)
			b.Setenv(envExemplars, mode)
			bed := newExemplarBed(b)
			phases := []spans.Phase{spans.QueueWait, spans.Preprocess, spans.Exec, spans.OutputReadyWait, spans.Postprocess}
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				_, r := bed.in.Start(ctx, otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: start,
					Stage: otelomni.StageInfo{Type: "diffusion"}})
				for j, p := range phases {
					_ = r.RecordPhase(p, spans.Lasting(start.Add(time.Duration(j)*time.Millisecond), time.Millisecond), nil)
				}
				_ = r.EndAt(start.Add(10*time.Millisecond), nil)
				if i%512 == 0 {
					bed.exemplars(b)
					bed.exp.Reset()
				}
			}
		})
	}
}
