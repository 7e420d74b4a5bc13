package omnirecord

import (
	"bytes"
	"context"
	"os"
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

// FuzzInput feeds arbitrary text, as a log, a summary and JSON lines, to
// an input: it must never panic, and every request it hands on must make
// spans within what OTLP carries, none ending before it starts.
func FuzzInput(f *testing.F) {
	for _, name := range []string{"vllm.log", "events.log", "summary.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
		f.Add(b, uint8(0x80))
	}
	f.Add([]byte("INFO 01-01 00:00:00 [a.py:1] {'type': 'transfer_stats', 'request_id': (\n 'x' 'y'), 'from_stage': 0, 'to_stage': 1, 'tx_time_ms': 1e308}\n"), uint8(3))
	rec := tracetest.NewSpanRecorder()
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	f.Fuzz(func(t *testing.T, data []byte, form uint8) {
		h := &fuzzHandler{t: t, in: in, rec: rec}
		input, err := NewInput(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), Options{Format: Formats[int(form)%len(Formats)], Settle: 2, MaxPending: 4}, h)
		if err != nil {
			t.Fatal(err)
		}
		if form&0x80 != 0 {
			// A summary of more than MaxPending requests is then read
			// again, in parts.
			input.ReadAgain(bytes.NewReader(data))
		}
		var off int64
		for _, line := range bytes.Split(data, []byte("\n")) {
			input.Line(line, off)
			off += int64(len(line)) + 1
		}
		input.End()
	})
}

type fuzzHandler struct {
	t   *testing.T
	in  *otelomni.Instrumenter
	rec *tracetest.SpanRecorder
}

func (h *fuzzHandler) Problem(int, error) {}

func (h *fuzzHandler) Request(r *Request, anchor time.Time) {
	h.rec.Reset()
	if err := r.Emit(context.Background(), h.in, anchor); err != nil {
		return
	}
	for _, s := range h.rec.Ended() {
		if s.EndTime().Before(s.StartTime()) || s.StartTime().Before(minTime) || s.EndTime().After(maxTime) {
			h.t.Fatalf("%s: %v..%v", s.Name(), s.StartTime(), s.EndTime())
		}
	}
}
