// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/setupopt"
	"github.com/otelomni/otelomni/otelsetup"
)

type fixedIDs struct{}

func (fixedIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return trace.TraceID{1}, trace.SpanID{2}
}

func (fixedIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return trace.SpanID{3} }

// batches records the size of each batch it is handed.
type batches struct {
	mu    sync.Mutex
	sizes []int
	ids   []trace.SpanContext
}

func (b *batches) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, len(ss))
	for _, s := range ss {
		b.ids = append(b.ids, s.SpanContext())
	}
	return nil
}

func (*batches) Shutdown(context.Context) error { return nil }

// TestSetupTakesTheSettingsOfItsContext: the settings the module's own
// programs give through setupopt on Setup's context each take effect: the
// exporter replaces the environment's, the ids come from the generator, the
// batch processor takes the options, and no metric reader is made.
func TestSetupTakesTheSettingsOfItsContext(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "console")
	exp := &batches{}
	ctx := setupopt.With(context.Background(), setupopt.Options{SpanExporter: exp, IDGenerator: fixedIDs{},
		BatchOptions: []sdktrace.BatchSpanProcessorOption{sdktrace.WithMaxExportBatchSize(2)}, NoMetrics: true})
	tel, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	if got := tel.MetricsExporter(); got != "none" {
		t.Errorf("metrics to %s, want none", got)
	}
	tr := tel.TracerProvider().Tracer("t")
	for range 5 {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	n := 0
	for _, size := range exp.sizes {
		if size > 2 {
			t.Errorf("a batch of %d spans, want at most 2", size)
		}
		n += size
	}
	if n != 5 {
		t.Errorf("the context's exporter got %d spans, want 5", n)
	}
	for _, sc := range exp.ids {
		if sc.TraceID() != (trace.TraceID{1}) || sc.SpanID() != (trace.SpanID{2}) {
			t.Errorf("span %v, want the generator's ids", sc)
		}
	}
}
