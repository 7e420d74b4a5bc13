package omnirecord

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/otelomni"
)

// FuzzParse feeds the parser arbitrary lines: it must never panic, and a
// line it accepts must make spans none of which is negative or zero-timed.
// The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(oneLine(good)))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	in := otelomni.New(otelomni.WithTracerProvider(tp))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Parse(line)
		if err != nil {
			return
		}
		if r.ID == "" || r.Arrival.IsZero() || len(r.Stages) == 0 {
			t.Fatalf("accepted a record without id, time or stages: %q", line)
		}
		rec.Reset()
		_ = r.Emit(context.Background(), in, time.Time{})
		for _, s := range rec.Ended() {
			if s.EndTime().Before(s.StartTime()) || s.StartTime().IsZero() {
				t.Fatalf("%s: %v..%v from %q", s.Name(), s.StartTime(), s.EndTime(), line)
			}
		}
	})
}
