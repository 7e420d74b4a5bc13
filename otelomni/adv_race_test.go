// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// The adversary's races: goroutines released together (together, from
// race_test.go) make the calls that start, record and end the parts of one
// tree, round after round, and each round's output is checked beside
// assertNoNegativeSpan's invariants (every child inside its parent, every
// batch link both ways): every span otelomni started is ended exactly
// once, and every measurement of a phase, request or stage is its span's
// duration to the nanosecond, under that span, one per span.

// advRaceRounds is the number of rounds of each case: 100 000 between
// them.
const advRaceRounds = 100_000 / 9

// endCounter wraps a tracer provider and counts, per span, the calls to
// End: a span started and never ended, or ended twice, shows here (the
// SDK ignores a second End, so its processors cannot see one).
type endCounter struct {
	embedded.TracerProvider
	tp trace.TracerProvider

	mu      sync.Mutex
	started map[trace.SpanID]string
	ends    map[trace.SpanID]int
}

func newEndCounter(tp trace.TracerProvider) *endCounter {
	return &endCounter{tp: tp, started: map[trace.SpanID]string{}, ends: map[trace.SpanID]int{}}
}

func (c *endCounter) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &countedTracer{Tracer: c.tp.Tracer(name, opts...), c: c}
}

// take returns the spans started and the ends counted since the last take.
func (c *endCounter) take() (map[trace.SpanID]string, map[trace.SpanID]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, e := c.started, c.ends
	c.started, c.ends = map[trace.SpanID]string{}, map[trace.SpanID]int{}
	return s, e
}

type countedTracer struct {
	trace.Tracer
	c *endCounter
}

func (t *countedTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, s := t.Tracer.Start(ctx, name, opts...)
	if !s.IsRecording() {
		return ctx, s
	}
	t.c.mu.Lock()
	t.c.started[s.SpanContext().SpanID()] = name
	t.c.mu.Unlock()
	w := &countedSpan{Span: s, c: t.c}
	return trace.ContextWithSpan(ctx, w), w
}

type countedSpan struct {
	trace.Span
	c *endCounter
}

func (s *countedSpan) End(opts ...trace.SpanEndOption) {
	s.c.mu.Lock()
	s.c.ends[s.SpanContext().SpanID()]++
	s.c.mu.Unlock()
	s.Span.End(opts...)
}

// samples is a meter provider whose float histograms keep each
// measurement with the span its context holds.
type samples struct {
	metricnoop.MeterProvider

	mu  sync.Mutex
	got map[string]map[trace.SpanID][]float64
}

func newSamples() *samples { return &samples{got: map[string]map[trace.SpanID][]float64{}} }

func (s *samples) Meter(string, ...metric.MeterOption) metric.Meter { return sampleMeter{s: s} }

func (s *samples) take() map[string]map[trace.SpanID][]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.got
	s.got = map[string]map[trace.SpanID][]float64{}
	return g
}

type sampleMeter struct {
	metricnoop.Meter
	s *samples
}

func (m sampleMeter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return sampleHistogram{name: name, s: m.s}, nil
}

type sampleHistogram struct {
	metricnoop.Float64Histogram
	name string
	s    *samples
}

func (sampleHistogram) Enabled(context.Context) bool { return true }

func (h sampleHistogram) Record(ctx context.Context, v float64, _ ...metric.RecordOption) {
	id := trace.SpanContextFromContext(ctx).SpanID()
	h.s.mu.Lock()
	if h.s.got[h.name] == nil {
		h.s.got[h.name] = map[trace.SpanID][]float64{}
	}
	h.s.got[h.name][id] = append(h.s.got[h.name][id], v)
	h.s.mu.Unlock()
}

// checkRound checks one round's spans, ends and measurements.
func checkRound(ss []sdktrace.ReadOnlySpan, started map[trace.SpanID]string, ends map[trace.SpanID]int,
	got map[string]map[trace.SpanID][]float64) (int, error) {
	for id, name := range started {
		if n := ends[id]; n != 1 {
			return 0, fmt.Errorf("%s was ended %d times", name, n)
		}
	}
	want := map[string]map[trace.SpanID]float64{}
	for _, s := range ss {
		var inst string
		switch _, phase := attr(s, attrs.PhaseKey); {
		case phase:
			inst = "omni.phase.duration"
		case s.Name() == spans.RequestSpanName:
			inst = "gen_ai.server.request.duration"
		case s.Name() == spans.StageSpanName:
			inst = "omni.stage.duration"
		default:
			continue
		}
		if want[inst] == nil {
			want[inst] = map[trace.SpanID]float64{}
		}
		want[inst][s.SpanContext().SpanID()] = s.EndTime().Sub(s.StartTime()).Seconds()
	}
	checked := 0
	for inst, bySpan := range want {
		checked += len(bySpan)
		for id, d := range bySpan {
			if v := got[inst][id]; len(v) != 1 || v[0] != d {
				return 0, fmt.Errorf("%s of span %s: measured %v, the span lasts %v s", inst, started[id], v, d)
			}
		}
		for id, v := range got[inst] {
			if _, ok := bySpan[id]; !ok {
				return 0, fmt.Errorf("%s measured %v under span %s (%q), which was not exported", inst, v, id, started[id])
			}
		}
	}
	return checked, nil
}

// advCase is one kind of round.
type advCase struct {
	name string
	run  func(in *otelomni.Instrumenter)
}

var advCases = []advCase{
	{"forward starting vs exec.End vs Request.EndAt later", func(in *otelomni.Instrumenter) {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r1"})
		exec := req.StartPhase(ctx, spans.Exec)
		together(func() { req.StartPhase(exec.Context(), spans.Forward).End(nil) }, func() { exec.End(nil) },
			func() { _ = req.EndAt(time.Now().Add(time.Millisecond), nil) })
	}},
	{"a step recorded in an open forward vs exec.End vs forward.End", func(in *otelomni.Instrumenter) {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r2"})
		exec := req.StartPhase(ctx, spans.Exec)
		fwd := req.StartPhase(exec.Context(), spans.Forward)
		now := time.Now()
		together(func() {
			_ = req.RecordPhase(spans.DenoiseStep, spans.Between(now, now.Add(time.Millisecond)), nil, attrs.StepKey.Int(0))
		}, func() { exec.End(nil) }, func() { fwd.End(nil) })
		req.End(nil)
	}},
	{"a local stage starting later vs its request's End", func(in *otelomni.Instrumenter) {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r3"})
		later := time.Now().Add(time.Millisecond)
		together(func() {
			sctx, st := in.StartStage(ctx, otelomni.StageInfo{ID: 1, Type: attrs.StageLLM, Start: later})
			_ = st.RecordPhase(spans.LLMQueue, spans.Between(later, later), nil)
			st.StartPhase(sctx, spans.LLMDecode).End(nil)
			st.End(nil)
		}, func() {
			req.StartPhase(ctx, spans.Preprocess).End(nil)
			runtime.Gosched()
			req.End(nil)
		})
	}},
	{"a part recorded vs its exec starting vs Request.End", func(in *otelomni.Instrumenter) {
		t0 := time.Now()
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r4", Start: t0})
		together(func() {
			exec := req.StartPhase(ctx, spans.Exec)
			req.StartPhase(exec.Context(), spans.VAEDecode).End(nil)
			exec.End(nil)
		}, func() {
			_ = req.RecordPhase(spans.KVRecv, spans.Between(t0, time.Now()), nil)
			_ = req.Record(&spans.DiffusionRecord{Forward: spans.Between(t0, time.Now())})
		}, func() {
			runtime.Gosched()
			req.End(nil)
		})
	}},
	{"StartBatch of a local stage vs the stage's End vs Request.End vs exec.End", func(in *otelomni.Instrumenter) {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r5"})
		sctx, st := in.StartStage(ctx, otelomni.StageInfo{ID: 2, Type: attrs.StageDiffusion})
		exec := st.StartPhase(sctx, spans.Exec)
		together(func() { in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req, st).End(nil) }, func() { st.End(nil) },
			func() { req.End(nil) }, func() { exec.End(nil) })
	}},
	{"Batch.Record of two members vs Batch.End vs their Ends", func(in *otelomni.Instrumenter) {
		t0 := time.Now()
		_, a := in.Start(bg, otelomni.RequestInfo{ID: "a", Start: t0})
		_, c := in.Start(bg, otelomni.RequestInfo{ID: "c", Start: t0})
		b := in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, a, c)
		rec := &spans.DiffusionRecord{Exec: spans.Between(t0, time.Now()), Forward: spans.Between(t0, time.Now())}
		together(func() { _ = b.Record(a, rec) }, func() { _ = b.Record(c, rec) }, func() { b.End(nil) },
			func() { a.End(nil) }, func() { c.End(nil) })
	}},
	{"a stage's StartStage and End vs phases vs Request.EndAt vs Request.End", func(in *otelomni.Instrumenter) {
		t0 := time.Now()
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r7", Start: t0})
		exec := req.StartPhase(ctx, spans.Exec)
		together(func() {
			sctx, st := in.StartStage(ctx, otelomni.StageInfo{ID: 1, Type: attrs.StageLLM})
			p := st.StartPhase(sctx, spans.LLMPrefill)
			_ = st.MarkOutput(false, time.Now())
			p.End(nil)
			_ = st.EndAt(time.Now(), nil)
		}, func() {
			f := req.StartPhase(exec.Context(), spans.Forward)
			req.StartPhase(f.Context(), spans.DenoiseStep, attrs.StepKey.Int(0)).End(nil)
			f.End(errors.New("x"))
		}, func() {
			_ = req.RecordPhase(spans.Postprocess, spans.Between(t0, time.Now()), nil, attrs.OutputIndexKey.Int(0))
			exec.End(nil)
		}, func() { _ = req.EndAt(time.Now(), nil) }, func() { req.End(nil) })
	}},
	{"an exec starting vs StartBatch vs Batch.End vs Request.End", func(in *otelomni.Instrumenter) {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r8"})
		together(func() {
			exec := req.StartPhase(ctx, spans.Exec)
			req.StartPhase(exec.Context(), spans.KVRecv).End(nil)
			exec.End(nil)
		}, func() { in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req).End(nil) }, func() {
			runtime.Gosched()
			req.End(nil)
		})
	}},
	{"Engine.End vs steps starting and ending", func(in *otelomni.Instrumenter) {
		e := in.StartEngine(bg, otelomni.EngineInfo{Model: "m"})
		together(func() { e.StartLoad(otelomni.LoadInfo{Model: "m"}).End(nil) }, func() { e.StartWarmup().End(nil) },
			func() { e.End(nil) })
	}},
}

// yieldOnStart is a span processor that yields in OnStart, between
// otelomni's reading of a span's start and its registration as started:
// it widens the window in which a span is still starting (handed off when
// its parent ends), as a costly processor would, without a sleep.
type yieldOnStart struct{}

func (yieldOnStart) OnStart(context.Context, sdktrace.ReadWriteSpan) { runtime.Gosched() }
func (yieldOnStart) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (yieldOnStart) Shutdown(context.Context) error                  { return nil }
func (yieldOnStart) ForceFlush(context.Context) error                { return nil }

func TestAdvRacesKeepTreesEndsAndMeasurements(t *testing.T) {
	rounds := advRaceRounds
	if testing.Short() {
		rounds /= 20
	}
	goroutines := runtime.NumGoroutine()
	rec := &lightRecorder{}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(yieldOnStart{}), sdktrace.WithSpanProcessor(rec),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeCountLimit: 128, EventCountLimit: 128, LinkCountLimit: 1024,
			AttributePerEventCountLimit: 128, AttributePerLinkCountLimit: 128, AttributeValueLengthLimit: -1}))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	ends := newEndCounter(sdk)
	ms := newSamples()
	in := otelomni.New(otelomni.WithTracerProvider(ends), otelomni.WithMeterProvider(ms), otelomni.WithDenoiseSteps(true))
	for _, c := range advCases {
		t.Run(c.name, func(t *testing.T) {
			broken, first, checked := 0, "", 0
			for round := range rounds {
				within := make(chan struct{})
				go func() {
					defer close(within)
					c.run(in)
				}()
				select {
				case <-within:
				case <-time.After(time.Minute):
					t.Fatalf("round %d deadlocked", round)
				}
				ss := rec.take()
				started, ended := ends.take()
				f := &firstError{TB: t}
				assertNoNegativeSpan(f, ss)
				if f.first == "" {
					n, err := checkRound(ss, started, ended, ms.take())
					if err != nil {
						f.first = err.Error()
					}
					checked += n
				} else {
					ms.take()
				}
				if f.first != "" {
					if broken++; first == "" {
						first = fmt.Sprintf("round %d: %s (spans %v)", round, f.first, names(ss))
					}
				}
			}
			if checked == 0 && c.name != "Engine.End vs steps starting and ending" {
				t.Error("no measurement was checked")
			}
			t.Logf("%d rounds, %d measurements checked against their spans", rounds, checked)
			if broken > 0 {
				t.Errorf("%d of %d rounds broke an invariant; the first, %s", broken, rounds, first)
			}
		})
	}
	// Every goroutine a round started has ended: none waits forever.
	for i := 0; runtime.NumGoroutine() > goroutines && i < 1000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines left running after the rounds, %d before", n, goroutines)
	}
}
