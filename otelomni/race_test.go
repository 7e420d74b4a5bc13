// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// These tests race the calls that end something (a request, a stage, a
// batch, an exec, an engine's start) against the calls that add to it, on
// goroutines released together, and check every round's spans: each
// exported child lies inside its parent, each link between a batch and a
// member has its reverse, and what a call returned matches what was
// exported. An invariant that held only for some interleavings fails here
// within the rounds; none of these tests reads a clock to decide.

// raceRounds is the number of rounds the race tests run between them.
const raceRounds = 100_000

// lightRecorder keeps the spans ended since its last take: the race tests
// check each round's spans and keep none, so that 100 000 rounds stay
// cheap.
type lightRecorder struct {
	mu    sync.Mutex
	ended []sdktrace.ReadOnlySpan
}

func (l *lightRecorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (l *lightRecorder) OnEnd(s sdktrace.ReadOnlySpan) {
	l.mu.Lock()
	l.ended = append(l.ended, s)
	l.mu.Unlock()
}
func (l *lightRecorder) Shutdown(context.Context) error   { return nil }
func (l *lightRecorder) ForceFlush(context.Context) error { return nil }

func (l *lightRecorder) take() []sdktrace.ReadOnlySpan {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.ended
	l.ended = make([]sdktrace.ReadOnlySpan, 0, len(s))
	return s
}

// together runs fns on goroutines of their own, releases them at once
// when all are ready, and waits for them all.
func together(fns ...func()) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn()
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// raceCase is one kind of round: run makes its calls and returns what the
// round's spans must show beside the common invariants.
type raceCase struct {
	name string
	run  func(in *otelomni.Instrumenter, log *slog.Logger) func(ss []sdktrace.ReadOnlySpan) error
}

var bg = context.Background()

// count returns the number of spans named name.
func count(ss []sdktrace.ReadOnlySpan, name string) int {
	n := 0
	for _, s := range ss {
		if s.Name() == name {
			n++
		}
	}
	return n
}

func exactly(ss []sdktrace.ReadOnlySpan, name string, want int) error {
	if n := count(ss, name); n != want {
		return fmt.Errorf("%d %s spans, want %d", n, name, want)
	}
	return nil
}

var raceCases = []raceCase{
	{"Batch.Record vs Batch.End", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		t0 := time.Now()
		_, req := in.Start(bg, otelomni.RequestInfo{ID: "m", Start: t0})
		b := in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req)
		rec := &spans.DiffusionRecord{Exec: spans.Between(t0, time.Now())}
		var err error
		together(func() { err = b.Record(req, rec) }, func() { b.End(nil) })
		req.End(nil)
		return func(ss []sdktrace.ReadOnlySpan) error {
			switch {
			case err == nil:
				return exactly(ss, spans.Exec.SpanName(), 1)
			case errors.Is(err, otelomni.ErrRequestEnded):
				// Refused: the batch had ended. Nothing recorded.
				return exactly(ss, spans.Exec.SpanName(), 0)
			}
			return fmt.Errorf("Record: %v", err)
		}
	}},
	{"Batch.Record vs Batch.End vs the member's Request.End", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		t0 := time.Now()
		_, req := in.Start(bg, otelomni.RequestInfo{ID: "m", Start: t0})
		b := in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req)
		rec := &spans.DiffusionRecord{Exec: spans.Between(t0, time.Now())}
		together(func() { _ = b.Record(req, rec) }, func() { b.End(nil) }, func() { req.End(nil) })
		return nil
	}},
	{"exec's start vs a forward's start", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "m"})
		var exec, fwd otelomni.ActivePhase
		together(func() { exec = req.StartPhase(ctx, spans.Exec) }, func() { fwd = req.StartPhase(ctx, spans.Forward) })
		fwd.End(nil)
		exec.End(nil)
		req.End(nil)
		return func(ss []sdktrace.ReadOnlySpan) error {
			// Under exec when its span had started, under the request when
			// exec was not yet measured, or refused while exec started.
			if err := exactly(ss, spans.Exec.SpanName(), 1); err != nil {
				return err
			}
			for _, s := range ss {
				if s.Name() != spans.Forward.SpanName() {
					continue
				}
				if p := parentName(ss, s); p != spans.Exec.SpanName() && p != spans.RequestSpanName {
					return fmt.Errorf("forward hangs under %q", p)
				}
				if id := trace.SpanContextFromContext(fwd.Context()).SpanID(); id != s.SpanContext().SpanID() {
					return errors.New("forward made a span but its Context holds another")
				}
				return nil
			}
			if id := trace.SpanContextFromContext(fwd.Context()).SpanID(); id != trace.SpanContextFromContext(ctx).SpanID() {
				return errors.New("forward made no span but its Context holds a span other than the request's")
			}
			return nil
		}
	}},
	{"StartBatch vs exec.End", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "m"})
		exec := req.StartPhase(ctx, spans.Exec)
		var b *otelomni.Batch
		together(func() { b = in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req) }, func() { exec.End(nil) })
		b.End(nil)
		req.End(nil)
		return func(ss []sdktrace.ReadOnlySpan) error {
			// Its exec if it was open, its request otherwise.
			for _, s := range ss {
				if s.Name() == plan.BatchSpanName && len(s.Links()) != 1 {
					return fmt.Errorf("the batch has %d links, want 1", len(s.Links()))
				}
			}
			return exactly(ss, plan.BatchSpanName, 1)
		}
	}},
	{"StartBatch vs Request.End", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "m"})
		req.StartPhase(ctx, spans.Exec)
		var b *otelomni.Batch
		together(func() { b = in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req) }, func() { req.End(nil) })
		b.End(nil)
		return nil
	}},
	{"Batch.End vs a pending member's Request.End", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		_, req := in.Start(bg, otelomni.RequestInfo{ID: "m"})
		b := in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req)
		together(func() { b.End(nil) }, func() { req.End(nil) })
		return nil
	}},
	{"two StartBatch with one open exec", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "m"})
		exec := req.StartPhase(ctx, spans.Exec)
		var b1, b2 *otelomni.Batch
		together(func() { b1 = in.StartBatch(bg, otelomni.BatchInfo{ID: "b1"}, req) },
			func() { b2 = in.StartBatch(bg, otelomni.BatchInfo{ID: "b2"}, req) })
		exec.End(nil)
		b1.End(nil)
		b2.End(nil)
		req.End(nil)
		return nil
	}},
	{"Batch.Record on two batches for one exec", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		t0 := time.Now()
		_, req := in.Start(bg, otelomni.RequestInfo{ID: "m", Start: t0})
		b1 := in.StartBatch(bg, otelomni.BatchInfo{ID: "b1"}, req)
		b2 := in.StartBatch(bg, otelomni.BatchInfo{ID: "b2"}, req)
		rec := &spans.DiffusionRecord{Exec: spans.Between(t0, time.Now())}
		var err1, err2 error
		together(func() { err1 = b1.Record(req, rec) }, func() { err2 = b2.Record(req, rec) })
		b1.End(nil)
		b2.End(nil)
		req.End(nil)
		return func(ss []sdktrace.ReadOnlySpan) error {
			if (err1 == nil) == (err2 == nil) || !errors.Is(errors.Join(err1, err2), spans.ErrDuplicatePhase) {
				return fmt.Errorf("one Record must win and the other be refused as a duplicate: %v, %v", err1, err2)
			}
			return exactly(ss, spans.Exec.SpanName(), 1)
		}
	}},
	{"Batch.End vs Batch.EndAt vs Batch.End", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "m"})
		exec := req.StartPhase(ctx, spans.Exec)
		b := in.StartBatch(bg, otelomni.BatchInfo{ID: "b"}, req)
		var err error
		together(func() { b.End(nil) }, func() { err = b.EndAt(time.Now(), nil) }, func() { b.End(errors.New("x")) }, func() { exec.End(nil) })
		req.End(nil)
		return func(ss []sdktrace.ReadOnlySpan) error {
			if err != nil && !errors.Is(err, otelomni.ErrRequestEnded) {
				return fmt.Errorf("EndAt: %v", err)
			}
			return exactly(ss, plan.BatchSpanName, 1)
		}
	}},
	{"Request.End vs phases, steps, outputs, records, logs", func(in *otelomni.Instrumenter, log *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		t0 := time.Now()
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r", Start: t0})
		exec := req.StartPhase(ctx, spans.Exec)
		fwd := req.StartPhase(exec.Context(), spans.Forward)
		racePhases(req, ctx, t0, log, func() { req.End(nil) }, exec, fwd)
		return func(ss []sdktrace.ReadOnlySpan) error { return exactly(ss, spans.RequestSpanName, 1) }
	}},
	{"stage End vs its phases", func(in *otelomni.Instrumenter, log *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r"})
		t0 := time.Now()
		sctx, st := in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "dit", Start: t0})
		exec := st.StartPhase(sctx, spans.Exec)
		fwd := st.StartPhase(exec.Context(), spans.Forward)
		racePhases(st, sctx, t0, log, func() { st.End(nil) }, exec, fwd)
		req.End(nil)
		return func(ss []sdktrace.ReadOnlySpan) error { return exactly(ss, spans.StageSpanName, 1) }
	}},
	{"Request.EndAt vs End vs phase ends", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		t0 := time.Now()
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r", Start: t0})
		exec := req.StartPhase(ctx, spans.Exec)
		pre := req.StartPhase(ctx, spans.Preprocess)
		// An end given before the phases end: the request must end no
		// earlier than the phases that ended before it.
		mid := time.Now()
		together(func() { req.End(nil) }, func() { _ = req.EndAt(mid, nil) }, func() { exec.End(nil) }, func() { pre.End(nil) })
		return func(ss []sdktrace.ReadOnlySpan) error { return exactly(ss, spans.RequestSpanName, 1) }
	}},
	{"a part recorded vs its live exec's end", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r"})
		exec := req.StartPhase(ctx, spans.Exec)
		now := time.Now()
		// A part that ends later than now: inside an open exec it
		// stretches it; once exec has ended it is refused.
		together(func() { exec.End(nil) }, func() { _ = req.RecordPhase(spans.VAEDecode, spans.Between(now, now.Add(time.Hour)), nil) },
			func() { _ = req.RecordPhase(spans.KVRecv, spans.Between(now, time.Now()), nil) })
		req.End(nil)
		return nil
	}},
	{"Request.End vs a stage of this process starting, recording and ending", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r"})
		var ended error
		together(func() { req.End(nil) }, func() {
			sctx, st := in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "dit", Type: attrs.StageDiffusion})
			exec := st.StartPhase(sctx, spans.Exec)
			st.StartPhase(exec.Context(), spans.Forward).End(nil)
			_ = st.RecordPhase(spans.QueueWait, spans.Between(time.Now(), time.Now()), nil)
			exec.End(nil)
			ended = st.EndAt(time.Now(), nil)
		})
		return func(ss []sdktrace.ReadOnlySpan) error {
			if ended != nil && !errors.Is(ended, otelomni.ErrRequestEnded) {
				return fmt.Errorf("the stage's EndAt: %v", ended)
			}
			return exactly(ss, spans.RequestSpanName, 1)
		}
	}},
	{"exec.End vs the End of a part already ending", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		ctx, req := in.Start(bg, otelomni.RequestInfo{ID: "r"})
		exec := req.StartPhase(ctx, spans.Exec)
		fwd := req.StartPhase(exec.Context(), spans.Forward)
		step := req.StartPhase(fwd.Context(), spans.DenoiseStep, attrs.StepKey.Int(0))
		together(func() { exec.End(nil) }, func() { fwd.End(nil) }, func() { step.End(nil) }, func() { req.StartPhase(exec.Context(), spans.VAEDecode).End(nil) })
		req.End(nil)
		return func(ss []sdktrace.ReadOnlySpan) error {
			return errors.Join(exactly(ss, spans.Forward.SpanName(), 1), exactly(ss, spans.DenoiseStep.SpanName(), 1))
		}
	}},
	{"Engine.End vs its steps", func(in *otelomni.Instrumenter, _ *slog.Logger) func([]sdktrace.ReadOnlySpan) error {
		t0 := time.Now()
		e := in.StartEngine(bg, otelomni.EngineInfo{Model: "m", Start: t0})
		load := e.StartLoad(otelomni.LoadInfo{Model: "m"})
		together(func() { e.End(nil) }, func() { load.End(nil) }, func() { e.StartWarmup().End(nil) },
			func() { e.StartStageInit(otelomni.StageInfo{ID: 1}).End(nil) })
		return func(ss []sdktrace.ReadOnlySpan) error { return exactly(ss, plan.EngineStartSpanName, 1) }
	}},
}

// racePhases races end against six goroutines that start, end and record
// phases, steps, outputs, LLM events and logs on req (a request or a
// stage) whose exec and forward are open.
func racePhases(req *otelomni.Request, ctx context.Context, t0 time.Time, log *slog.Logger, end func(), exec, fwd otelomni.ActivePhase) {
	together(end,
		func() {
			p := req.StartPhase(ctx, spans.Preprocess)
			log.InfoContext(p.Context(), "preprocess")
			p.End(nil)
		},
		func() {
			req.StartPhase(fwd.Context(), spans.DenoiseStep, attrs.StepKey.Int(0)).End(nil)
			fwd.End(nil)
			req.StartPhase(exec.Context(), spans.VAEDecode).End(nil)
			exec.End(nil)
		},
		func() {
			_ = req.MarkOutput(false, time.Now())
			_ = req.MarkOutput(false, time.Now())
			_ = req.MarkOutput(true, time.Now())
		},
		func() {
			o := req.StartPhase(ctx, spans.OutputReadyWait, attrs.OutputIndexKey.Int(0))
			log.InfoContext(o.Context(), "waiting")
			o.End(nil)
			p := req.StartPhase(ctx, spans.Postprocess)
			log.InfoContext(p.Context(), "postprocess")
			p.End(nil)
		},
		func() {
			_ = req.RecordPhase(spans.QueueWait, spans.Between(t0, time.Now()), nil)
			_ = req.Record(&spans.DiffusionRecord{KVRecv: spans.Between(time.Now(), time.Now())})
		},
		func() {
			_ = req.RecordPhase(spans.LLMQueue, spans.Between(t0, time.Now()), nil)
			req.SetStepsRun(1)
			log.WarnContext(ctx, "late")
		},
	)
}

// firstError is a testing.TB that keeps the first error it is told,
// so that a broken invariant is counted per round, not printed each time.
type firstError struct {
	testing.TB
	first string
}

func (f *firstError) Helper() {}
func (f *firstError) Errorf(format string, args ...any) {
	if f.first == "" {
		f.first = fmt.Sprintf(format, args...)
	}
}

func TestRacesOfEndsKeepTheTreeAndTheLinks(t *testing.T) {
	rec := &lightRecorder{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	in := otelomni.New(otelomni.WithTracerProvider(tp), otelomni.WithDenoiseSteps(true))
	log := slog.New(slog.DiscardHandler)
	broken, rounds := make([]int, len(raceCases)), make([]int, len(raceCases))
	first := make([]string, len(raceCases))
	for round := range raceRounds {
		i := round % len(raceCases)
		rounds[i]++
		check := raceCases[i].run(in, log)
		ss := rec.take()
		f := &firstError{TB: t}
		assertNoNegativeSpan(f, ss)
		if f.first == "" && check != nil {
			if err := check(ss); err != nil {
				f.first = err.Error()
			}
		}
		if f.first != "" {
			if broken[i]++; first[i] == "" {
				first[i] = fmt.Sprintf("round %d: %s (spans %v)", round, f.first, names(ss))
			}
		}
	}
	for i, c := range raceCases {
		if broken[i] > 0 {
			t.Errorf("%s: %d of %d rounds broke an invariant; the first, %s", c.name, broken[i], rounds[i], first[i])
		}
	}
}
