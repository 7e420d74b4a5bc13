// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// These tests hand the public API what clients and engines can hand it:
// invalid UTF-8, megabyte strings, times out of range, nil values, and
// measurements that contradict the tree. newRecorded's cleanup checks every
// span exported (valid, bounded, inside its parent, within OTLP's range).

const invalid = "chatcmpl-\xff\xfe-bad"

func TestEveryStringReachingASpanIsValidAndBounded(t *testing.T) {
	for name, s := range map[string]string{
		"invalid UTF-8":         invalid,
		"12 KB of 3-byte runes": strings.Repeat("日", 4000),
		"10 MB":                 strings.Repeat("x", 10<<20),
	} {
		t.Run(name, func(t *testing.T) {
			r := newRecorded(t)
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{
				ID: s, Model: s, Modality: s, Stage: otelomni.StageInfo{Name: s, Type: attrs.StageDiffusion, ReplicaID: s},
				Attributes: []attribute.KeyValue{attribute.String(s, s), attribute.StringSlice("user.list", []string{s, "ok"})},
			})
			exec := req.StartPhase(ctx, spans.Exec, attribute.String("user.note", s))
			exec.SetAttributes(attribute.String(s, s))
			exec.End(errors.New(s))
			_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: s, ReplicaID: s, Model: s, Type: s})
			_ = st.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: 1, Connector: s, Bytes: 10,
				RxDecode: spans.Between(time.Now(), time.Now())})
			st.SetAttributes(attribute.String("late", s))
			st.End(errors.New(s))
			req.End(fmt.Errorf("wrapped: %w", errors.New(s)))
			if n := len(r.rec.Ended()); n < 5 {
				t.Fatalf("%d spans: a bad string must cost no span", n)
			}
			if r.in.Stats().RepairedStrings == 0 {
				t.Error("repairs must be counted")
			}
			// The id is cut, never dropped: what is left is the start of it.
			id, _ := attr(one(t, r.rec.Ended(), spans.RequestSpanName), attrs.RequestIDKey)
			if got := id.AsString(); got == "" || (utf8.ValidString(s) && !strings.HasPrefix(s, got)) {
				t.Errorf("omni.request.id %.40q is not a prefix of the id", got)
			}
		})
	}
}

// sameMemory reports whether a's bytes lie inside b's.
func sameMemory(a, b string) bool {
	pa, pb := uintptr(unsafe.Pointer(unsafe.StringData(a))), uintptr(unsafe.Pointer(unsafe.StringData(b)))
	return pa >= pb && pa < pb+uintptr(len(b))
}

func TestCutStringsDoNotKeepTheirOriginalAlive(t *testing.T) {
	r := newRecorded(t)
	id := strings.Repeat("a", 256<<10)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: id, Model: id})
	req.StartPhase(context.Background(), spans.Exec, attribute.String("user.note", id)).End(nil)
	req.End(errors.New(id))
	for _, s := range r.rec.Ended() {
		for _, kv := range s.Attributes() {
			if v := kv.Value.AsString(); kv.Value.Type() == attribute.STRING && sameMemory(v, id) {
				t.Errorf("%s.%s shares the 256 KiB original's memory, which it keeps alive", s.Name(), kv.Key)
			}
		}
		if sameMemory(s.Status().Description, id) {
			t.Errorf("%s's status shares the original's memory", s.Name())
		}
	}
	if got, _ := attr(one(t, r.rec.Ended(), spans.RequestSpanName), attrs.RequestIDKey); len(got.AsString()) != 1024 {
		t.Errorf("id of %d bytes, want %d", len(got.AsString()), 1024)
	}
}

func TestErrorsAndLogLinesAreBounded(t *testing.T) {
	var logged []string
	var mu sync.Mutex
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		logged = append(logged, err.Error())
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	r := newRecorded(t)
	huge := strings.Repeat("z", 10<<20)
	t0 := time.Now()
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: huge, Start: t0})
	errs := []error{
		req.RecordPhase(spans.Exec, spans.Between(t0, t0.Add(-time.Second)), nil),
		req.RecordPhase(spans.Preprocess, spans.Between(t0.Add(-time.Hour), t0), nil),
		req.EndAt(t0.Add(-time.Hour), errors.New(huge)),
		req.EndAt(time.Now(), nil),
	}
	for i, err := range errs {
		if err == nil {
			t.Fatalf("call %d must fail", i)
		}
		if n := len(err.Error()); n > 4096 {
			t.Errorf("an error of %d bytes: %.80s", n, err.Error())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) == 0 {
		t.Fatal("refusals must be logged")
	}
	for _, l := range logged {
		if len(l) > 4096 || !utf8.ValidString(l) {
			t.Errorf("a log line of %d bytes: %.80s", len(l), l)
		}
	}
}

func TestTimesOutOfRangeAreRefusedEverywhere(t *testing.T) {
	now := time.Now()
	year2 := time.Date(2, 1, 1, 0, 0, 0, 0, time.UTC) // year 1 would be the zero time
	y9999 := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	edge := plan.MaxTime.Add(-time.Second)
	cases := []struct {
		name string
		do   func(req *otelomni.Request) error
		want error
	}{
		{"now plus MaxInt64 nanoseconds", func(req *otelomni.Request) error {
			return req.RecordPhase(spans.Exec, spans.Between(now, now.Add(math.MaxInt64)), nil)
		}, spans.ErrOutOfRange},
		{"now plus MinInt64 nanoseconds", func(req *otelomni.Request) error {
			return req.RecordPhase(spans.Exec, spans.Between(now, now.Add(math.MinInt64)), nil)
		}, spans.ErrOutOfRange},
		{"an interval crossing 2262-04-11", func(req *otelomni.Request) error {
			return req.RecordPhase(spans.Exec, spans.Between(edge, edge.Add(time.Hour)), nil)
		}, spans.ErrOutOfRange},
		{"Between(year 1, year 9999) is not rewritten", func(req *otelomni.Request) error {
			return req.RecordPhase(spans.Exec, spans.Between(year2, y9999), nil)
		}, spans.ErrOutOfRange},
		{"before 1970", func(req *otelomni.Request) error {
			return req.Record(&spans.DiffusionRecord{Exec: spans.Between(time.Unix(-10, 0), time.Unix(-5, 0))})
		}, spans.ErrOutOfRange},
		{"EndAt(year 9999)", func(req *otelomni.Request) error { return req.EndAt(y9999, nil) }, nil},
		{"an LLM phase ending in year 9999", func(req *otelomni.Request) error {
			return req.RecordPhase(spans.LLMQueue, spans.Between(time.Now(), y9999), nil)
		}, spans.ErrOutOfRange},
		{"MarkOutput in year 9999", func(req *otelomni.Request) error {
			return req.MarkOutput(true, y9999)
		}, spans.ErrOutOfRange},
		{"a transfer sent before 1970", func(req *otelomni.Request) error {
			return req.RecordTransfer(spans.TransferRecord{FromStage: 0, Tx: spans.Between(time.Unix(-2, 0), time.Unix(-1, 0))})
		}, spans.ErrOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorded(t)
			_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "t"})
			err := tc.do(req)
			req.End(nil)
			if tc.want == nil && err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if len(byName(r.rec.Ended())[spans.RequestSpanName]) != 1 {
				t.Error("the request span itself must still be exported")
			}
		})
	}
	t.Run("a start out of range starts now", func(t *testing.T) {
		r := newRecorded(t)
		ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "t", Start: y9999})
		_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Start: year2})
		st.End(nil)
		req.End(nil)
		if r.in.Stats().RejectedIntervals != 2 {
			t.Errorf("stats %+v, want both starts counted", r.in.Stats())
		}
	})
}

func TestNilAndMisuseNeverPanic(t *testing.T) {
	var nilIn *otelomni.Instrumenter
	var nilMap propagation.MapCarrier
	var nilHeader http.Header
	r := newRecorded(t, otelomni.WithPropagators(propagation.TraceContext{}))
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "m"})
	calls := map[string]func(){
		"nil instrumenter Start": func() {
			c, q := nilIn.Start(ctx, otelomni.RequestInfo{ID: "x"})
			q.StartPhase(c, spans.Exec).End(nil)
			q.End(nil)
		},
		"nil instrumenter StartStage":   func() { _, s := nilIn.StartStage(ctx, otelomni.StageInfo{}); s.End(nil) },
		"nil instrumenter Inject":       func() { nilIn.Inject(ctx, propagation.MapCarrier{}) },
		"nil instrumenter Extract":      func() { _ = nilIn.Extract(ctx, propagation.MapCarrier{}) },
		"nil instrumenter Stats":        func() { _ = nilIn.Stats() },
		"Inject into a nil MapCarrier":  func() { r.in.Inject(ctx, nilMap) },
		"Inject into a nil http.Header": func() { r.in.Inject(ctx, propagation.HeaderCarrier(nilHeader)) },
		"nil request": func() {
			var q *otelomni.Request
			q.StartPhase(ctx, spans.Exec).End(nil)
			_ = q.Record(&spans.DiffusionRecord{})
			_ = q.MarkOutput(true, time.Now())
			q.End(nil)
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("panic: %v", v)
				}
			}()
			call()
		})
	}
	req.End(nil)
	if r.in.Stats().Misuse < 2 {
		t.Errorf("misuse %d: the nil carriers must be counted", r.in.Stats().Misuse)
	}
}

func TestNilPointersGivenAsProvidersOrHandlersAreTakenAsNone(t *testing.T) {
	r := newRecorded(t)
	cases := map[string]func(t *testing.T){
		"WithTracerProvider(nil *sdktrace.TracerProvider)": func(t *testing.T) {
			in := otelomni.New(otelomni.WithTracerProvider((*sdktrace.TracerProvider)(nil)))
			_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "x"})
			req.End(nil)
		},
		"WithMeterProvider(nil *sdkmetric.MeterProvider)": func(t *testing.T) {
			in := otelomni.New(otelomni.WithTracerProvider(r.tp), otelomni.WithMeterProvider((*sdkmetric.MeterProvider)(nil)))
			_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "x"})
			req.End(nil)
		},
		"WithPropagators(nil *propagation.TraceContext)": func(t *testing.T) {
			before := otel.GetTextMapPropagator()
			t.Cleanup(func() { otel.SetTextMapPropagator(before) })
			otel.SetTextMapPropagator(propagation.TraceContext{})
			in := otelomni.New(otelomni.WithTracerProvider(r.tp), otelomni.WithPropagators((*propagation.TraceContext)(nil)))
			ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "x"})
			c := propagation.MapCarrier{}
			in.Inject(ctx, c)
			if c["traceparent"] == "" {
				t.Error("a nil pointer for a propagator must leave the global one, which carries the trace")
			}
			req.End(nil)
			if in.Stats().Misuse != 0 {
				t.Error("the default propagator must not panic")
			}
		},
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("panic: %v", v)
				}
			}()
			call(t)
		})
	}
}

func TestPhaseContextIsNeverNil(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "request")
	unsampled := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))))
	cases := map[string]*otelomni.Instrumenter{
		"sampled":   newRecorded(t).in,
		"unsampled": unsampled,
		"off":       otelomni.New(otelomni.WithTracerProvider(noopTP())),
		"nil":       nil,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, req := in.Start(parent, otelomni.RequestInfo{ID: "c"})
			ph := req.StartPhase(ctx, spans.Exec)
			pctx := ph.Context()
			if pctx == nil || pctx.Value(key{}) != "request" {
				t.Fatalf("phase context %v lost the request's", pctx)
			}
			bounded, cancel := context.WithTimeout(pctx, time.Hour)
			cancel()
			if bounded.Err() == nil {
				t.Error("a context bounded on the phase's must work")
			}
			ph.End(nil)
			req.End(nil)
		})
	}
	if (otelomni.ActivePhase{}).Context() == nil {
		t.Error("the zero ActivePhase's context is nil")
	}
}

func TestTreeConflictsGetTheirDocumentedResult(t *testing.T) {
	cases := []struct {
		name string
		do   func(ctx context.Context, req *otelomni.Request, t0 time.Time) error
		want error
		// phase, count: how many spans of phase must be exported.
		phase spans.Phase
		count int
		// counted: the outcome must show in Stats.
		counted bool
	}{
		{"a second live exec is refused", func(ctx context.Context, req *otelomni.Request, _ time.Time) error {
			req.StartPhase(ctx, spans.Exec).End(nil)
			req.StartPhase(ctx, spans.Exec).End(nil)
			return nil
		}, nil, spans.Exec, 1, true},
		{"a recorded exec after a live one is refused", func(ctx context.Context, req *otelomni.Request, t0 time.Time) error {
			req.StartPhase(ctx, spans.Exec).End(nil)
			return req.RecordPhase(spans.Exec, spans.Between(t0, time.Now()), nil)
		}, spans.ErrDuplicatePhase, spans.Exec, 1, true},
		{"a second record's phases are refused", func(ctx context.Context, req *otelomni.Request, t0 time.Time) error {
			rec := &spans.DiffusionRecord{Exec: spans.Between(t0, t0.Add(time.Millisecond))}
			if err := req.Record(rec); err != nil {
				return err
			}
			return req.Record(rec)
		}, spans.ErrDuplicatePhase, spans.Exec, 1, true},
		{"a phase that starts before its request is refused", func(ctx context.Context, req *otelomni.Request, t0 time.Time) error {
			return req.RecordPhase(spans.QueueWait, spans.Between(t0.Add(-time.Second), t0), nil)
		}, spans.ErrOutsideParent, spans.QueueWait, 0, true},
		{"a recorded part of exec outside exec is refused", func(ctx context.Context, req *otelomni.Request, t0 time.Time) error {
			return req.Record(&spans.DiffusionRecord{
				Exec:    spans.Between(t0, t0.Add(time.Second)),
				Forward: spans.Between(t0.Add(500*time.Millisecond), t0.Add(2*time.Second)),
			})
		}, spans.ErrOutsideParent, spans.Forward, 0, true},
		{"parts of exec far longer than exec are refused, whatever their sum", func(ctx context.Context, req *otelomni.Request, t0 time.Time) error {
			long := time.Duration(math.MaxInt64 / 4)
			return req.Record(&spans.DiffusionRecord{
				Exec:   spans.Between(t0, t0.Add(time.Second)),
				KVRecv: spans.Between(t0, t0.Add(long)), Forward: spans.Between(t0, t0.Add(long)), VAEDecode: spans.Between(t0, t0.Add(long)),
			})
		}, spans.ErrOutsideParent, spans.Forward, 0, true},
		{"a live forward under an exec a record closed is refused", func(ctx context.Context, req *otelomni.Request, t0 time.Time) error {
			if err := req.RecordPhase(spans.Exec, spans.Between(t0, t0), nil); err != nil {
				return err
			}
			req.StartPhase(ctx, spans.Forward).End(nil)
			return nil
		}, nil, spans.Forward, 0, true},
		{"a live forward after its exec ended is refused", func(ctx context.Context, req *otelomni.Request, _ time.Time) error {
			e := req.StartPhase(ctx, spans.Exec)
			e.End(nil)
			req.StartPhase(e.Context(), spans.Forward).End(nil)
			req.StartPhase(ctx, spans.Forward).End(nil)
			return nil
		}, nil, spans.Forward, 0, true},
		{"End before a recorded phase's end ends at that end", func(ctx context.Context, req *otelomni.Request, _ time.Time) error {
			now := time.Now()
			return req.RecordPhase(spans.Postprocess, spans.Between(now, now.Add(time.Hour)), nil)
		}, nil, spans.Postprocess, 1, true},
		{"ending exec ends a forward still open inside it", func(ctx context.Context, req *otelomni.Request, _ time.Time) error {
			e := req.StartPhase(ctx, spans.Exec)
			f := req.StartPhase(e.Context(), spans.Forward)
			e.End(nil)
			f.End(nil) // already ended with its exec: does nothing
			return nil
		}, nil, spans.Forward, 1, false},
		{"a recorded part inside a live exec that ends later stretches it", func(ctx context.Context, req *otelomni.Request, _ time.Time) error {
			e := req.StartPhase(ctx, spans.Exec)
			now := time.Now()
			err := req.RecordPhase(spans.VAEDecode, spans.Between(now, now.Add(time.Hour)), nil)
			e.End(nil)
			return err
		}, nil, spans.VAEDecode, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorded(t)
			t0 := time.Now()
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "tree", Start: t0})
			err := tc.do(ctx, req, t0)
			req.End(nil)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if got := len(byName(r.rec.Ended())[tc.phase.SpanName()]); got != tc.count {
				t.Errorf("%d %v spans, want %d", got, tc.phase, tc.count)
			}
			st := r.in.Stats()
			if tc.counted && st.Conflicts+st.ClampedEnds+st.RejectedIntervals == 0 {
				t.Errorf("nothing counted: %+v", st)
			}
		})
	}
}

// OOMError is an engine's own error type, as a caller would define it.
type OOMError struct{}

func (*OOMError) Error() string { return "out of accelerator memory" }

type typedError struct{}

func (typedError) Error() string     { return "typed" }
func (typedError) ErrorType() string { return "engine.overload" }

func TestErrorTypeFollowsTheConvention(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dit: %w", &OOMError{}), "*otelomni_test.OOMError"},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", &OOMError{})), "*otelomni_test.OOMError"},
		{fmt.Errorf("queue: %w", typedError{}), "engine.overload"},
		{fmt.Errorf("gateway: %w", otelomni.ErrClientAbort), attrs.ErrorClientAbort},
		{context.DeadlineExceeded, attrs.ErrorTimeout},
		{fmt.Errorf("x: %w", context.Canceled), attrs.ErrorClientDisconnect},
		{errors.New("plain"), "_OTHER"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			r := newRecorded(t)
			_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "e"})
			req.End(tc.err)
			s := one(t, r.rec.Ended(), spans.RequestSpanName)
			if v, _ := attr(s, semconv.ErrorTypeKey); v.AsString() != tc.want {
				t.Errorf("error.type %q, want %q", v.AsString(), tc.want)
			}
		})
	}
}

func TestFailedRequestMakesTheSameSpansOnBothPaths(t *testing.T) {
	oom := fmt.Errorf("dit: %w", &OOMError{})
	type result struct {
		code    codes.Code
		errType string
	}
	run := func(t *testing.T, live bool) result {
		r := newRecorded(t)
		t0 := time.Now()
		ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "f", Start: t0})
		if live {
			req.StartPhase(ctx, spans.Exec).End(oom)
		} else if err := req.Record(&spans.DiffusionRecord{Exec: spans.Between(t0, time.Now()), Err: oom}); err != nil {
			t.Fatal(err)
		}
		req.End(oom)
		e := one(t, r.rec.Ended(), spans.Exec.SpanName())
		v, _ := attr(e, semconv.ErrorTypeKey)
		return result{e.Status().Code, v.AsString()}
	}
	live, record := run(t, true), run(t, false)
	if live != record || live.code != codes.Error || live.errType != "*otelomni_test.OOMError" {
		t.Errorf("live exec %+v, recorded exec %+v: both want status Error and the error's type", live, record)
	}
}

func TestMetricModelsAreBoundedAndCapped(t *testing.T) {
	for _, limit := range []int{0, 3} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			in := otelomni.New(otelomni.WithMeterProvider(mp), otelomni.WithTracerProvider(noopTP()),
				otelomni.WithMetricModelLimit(limit))
			want := limit
			if limit == 0 {
				want = 64
			}
			for i := 0; i < want+10; i++ {
				model := fmt.Sprintf("model-%d-%s", i, strings.Repeat("m", 1<<20))
				_, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: model})
				req.StartPhase(context.Background(), spans.Exec).End(nil)
				req.End(nil)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			models := map[string]bool{}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					h, ok := m.Data.(metricdata.Histogram[float64])
					if !ok || m.Name != "omni.phase.duration" {
						continue
					}
					for _, dp := range h.DataPoints {
						v, _ := dp.Attributes.Value(semconv.GenAIRequestModelKey)
						if len(v.AsString()) > 1024 {
							t.Fatalf("a model of %d bytes reached a metric", len(v.AsString()))
						}
						models[v.AsString()] = true
					}
				}
			}
			if len(models) != want+1 || !models["_OTHER"] {
				t.Errorf("%d models on the phase histogram, want %d and _OTHER", len(models), want)
			}
			if got := in.Stats().OtherModels; got != 10 {
				t.Errorf("OtherModels %d, want 10", got)
			}
		})
	}
}

// seenBySampler records the attributes a sampler was shown at each span's
// start.
type seenBySampler struct {
	mu   sync.Mutex
	seen map[string][]attribute.KeyValue
}

func (s *seenBySampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	s.seen[p.Name] = append([]attribute.KeyValue(nil), p.Attributes...)
	s.mu.Unlock()
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *seenBySampler) Description() string { return "seenBySampler" }

func TestSamplerSeesIdentifyingAttributesAtStart(t *testing.T) {
	s := &seenBySampler{seen: map[string][]attribute.KeyValue{}}
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(s))))
	ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "chatcmpl-1", Model: "Qwen/Qwen-Image", Modality: attrs.ModalityImage})
	_, st := in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "dit", Type: attrs.StageDiffusion})
	req.StartPhase(ctx, spans.Exec).End(nil)
	st.End(nil)
	req.End(nil)
	want := map[string]map[attribute.Key]string{
		spans.RequestSpanName: {attrs.RequestIDKey: "chatcmpl-1", semconv.GenAIRequestModelKey: "Qwen/Qwen-Image", attrs.OutputModalityKey: "image"},
		spans.StageSpanName:   {attrs.StageNameKey: "dit", attrs.StageTypeKey: "diffusion"},
		spans.Exec.SpanName(): {attrs.PhaseKey: "exec"},
	}
	for name, kvs := range want {
		got := map[attribute.Key]string{}
		for _, kv := range s.seen[name] {
			got[kv.Key] = kv.Value.String()
		}
		for k, v := range kvs {
			if got[k] != v {
				t.Errorf("the sampler saw %s=%q on %s, want %q", k, got[k], name, v)
			}
		}
	}
}

func TestPublicEndpointStartsANewTraceLinkedToTheClients(t *testing.T) {
	// A client's traceparent, sampled, against a sampler that keeps
	// nothing on its own.
	client := propagation.MapCarrier{"traceparent": "00-5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174-01"}
	for _, public := range []bool{false, true} {
		t.Run(fmt.Sprintf("public=%v", public), func(t *testing.T) {
			r := newRecorded(t)
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.rec),
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))))
			opts := []otelomni.Option{otelomni.WithTracerProvider(tp), w3c}
			if public {
				opts = append(opts, otelomni.WithPublicEndpoint(nil))
			}
			in := otelomni.New(opts...)
			ctx := in.Extract(context.Background(), client)
			_, req := in.Start(ctx, otelomni.RequestInfo{ID: "p"})
			req.End(nil)
			got := byName(r.rec.Ended())[spans.RequestSpanName]
			if !public {
				// Documented: the client's sampled flag decides.
				if len(got) != 1 || got[0].SpanContext().TraceID().String() != "5b8efff798038103d269b633813fc60c" {
					t.Fatalf("without the option the client's context decides: %d spans", len(got))
				}
				return
			}
			if len(got) != 0 {
				t.Fatalf("with the option a client's sampled flag must not force recording under a ratio of 0: %d spans", len(got))
			}
		})
	}
	t.Run("public, sampled by our own sampler: a new trace linked to the client's", func(t *testing.T) {
		r := newRecorded(t)
		in := otelomni.New(otelomni.WithTracerProvider(r.tp), otelomni.WithPublicEndpoint(nil), w3c)
		_, req := in.Start(in.Extract(context.Background(), client), otelomni.RequestInfo{ID: "p"})
		req.End(nil)
		s := one(t, r.rec.Ended(), spans.RequestSpanName)
		if s.SpanContext().TraceID().String() == "5b8efff798038103d269b633813fc60c" || s.Parent().IsValid() {
			t.Error("the request span must start a new trace")
		}
		if len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID().String() != "eee19b7ec3c1b174" {
			t.Errorf("links %v, want one to the client's span", s.Links())
		}
	})
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
		{"opt-in, default length", []otelomni.Option{otelomni.WithContentCapture(0)}, truncate(prompt, 256)},
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

// reentrant is a span processor that calls back into the request whose
// spans it sees, as a user's processor may: under one of otelomni's locks
// it would deadlock.
type reentrant struct {
	req   atomic.Pointer[otelomni.Request]
	calls atomic.Int64
}

func (p *reentrant) OnStart(context.Context, sdktrace.ReadWriteSpan) { p.call() }
func (p *reentrant) OnEnd(sdktrace.ReadOnlySpan)                     { p.call() }
func (p *reentrant) Shutdown(context.Context) error                  { return nil }
func (p *reentrant) ForceFlush(context.Context) error                { return nil }

func (p *reentrant) call() {
	if r := p.req.Load(); r != nil {
		p.calls.Add(1)
		r.SetStepsRun(1) // takes the request's lock
	}
}

func TestSpanProcessorsNeverRunUnderOtelomnisLocks(t *testing.T) {
	p := &reentrant{}
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t0 := time.Now()
		ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Start: t0})
		p.req.Store(req)
		exec := req.StartPhase(ctx, spans.Exec)
		_ = req.RecordPhase(spans.QueueWait, spans.Between(t0, time.Now()), nil)
		req.StartPhase(exec.Context(), spans.Forward).End(nil)
		exec.End(nil)
		_ = req.RecordPhase(spans.LLMQueue, spans.Between(t0, time.Now()), nil)
		_ = req.MarkOutput(true, time.Now())
		b := in.StartBatch(ctx, otelomni.BatchInfo{ID: "b"}, req)
		b.End(nil)
		req.End(nil)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("a span processor calling back into its request deadlocked: it ran under otelomni's lock")
	}
	if p.calls.Load() < 8 {
		t.Errorf("the processor was called %d times: the test saw too little", p.calls.Load())
	}
}

// panicky is a span processor that panics when the span named name starts.
type panicky struct{ name string }

func (p panicky) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == p.name {
		panic("a user's span processor failed")
	}
}
func (panicky) OnEnd(sdktrace.ReadOnlySpan)      {}
func (panicky) Shutdown(context.Context) error   { return nil }
func (panicky) ForceFlush(context.Context) error { return nil }

func TestAPanickingSpanProcessorNeverHangsEnd(t *testing.T) {
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(panicky{name: spans.Preprocess.SpanName()}),
		sdktrace.WithSpanProcessor(panicky{name: spans.Forward.SpanName()}),
		sdktrace.WithSpanProcessor(panicky{name: plan.EngineWarmupSpanName}))))
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "p"})
		exec := req.StartPhase(ctx, spans.Exec)
		for _, p := range []spans.Phase{spans.Preprocess, spans.Forward} {
			func() {
				defer func() { _ = recover() }() // the processor's panic is the caller's to see
				req.StartPhase(ctx, p)
			}()
		}
		exec.End(nil)
		req.End(nil)
		e := in.StartEngine(ctx, otelomni.EngineInfo{})
		func() {
			defer func() { _ = recover() }()
			e.StartWarmup()
		}()
		e.End(nil)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("End waited forever for a start whose span processor panicked")
	}
}

// yielding is a span processor that, when a kv_recv span starts, holds the
// start until its exec has ended on another goroutine, or, when exec's end
// rightly waits for the part, for a while.
type yielding struct {
	started, execEnded chan struct{}
}

func (y *yielding) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == spans.KVRecv.SpanName() {
		close(y.started)
		select {
		case <-y.execEnded:
		case <-time.After(100 * time.Millisecond): // exec's end waits for this start: go on
		}
	}
}

func (y *yielding) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() == spans.Exec.SpanName() {
		close(y.execEnded)
	}
}
func (*yielding) Shutdown(context.Context) error   { return nil }
func (*yielding) ForceFlush(context.Context) error { return nil }

func TestAPartStartingWhileItsExecEndsEndsWithIt(t *testing.T) {
	y := &yielding{started: make(chan struct{}), execEnded: make(chan struct{})}
	r := newRecorded(t)
	r.tp.RegisterSpanProcessor(y)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "race"})
	exec := req.StartPhase(ctx, spans.Exec)
	part := make(chan otelomni.ActivePhase)
	go func() { part <- req.StartPhase(exec.Context(), spans.KVRecv) }()
	<-y.started
	ended := make(chan struct{})
	go func() { exec.End(nil); close(ended) }() // races the part's start
	p := <-part
	<-ended
	p.End(nil) // ended with its exec already, or now: never after exec
	req.End(nil)
	// newRecorded's cleanup checks that kv_recv lies inside exec.
	if n := len(byName(r.rec.Ended())[spans.KVRecv.SpanName()]); n != 1 {
		t.Errorf("%d kv_recv spans, want 1", n)
	}
}

func TestPerOutputPhasesAndStepsAreMeasuredOnceEach(t *testing.T) {
	r := newRecorded(t, otelomni.WithDenoiseSteps(true))
	t0 := time.Now()
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "o", Start: t0})
	iv := spans.Between(t0, t0.Add(time.Millisecond))
	if err := req.RecordPhase(spans.Postprocess, iv, nil, attrs.OutputIndexKey.Int(0)); err != nil {
		t.Fatal(err)
	}
	if err := req.RecordPhase(spans.Postprocess, iv, nil, attrs.OutputIndexKey.Int(0)); !errors.Is(err, spans.ErrDuplicatePhase) {
		t.Errorf("output 0's postprocess twice: %v", err)
	}
	req.StartPhase(ctx, spans.Postprocess, attrs.OutputIndexKey.Int(0)).End(nil) // refused
	req.StartPhase(ctx, spans.Postprocess, attrs.OutputIndexKey.Int(1)).End(nil) // another output: kept
	f := req.StartPhase(ctx, spans.Forward)
	req.StartPhase(f.Context(), spans.DenoiseStep, attrs.StepKey.Int(0)).End(nil)
	req.StartPhase(f.Context(), spans.DenoiseStep, attrs.StepKey.Int(0)).End(nil) // refused
	f.End(nil)
	if err := req.MarkOutput(true, time.Now()); err != nil {
		t.Fatal(err)
	}
	req.End(nil)
	got := byName(r.rec.Ended())
	if n := len(got[spans.Postprocess.SpanName()]); n != 2 {
		t.Errorf("%d postprocess spans, want 2 (outputs 0 and 1)", n)
	}
	if n := len(got[spans.DenoiseStep.SpanName()]); n != 1 {
		t.Errorf("%d step spans, want 1", n)
	}
	if n := len(got[plan.OutputSpanName]); n != 1 {
		t.Errorf("%d omni.output spans, want 1", n)
	}
	if c := r.in.Stats().Conflicts; c != 3 {
		t.Errorf("%d conflicts counted, want 3", c)
	}
}

func TestEngineAndBatchEndsNeverPrecedeTheirStartsOrChildren(t *testing.T) {
	r := newRecorded(t)
	t0 := time.Now()
	b := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b", Start: t0})
	if err := b.EndAt(t0.Add(-time.Minute), nil); err == nil {
		t.Error("a batch ended before its start must say so")
	}
	e := r.in.StartEngine(context.Background(), otelomni.EngineInfo{})
	load := e.StartLoad(otelomni.LoadInfo{Model: "m"})
	e.End(nil)    // ends the open load first
	load.End(nil) // does nothing more
	spansByName := byName(r.rec.Ended())
	if n := len(spansByName[plan.EngineLoadSpanName]); n != 1 {
		t.Errorf("%d load spans, want 1: a step open at the engine's end ends with it", n)
	}
	// newRecorded's cleanup checks no negative span and every child inside
	// its parent.
}
