// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

type ctxKey struct{}

// Where a phase hangs is the tree's: the context a caller gives carries
// its values and deadline into the phase's Context, never the phase's
// parent.
func TestAPartHangsUnderItsExecWhateverContextItIsGiven(t *testing.T) {
	other := newRecorded(t)
	otherCtx, otherReq := other.in.Start(context.Background(), otelomni.RequestInfo{ID: "other"})
	defer otherReq.End(nil)
	for _, c := range []struct {
		name string
		ctx  func(reqCtx, execCtx context.Context) context.Context
	}{
		{"background", func(_, _ context.Context) context.Context { return context.Background() }},
		{"nil", func(_, _ context.Context) context.Context { return nil }},
		{"the request's", func(reqCtx, _ context.Context) context.Context { return reqCtx }},
		{"exec's", func(_, execCtx context.Context) context.Context { return execCtx }},
		{"another request's", func(_, _ context.Context) context.Context { return otherCtx }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRecorded(t, otelomni.WithDenoiseSteps(true))
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
			exec := req.StartPhase(ctx, spans.Exec)
			given := c.ctx(ctx, exec.Context())
			if given != nil {
				given = context.WithValue(given, ctxKey{}, c.name)
			}
			fwd := req.StartPhase(given, spans.Forward)
			step := req.StartPhase(given, spans.DenoiseStep, attrs.StepKey.Int(0))
			if given != nil && fwd.Context().Value(ctxKey{}) != c.name {
				t.Errorf("forward's Context lost the values of the context given")
			}
			if got := trace.SpanFromContext(fwd.Context()).SpanContext().SpanID(); got == trace.SpanFromContext(given).SpanContext().SpanID() {
				t.Errorf("forward's Context holds the span of the context given, not forward's")
			}
			step.End(nil)
			fwd.End(nil)
			vae := req.StartPhase(given, spans.VAEDecode)
			vae.End(nil)
			exec.End(nil)
			req.End(nil)
			ss := r.rec.Ended()
			for name, want := range map[string]string{
				spans.Forward.SpanName():     spans.Exec.SpanName(),
				spans.DenoiseStep.SpanName(): spans.Forward.SpanName(),
				spans.VAEDecode.SpanName():   spans.Exec.SpanName(),
			} {
				if got := parentName(ss, one(t, ss, name)); got != want {
					t.Errorf("%s hangs under %q, want %q", name, got, want)
				}
			}
			if n := r.in.Stats().Conflicts + r.in.Stats().Misuse; n != 0 {
				t.Errorf("%d conflicts and misuses counted, want 0", n)
			}
		})
	}
}

// A part whose parents were not measured hangs under the nearest that was:
// a step without a forward under exec, a part without exec under the
// request.
func TestAPartWithoutItsParentHangsUnderTheNearestMeasured(t *testing.T) {
	r := newRecorded(t, otelomni.WithDenoiseSteps(true))
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
	req.StartPhase(ctx, spans.KVRecv).End(nil)
	exec := req.StartPhase(ctx, spans.Exec)
	req.StartPhase(ctx, spans.DenoiseStep, attrs.StepKey.Int(0)).End(nil)
	exec.End(nil)
	req.End(nil)
	ss := r.rec.Ended()
	if got := parentName(ss, one(t, ss, spans.KVRecv.SpanName())); got != spans.RequestSpanName {
		t.Errorf("kv_recv started before exec hangs under %q, want the request", got)
	}
	if got := parentName(ss, one(t, ss, spans.DenoiseStep.SpanName())); got != spans.Exec.SpanName() {
		t.Errorf("a step without forward hangs under %q, want exec", got)
	}
}

// A part whose exec has ended, or whose exec's span is still being started
// on another goroutine, is refused: no span, one conflict, and a Context
// whose span does not record.
func TestAPartOfAnExecEndedOrStillStartingIsRefused(t *testing.T) {
	t.Run("ended", func(t *testing.T) {
		r := newRecorded(t)
		ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
		exec := req.StartPhase(ctx, spans.Exec)
		exec.End(nil)
		fwd := req.StartPhase(exec.Context(), spans.Forward)
		fwd.End(nil)
		req.End(nil)
		if trace.SpanFromContext(fwd.Context()).IsRecording() {
			t.Error("a refused part's Context holds a recording span")
		}
		if n := len(byName(r.rec.Ended())[spans.Forward.SpanName()]); n != 0 {
			t.Errorf("%d forward spans, want 0", n)
		}
		if c := r.in.Stats().Conflicts; c != 1 {
			t.Errorf("%d conflicts counted, want 1", c)
		}
	})
	t.Run("starting", func(t *testing.T) {
		g := newGate(spans.Exec.SpanName())
		r := newRecorded(t)
		r.tp.RegisterSpanProcessor(g)
		ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
		started := make(chan otelomni.ActivePhase)
		go func() { started <- req.StartPhase(ctx, spans.Exec) }()
		<-g.entered
		var fwd otelomni.ActivePhase
		within(t, "a forward started while its exec starts", func() { fwd = req.StartPhase(ctx, spans.Forward) })
		close(g.release)
		exec := <-started
		fwd.End(nil)
		// exec is open and started: the next forward is its.
		req.StartPhase(ctx, spans.Forward).End(nil)
		exec.End(nil)
		req.End(nil)
		if trace.SpanFromContext(fwd.Context()).IsRecording() {
			t.Error("a refused part's Context holds a recording span")
		}
		ss := r.rec.Ended()
		if got := parentName(ss, one(t, ss, spans.Forward.SpanName())); got != spans.Exec.SpanName() {
			t.Errorf("forward hangs under %q, want exec", got)
		}
		if c := r.in.Stats().Conflicts; c != 1 {
			t.Errorf("%d conflicts counted, want 1", c)
		}
	})
}
