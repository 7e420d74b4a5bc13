// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"testing"
	"time"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// The zero value of every exported type compiles (var b otelomni.Batch,
// new(otelomni.Engine)): each method on it must do nothing, as on the zero
// Request and ActivePhase, never panic into the engine.
func TestAdvZeroValuesNeverPanic(t *testing.T) {
	try := func(name string, f func()) {
		defer func() {
			if v := recover(); v != nil {
				t.Errorf("%s panicked: %v", name, v)
			}
		}()
		f()
	}
	rec := &spans.DiffusionRecord{Exec: spans.Between(time.Now(), time.Now())}
	try("zero Batch End", func() { var b otelomni.Batch; b.End(nil) })
	try("zero Batch EndAt", func() { var b otelomni.Batch; _ = b.EndAt(time.Now(), nil) })
	try("zero Batch Record", func() {
		var b otelomni.Batch
		_, r := otelomni.New().Start(context.Background(), otelomni.RequestInfo{})
		_ = b.Record(r, rec)
	})
	try("zero Batch SpanContext", func() { var b otelomni.Batch; _ = b.SpanContext() })
	try("zero Engine StartLoad", func() { var e otelomni.Engine; e.StartLoad(otelomni.LoadInfo{}).End(nil) })
	try("zero Engine End", func() { var e otelomni.Engine; e.End(nil) })
	try("zero Engine Context", func() { var e otelomni.Engine; _ = e.Context() })
	try("zero Request", func() {
		var r otelomni.Request
		exec := r.StartPhase(context.Background(), spans.Exec)
		r.StartPhase(exec.Context(), spans.KVRecv).End(nil)
		exec.End(nil)
		r.End(nil)
		_ = r.EndAt(time.Time{}, nil)
		_ = r.Record(rec)
		_ = r.MarkOutput(true, time.Now())
		r.SetUsage(-1, -1)
		r.SetStepsRun(-1)
	})
	try("zero Instrumenter", func() {
		var in otelomni.Instrumenter
		_, r := in.Start(context.Background(), otelomni.RequestInfo{})
		r.End(nil)
		in.StartBatch(context.Background(), otelomni.BatchInfo{}).End(nil)
		in.StartEngine(context.Background(), otelomni.EngineInfo{}).End(nil)
	})
}
