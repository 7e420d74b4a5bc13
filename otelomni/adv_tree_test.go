// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Each test here drives one interleaving in order (gates, no sleeps) and
// checks that every child lies inside its parent: newRecorded's cleanup
// (assertNoNegativeSpan) reports any that does not, beside what the test
// asserts itself.

// endOf returns the end of the only span named name.
func endOf(t *testing.T, ss []sdktrace.ReadOnlySpan, name string) time.Time {
	t.Helper()
	return one(t, ss, name).EndTime()
}

// A forward left open when its exec ends is ended with it. A denoise step
// recorded afterwards lies outside that forward (it starts after the
// forward's end) and must be refused as outside its parent, as a part of
// the ended exec would be.
func TestAdvAStepRecordedAfterItsForwardEndedWithExecIsRefused(t *testing.T) {
	r := newRecorded(t, otelomni.WithDenoiseSteps(true))
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
	exec := req.StartPhase(ctx, spans.Exec)
	req.StartPhase(exec.Context(), spans.Forward) // left open: it ends with exec
	exec.End(nil)
	now := time.Now()
	err := req.RecordPhase(spans.DenoiseStep, spans.Between(now, now.Add(time.Millisecond)), nil, attrs.StepKey.Int(0))
	// The same part of the ended exec, for comparison: refused.
	errKV := req.RecordPhase(spans.KVRecv, spans.Between(now, now.Add(time.Millisecond)), nil)
	req.End(nil)
	if !errors.Is(errKV, spans.ErrOutsideParent) {
		t.Fatalf("kv_recv after exec ended: %v, want ErrOutsideParent", errKV)
	}
	if !errors.Is(err, spans.ErrOutsideParent) {
		t.Errorf("a step recorded after its forward ended (with its exec): %v, want ErrOutsideParent", err)
	}
}

// A step recorded inside an open forward that ends later than now makes
// the forward end no earlier (as a part recorded inside an open exec makes
// exec end no earlier). Ending the exec ends that forward at exec's end:
// exec must then end no earlier than the step either.
func TestAdvExecEndingItsForwardCoversAStepRecordedInside(t *testing.T) {
	for _, how := range []string{"exec.End ends the open forward", "forward.End, then exec.End"} {
		t.Run(how, func(t *testing.T) {
			r := newRecorded(t, otelomni.WithDenoiseSteps(true))
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "b"})
			exec := req.StartPhase(ctx, spans.Exec)
			fwd := req.StartPhase(exec.Context(), spans.Forward)
			now := time.Now()
			step := spans.Between(now, now.Add(time.Hour)) // the engine's own clock, ahead of ours
			if err := req.RecordPhase(spans.DenoiseStep, step, nil, attrs.StepKey.Int(0)); err != nil {
				t.Fatal(err)
			}
			if how != "exec.End ends the open forward" {
				fwd.End(nil)
			}
			exec.End(nil)
			req.End(nil)
			ss := r.rec.Ended()
			if f := endOf(t, ss, spans.Forward.SpanName()); f.Before(step.End()) {
				t.Errorf("forward ends at %v, before the step recorded inside it (%v)", f, step.End())
			}
			if e, f := endOf(t, ss, spans.Exec.SpanName()), endOf(t, ss, spans.Forward.SpanName()); e.Before(f) {
				t.Errorf("exec ends at %v, before its forward (%v)", e, f)
			}
		})
	}
}

// A forward whose span is still starting when its exec ends is marked to
// end at exec's end; the request's end must not move that mark to its own,
// later end.
func TestAdvAPartStartingKeepsTheEndOfTheFirstParentThatEnded(t *testing.T) {
	g := newGate(spans.Forward.SpanName())
	r := newRecorded(t)
	r.tp.RegisterSpanProcessor(g)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "c"})
	exec := req.StartPhase(ctx, spans.Exec)
	started := make(chan otelomni.ActivePhase)
	go func() { started <- req.StartPhase(exec.Context(), spans.Forward) }()
	<-g.entered
	within(t, "exec.End and Request.EndAt while forward starts", func() {
		exec.End(nil) // the forward is starting: its starter ends it here
		if err := req.EndAt(time.Now().Add(time.Hour), nil); err != nil {
			t.Error(err)
		}
	})
	close(g.release)
	(<-started).End(nil)
	ss := r.rec.Ended()
	if f, e := endOf(t, ss, spans.Forward.SpanName()), endOf(t, ss, spans.Exec.SpanName()); f.After(e) {
		t.Errorf("forward ends at %v, after its exec (%v): the request's end overwrote exec's", f, e)
	}
}

// A stage of this process given a start later than now (another host's
// clock) starts there. When its request ends while the stage's span is
// starting, the stage is ended at the request's end: the request must end
// no earlier than that start, else the stage span is negative and outside
// its request.
func TestAdvAStageStartingWithALaterStartWhileItsRequestEnds(t *testing.T) {
	g := newGate(spans.StageSpanName)
	r := newRecorded(t)
	r.tp.RegisterSpanProcessor(g)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "h"})
	later := time.Now().Add(time.Hour)
	started := make(chan *otelomni.Request)
	go func() {
		_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "talker", Type: attrs.StageLLM, Start: later})
		started <- st
	}()
	<-g.entered
	within(t, "Request.End while its stage starts", func() { req.End(nil) })
	close(g.release)
	st := <-started
	st.End(nil)
	ss := r.rec.Ended()
	s := one(t, ss, spans.StageSpanName)
	if s.EndTime().Before(s.StartTime()) {
		t.Errorf("the stage span is negative: %v to %v", s.StartTime(), s.EndTime())
	}
	if e := endOf(t, ss, spans.RequestSpanName); e.Before(s.StartTime()) {
		t.Errorf("the request ends at %v, before its stage starts (%v)", e, s.StartTime())
	}
}

// panicAfter is a span processor that, when the span named name starts,
// closes entered, waits for release and then panics, as a user's processor
// may.
type panicAfter struct {
	name             string
	entered, release chan struct{}
}

func (p *panicAfter) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == p.name {
		close(p.entered)
		<-p.release
		panic("a user's span processor failed")
	}
}
func (*panicAfter) OnEnd(sdktrace.ReadOnlySpan)      {}
func (*panicAfter) Shutdown(context.Context) error   { return nil }
func (*panicAfter) ForceFlush(context.Context) error { return nil }

// A part recorded while its live exec's span is starting waits for it.
// When that start panics (a user's processor), the exec never exists: the
// part the caller was told was recorded (nil error) must still be exported
// (under the request) or be reported, never silently lost; and a part
// recorded after that must not wait for an exec that will never start.
func TestAdvPartsWaitingForAnExecWhoseStartPanickedAreNotLost(t *testing.T) {
	p := &panicAfter{name: spans.Exec.SpanName(), entered: make(chan struct{}), release: make(chan struct{})}
	r := newRecorded(t)
	r.tp.RegisterSpanProcessor(p)
	t0 := time.Now()
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "d", Start: t0})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }() // the processor's panic is the caller's
		req.StartPhase(ctx, spans.Exec)
	}()
	<-p.entered
	now := time.Now()
	errKV := req.RecordPhase(spans.KVRecv, spans.Between(now, now), nil)
	close(p.release)
	<-done
	errVAE := req.RecordPhase(spans.VAEDecode, spans.Between(time.Now(), time.Now()), nil)
	req.End(nil)
	got := byName(r.rec.Ended())
	for _, c := range []struct {
		p   spans.Phase
		err error
	}{{spans.KVRecv, errKV}, {spans.VAEDecode, errVAE}} {
		if c.err == nil && len(got[c.p.SpanName()]) != 1 {
			t.Errorf("%v: RecordPhase returned nil, yet %d spans were exported (spans: %v)", c.p, len(got[c.p.SpanName()]), names(r.rec.Ended()))
		}
	}
}

// The same with no start given: a stage of this process starts at its
// registration under the request. An EndAt given a time read before that
// (the engine's own end of the request) must end the request no earlier
// than the stage's start; while the stage's span is starting, its start is
// not looked at, and the stage is ended before it starts.
func TestAdvAStageStartingWhileItsRequestEndsAtAnEarlierTime(t *testing.T) {
	g := newGate(spans.StageSpanName)
	r := newRecorded(t)
	r.tp.RegisterSpanProcessor(g)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "h2"})
	end := time.Now() // the engine's end, read before the stage started
	started := make(chan *otelomni.Request)
	go func() {
		_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "talker", Type: attrs.StageLLM})
		started <- st
	}()
	<-g.entered
	var err error
	within(t, "Request.EndAt while its stage starts", func() { err = req.EndAt(end, nil) })
	close(g.release)
	(<-started).End(nil)
	s := one(t, r.rec.Ended(), spans.StageSpanName)
	if s.EndTime().Before(s.StartTime()) {
		t.Errorf("EndAt returned %v; the stage span is negative: %v to %v", err, s.StartTime(), s.EndTime())
	}
}
