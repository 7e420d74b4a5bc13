// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

func TestExporterShowsEachRequestOnceItsTraceIsComplete(t *testing.T) {
	var out bytes.Buffer
	view := NewExporter(&out)
	// Batches as a batch processor makes them: phases before their request.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	in := otelomni.New(otelomni.WithTracerProvider(tp))
	t0 := time.Now()
	for _, id := range []string{"a", "b"} {
		_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: id, Start: t0})
		_ = req.RecordPhase(spans.Exec, spans.Between(t0, t0.Add(time.Millisecond)), nil)
		_ = req.EndAt(t0.Add(2*time.Millisecond), nil)
	}
	ended := rec.Ended()
	if err := view.ExportSpans(context.Background(), ended[:1]); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("a waterfall before its request ended:\n%s", out.String())
	}
	if err := view.ExportSpans(context.Background(), ended[1:]); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "omni.request "); n != 2 {
		t.Errorf("%d waterfalls, want 2:\n%s", n, out.String())
	}
	if got := view.Summary().Requests(); got != 2 {
		t.Errorf("summary of %d requests, want 2", got)
	}
}

func TestWaterfallOfThousandsOfOutputsStaysShortAndAStageIsShown(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	t0 := time.Now()
	// A stage in its own process: its span is the local root.
	_, st := in.StartStage(context.Background(), otelomni.StageInfo{ID: 2, Name: "code2wav", Start: t0})
	for i := 0; i < 5000; i++ {
		_ = st.RecordPhase(spans.Postprocess, spans.Between(t0.Add(time.Duration(i)*time.Microsecond), t0.Add(time.Duration(i+1)*time.Microsecond)), nil,
			attrs.OutputIndexKey.Int(i), attrs.OutputFinalKey.Bool(i == 4999))
	}
	st.End(nil)
	var out bytes.Buffer
	Waterfall(&out, FromSDK(rec.Ended()))
	lines := strings.Count(out.String(), "\n")
	if lines > 60 || !strings.Contains(out.String(), "omni.stage code2wav") || !strings.Contains(out.String(), "more outputs not shown") {
		t.Errorf("%d lines:\n%.2000s", lines, out.String())
	}
}
