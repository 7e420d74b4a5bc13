// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// hook is a span processor that runs onStart and onEnd, when set, for the
// spans named name: a user's processor calling back into otelomni.
type hook struct {
	name           string
	onStart, onEnd func()
}

func (h *hook) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == h.name && h.onStart != nil {
		h.onStart()
	}
}

func (h *hook) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() == h.name && h.onEnd != nil {
		h.onEnd()
	}
}
func (*hook) Shutdown(context.Context) error   { return nil }
func (*hook) ForceFlush(context.Context) error { return nil }

// A span processor that panics in OnEnd of one open phase, when the
// request's end ends it: the panic is the caller's to see, but the request
// span, the other open phases and the stages ending with it must still
// end (and be exported); otelomni marked them all ended and nothing can
// end them later.
func TestAdvAPanicInOnEndOfAnOpenPhaseLeavesTheRequestEnded(t *testing.T) {
	r := newRecorded(t)
	r.tp.RegisterSpanProcessor(&hook{name: spans.Preprocess.SpanName(), onEnd: func() { panic("a user's span processor failed") }})
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "f"})
	req.StartPhase(ctx, spans.Exec)
	req.StartPhase(ctx, spans.Preprocess) // ended (first, the latest started) by the request's end
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "s", Type: attrs.StageOther})
	_ = st
	func() {
		defer func() { _ = recover() }()
		req.End(nil)
	}()
	req.End(nil) // does nothing more: the request is marked ended
	got := byName(r.rec.Ended())
	for _, name := range []string{spans.RequestSpanName, spans.Exec.SpanName(), spans.StageSpanName} {
		if len(got[name]) != 1 {
			t.Errorf("%s: %d spans exported, want 1: a processor's panic on another span left it never ended (spans: %v)",
				name, len(got[name]), names(r.rec.Ended()))
		}
	}
}

// A span processor that ends the request from OnStart of exec (a
// reentrant call, on the goroutine starting exec): exec is handed off and
// ended at the request's end. A part started from that exec afterwards
// is refused as a part of any ended exec is, and counted once, as on a
// request ended the ordinary way.
func TestAdvAPartOfAHandedOffPhaseIsCountedLikeAnyOther(t *testing.T) {
	counted := func(reentrant bool) uint64 {
		r := newRecorded(t)
		ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "k"})
		if reentrant {
			r.tp.RegisterSpanProcessor(&hook{name: spans.Exec.SpanName(), onStart: func() { req.End(nil) }})
		}
		var exec otelomni.ActivePhase
		within(t, "Request.End from exec's OnStart", func() { exec = req.StartPhase(ctx, spans.Exec) })
		if !reentrant {
			req.End(nil)
		}
		before := r.in.Stats()
		req.StartPhase(exec.Context(), spans.KVRecv).End(nil)
		after := r.in.Stats()
		return after.Misuse + after.Conflicts - before.Misuse - before.Conflicts
	}
	plain, handedOff := counted(false), counted(true)
	if plain != 1 {
		t.Fatalf("a part of an exec ended with its request: %d refusals counted, want 1", plain)
	}
	if handedOff != plain {
		t.Errorf("a part of an exec handed off to its starter: %d refusals counted, want %d as for any ended exec", handedOff, plain)
	}
}

// Processors that call back into the same request, batch and engine from
// OnStart and OnEnd of every span otelomni makes: nothing deadlocks.
func TestAdvReentrantProcessorsNeverDeadlock(t *testing.T) {
	r := newRecorded(t, otelomni.WithDenoiseSteps(true))
	var (
		mu  sync.Mutex
		req *otelomni.Request
		b   *otelomni.Batch
	)
	var inside atomic.Bool // a callback's own spans call back no further
	call := func() {
		if !inside.CompareAndSwap(false, true) {
			return
		}
		defer inside.Store(false)
		mu.Lock()
		q, bb := req, b
		mu.Unlock()
		if q == nil {
			return
		}
		q.SetStepsRun(2)
		q.SetUsage(1, 1)
		q.SetAttributes(attrs.PhaseKey.String("x"))
		_ = q.RecordPhase(spans.LLMQueue, spans.Between(time.Now(), time.Now()), nil)
		_ = q.MarkOutput(false, time.Now())
		if bb != nil {
			_ = bb.SpanContext()
		}
		_ = r.in.Stats()
	}
	for _, name := range []string{spans.RequestSpanName, spans.StageSpanName, plan.BatchSpanName, spans.Exec.SpanName(),
		spans.Forward.SpanName(), spans.DenoiseStep.SpanName(), spans.KVRecv.SpanName(), plan.OutputSpanName,
		spans.LLMQueue.SpanName(), spans.Postprocess.SpanName()} {
		r.tp.RegisterSpanProcessor(&hook{name: name, onStart: call, onEnd: call})
	}
	within(t, "a request whose processors call back into it", func() {
		t0 := time.Now()
		ctx, q := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "re", Start: t0})
		mu.Lock()
		req = q
		mu.Unlock()
		exec := q.StartPhase(ctx, spans.Exec)
		bb := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b"}, q)
		mu.Lock()
		b = bb
		mu.Unlock()
		fwd := q.StartPhase(exec.Context(), spans.Forward)
		q.StartPhase(fwd.Context(), spans.DenoiseStep, attrs.StepKey.Int(0)).End(nil)
		_ = q.RecordPhase(spans.KVRecv, spans.Between(time.Now(), time.Now()), nil)
		fwd.End(nil)
		exec.End(nil)
		q.StartPhase(ctx, spans.Postprocess, attrs.OutputIndexKey.Int(0)).End(nil)
		sctx, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 2, Type: attrs.StageLLM})
		st.StartPhase(sctx, spans.LLMPrefill).End(nil)
		bb.End(nil)
		q.End(nil)
		st.End(nil)
	})
}

// otelomni logs its first refusal of each kind through the OpenTelemetry
// error handler, a user's function like a span processor. Request.End
// logs a clamped end while it holds the request's lock: a handler that
// calls back into that request (or that blocks) holds up every call on
// it. User code must not run under otelomni's locks.
func TestAdvTheErrorHandlerNeverRunsUnderARequestsLock(t *testing.T) {
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "eh"})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) { req.SetStepsRun(1) }))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	now := time.Now()
	// A phase recorded past now: the request's end is clamped to it, and
	// the clamp is logged.
	if err := req.RecordPhase(spans.Postprocess, spans.Between(now, now.Add(time.Hour)), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		req.End(nil)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a deadlock guard, not a timing assertion
		t.Fatal("Request.End deadlocked: it called the error handler under the request's lock, and the handler called back into the request")
	}
}

// A span processor that panics in OnEnd of the request span, every phase
// ended: the panic is the caller's to see, and the request's duration is
// recorded all the same.
func TestAPanicInOnEndOfTheRequestStillRecordsItsDuration(t *testing.T) {
	m := newMetered(t, true)
	m.tp.RegisterSpanProcessor(&hook{name: spans.RequestSpanName, onEnd: func() { panic("a user's span processor failed") }})
	ctx, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "p", Model: "Qwen/Qwen-Image"})
	req.StartPhase(ctx, spans.Exec).End(nil)
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		req.End(nil)
		return false
	}()
	if !panicked {
		t.Error("the span processor's panic did not reach the caller")
	}
	if d := m.histograms(t)["gen_ai.server.request.duration"]; len(d) != 1 || d[0].Count != 1 {
		t.Errorf("request durations %v, want one", d)
	}
}
