package otelomni_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// TestEveryBadInputGetsItsDocumentedResult drives each bad input the public
// API can receive through an instrumenter set up as Setup sets it up
// (attribute values bounded), and checks that it gets its documented
// result, never panics, never exports a negative span, and never exports a
// value longer than the limit.
func TestEveryBadInputGetsItsDocumentedResult(t *testing.T) {
	huge := strings.Repeat("x", 10<<20)
	now := time.Now()
	cases := []struct {
		name string
		do   func(in *otelomni.Instrumenter) error
		// want is the error the call must return (nil: none).
		want error
		// spans is how many spans of the phase under test must exist.
		phase spans.Phase
		spans int
	}{
		{"end before start", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			return r.RecordPhase(spans.Exec, spans.Between(now, now.Add(-time.Second)))
		}, spans.ErrEndBeforeStart, spans.Exec, 0},
		{"zero start", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			return r.RecordPhase(spans.Exec, spans.Between(time.Time{}, now))
		}, spans.ErrZeroTime, spans.Exec, 0},
		{"zero end in a record", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			return r.Record(&spans.DiffusionRecord{Exec: spans.Between(now, time.Time{})})
		}, spans.ErrZeroTime, spans.Exec, 0},
		{"times far in the future are accepted: order is checked, not the calendar", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			far := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
			return r.RecordPhase(spans.Exec, spans.Between(far, far.Add(time.Second)))
		}, nil, spans.Exec, 1},
		{"NaN duration (as float-to-int conversion makes it)", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			nan := math.NaN()
			return r.RecordPhase(spans.Exec, spans.Lasting(now, time.Duration(int64(nan))))
		}, spans.ErrEndBeforeStart, spans.Exec, -1},
		{"infinite duration, saturated", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			return r.RecordPhase(spans.Exec, spans.Lasting(now, math.MaxInt64))
		}, nil, spans.Exec, 1},
		{"negative infinite duration", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			return r.RecordPhase(spans.Exec, spans.Lasting(now, math.MinInt64))
		}, spans.ErrEndBeforeStart, spans.Exec, 0},
		{"empty request id is kept as empty", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{})
			id, _ := r.Span().(interface{ Attributes() []attribute.KeyValue })
			r.End(nil)
			for _, kv := range id.Attributes() {
				if kv.Key == attrs.RequestIDKey && kv.Value.AsString() == "" {
					return nil
				}
			}
			return errors.New("no empty omni.request.id")
		}, nil, 0, 0},
		{"10 MB request id is truncated to the limit", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: huge, Model: huge})
			r.StartPhase(spans.Exec, attribute.String("user.note", huge)).End()
			r.SetAttributes(attribute.String("late", huge))
			r.End(errors.New(huge))
			return nil
		}, nil, spans.Exec, 1},
		{"nil context", func(in *otelomni.Instrumenter) error {
			//lint:ignore SA1012 a nil context is the input under test
			_, r := in.Start(nil, otelomni.RequestInfo{ID: "a"}) //nolint:staticcheck
			//lint:ignore SA1012 a nil context is the input under test
			err := r.Run(nil, spans.Exec, func(ctx context.Context) error { //nolint:staticcheck
				if ctx == nil {
					return errors.New("fn got a nil context")
				}
				return nil
			})
			//lint:ignore SA1012 a nil context is the input under test
			in.Inject(nil, &otelomni.Carrier{}) //nolint:staticcheck
			//lint:ignore SA1012 a nil context is the input under test
			_ = in.Extract(nil, &otelomni.Carrier{}) //nolint:staticcheck
			//lint:ignore SA1012 a nil context is the input under test
			_, st := in.StartStage(nil, otelomni.StageInfo{}) //nolint:staticcheck
			st.End(nil)
			r.End(nil)
			return err
		}, nil, spans.Exec, 1},
		{"phases on an ended request make nothing", func(in *otelomni.Instrumenter) error {
			ctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			r.End(nil)
			r.StartPhase(spans.Exec).End()
			_ = r.Run(ctx, spans.Exec, func(context.Context) error { return nil })
			_ = r.MarkLLM(otelomni.LLMQueued)
			r.EmitOutput(true)
			return r.RecordPhase(spans.Exec, spans.Between(now, now))
		}, otelomni.ErrRequestEnded, spans.Exec, 0},
		{"invalid phases", func(in *otelomni.Instrumenter) error {
			_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			defer r.End(nil)
			r.StartPhase(spans.Phase(99)).End()
			r.StartPhase(spans.TransferTx).End()
			return r.RecordPhase(spans.Phase(0), spans.Between(now, now))
		}, otelomni.ErrInvalidPhase, spans.TransferTx, 0},
		{"calls from many goroutines on one request", func(in *otelomni.Instrumenter) error {
			ctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
			var wg sync.WaitGroup
			for i := 0; i < 32; i++ {
				wg.Go(func() {
					r.StartPhase(spans.Postprocess, attrs.OutputIndex(i), attrs.OutputFinal(i == 31)).End()
					_ = r.RecordPhase(spans.OutputReadyWait, spans.Between(now, now.Add(time.Millisecond)), attrs.OutputIndex(i))
					_ = r.Run(ctx, spans.Forward, func(context.Context) error { return nil })
					if i == 20 {
						r.End(nil) // racing the others: they must not panic
					}
				})
			}
			wg.Wait()
			return nil
		}, nil, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			in := otelomni.New(otelomni.WithTracerProvider(tp), otelomni.WithTracerProvider(nil),
				otelomni.WithMeterProvider(nil), otelomni.WithPropagators(nil), nil)
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("panic: %v", v)
					}
				}()
				err = tc.do(in)
			}()
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			_ = tp.ForceFlush(context.Background())
			got := 0
			for _, s := range exp.GetSpans() {
				if s.EndTime.Before(s.StartTime) {
					t.Errorf("%s exported with a negative duration", s.Name)
				}
				if s.Name == tc.phase.SpanName() {
					got++
				}
				check := func(kv attribute.KeyValue) {
					if kv.Value.Type() == attribute.STRING && len(kv.Value.AsString()) > 4096 {
						t.Errorf("%s.%s is %d bytes, over the %d limit", s.Name, kv.Key, len(kv.Value.AsString()), 4096)
					}
				}
				for _, kv := range s.Attributes {
					check(kv)
				}
				if len(s.Status.Description) > 4096 {
					t.Errorf("%s: status description is %d bytes, over the limit", s.Name, len(s.Status.Description))
				}
			}
			if tc.spans >= 0 && tc.phase.Valid() && got != tc.spans {
				t.Errorf("%d %v spans, want %d", got, tc.phase, tc.spans)
			}
		})
	}
}

func TestRequestContentIsNeverRecordedUnlessOptedIn(t *testing.T) {
	prompt := "a photograph of my passport, number X1234567, " + strings.Repeat("é", 400)
	cases := []struct {
		name string
		opts []otelomni.Option
		want string
	}{
		{"default: never", nil, ""},
		{"opt-in, 64 bytes", []otelomni.Option{otelomni.WithContentCapture(64)}, truncate(prompt, 64)},
		{"opt-in, default length", []otelomni.Option{otelomni.WithContentCapture(0)}, truncate(prompt, otelomni.DefaultContentCaptureBytes)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorded(t, tc.opts...)
			_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "p", Prompt: prompt})
			req.End(nil)
			s := one(t, r.rec.Ended(), spans.RequestSpanName)
			v, ok := attr(s, attrs.PromptKey)
			if tc.want == "" {
				if ok {
					t.Fatalf("the prompt was recorded without opt-in: %q", v.AsString())
				}
				for _, kv := range s.Attributes() {
					if strings.Contains(kv.Value.String(), "passport") {
						t.Fatalf("%s carries request content", kv.Key)
					}
				}
				return
			}
			if v.AsString() != tc.want || !utf8.ValidString(v.AsString()) {
				t.Errorf("prompt %q (%d bytes), want %q", v.AsString(), len(v.AsString()), tc.want)
			}
		})
	}
}

func truncate(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:min(n, len(s))]
}
