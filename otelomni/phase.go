package otelomni

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// ActivePhase is a phase span started on the live path. End it when the
// phase ends; its end time comes from the monotonic clock (start plus
// elapsed), so a step of the wall clock cannot make it negative. The zero
// ActivePhase, returned when nothing is recorded, is safe to use.
type ActivePhase struct {
	r    *scope
	span trace.Span
	ctx  context.Context
}

// End ends the phase now. Ending it twice, or after its request ended (which
// ended it), does nothing.
func (a ActivePhase) End() {
	if a.r != nil {
		a.end()
	}
}

func (a ActivePhase) end() {
	a.r.mu.Lock()
	mine := a.r.open.remove(a.span)
	a.r.mu.Unlock()
	if mine {
		a.span.End()
	}
}

// EndError ends the phase now, marked failed with err (status Error and
// error.type) when err is not nil.
func (a ActivePhase) EndError(err error) {
	if a.r == nil {
		return
	}
	if err != nil {
		a.r.mu.Lock()
		open := a.r.open.contains(a.span)
		a.r.mu.Unlock()
		if open {
			markError(a.span, err)
		}
	}
	a.End()
}

// SetAttributes records kv on the phase span, such as attrs.BatchSize on
// exec.
func (a ActivePhase) SetAttributes(kv ...attribute.KeyValue) {
	if a.r != nil {
		a.span.SetAttributes(kv...)
	}
}

// Context returns a context that holds the phase span, for spans of your own
// inside the phase; nil when nothing is recorded.
func (a ActivePhase) Context() context.Context { return a.ctx }

// Recording reports whether the phase makes a span.
func (a ActivePhase) Recording() bool { return a.r != nil }

// StartPhase starts phase p now, under its parent in the tree: kv_recv,
// forward and vae_decode under exec (once exec has started), queue wait and
// the others under the request span. kv adds attributes, such as
// attrs.OutputIndex and attrs.OutputFinal for one output of a streaming
// request.
//
// A phase that is never started makes no span. A phase still open when the
// request ends is ended with it. Denoise steps are started with
// [Request.StartStep].
func (r *scope) startPhaseAPI(p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	if !r.recording() {
		return ActivePhase{}
	}
	return r.startLive(p, kv)
}

func (r *scope) startLive(p spans.Phase, kv []attribute.KeyValue) ActivePhase {
	if !p.Valid() || p == spans.DenoiseStep || p.Parent() == spans.ParentTransfer {
		r.in.stats.misused(fmt.Sprintf("StartPhase(%v) on a request: use StartStep for denoise steps and a transfer for its parts", p))
		return ActivePhase{}
	}
	return r.startPhase(p, -1, kv)
}

// StartStep starts the span of denoise step i (from 0) under forward. It
// does nothing unless per-step spans are on ([WithDenoiseSteps]).
func (r *scope) startStepAPI(i int) ActivePhase {
	if !r.recording() || !r.in.cfg.denoiseSteps {
		return ActivePhase{}
	}
	return r.startPhase(spans.DenoiseStep, i, nil)
}

func (r *scope) startPhase(p spans.Phase, step int, kv []attribute.KeyValue) ActivePhase {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		r.in.stats.misused(fmt.Sprintf("phase %v started after its request ended", p))
		return ActivePhase{}
	}
	ctx, span := r.tracer.Start(r.parentLocked(p.Parent()), p.SpanName())
	a := append(r.attrBuf[:0], r.pattrs.of(p)...)
	if step >= 0 {
		a = append(a, attrs.Step(step))
	}
	span.SetAttributes(append(a, kv...)...)
	r.open.add(span)
	r.nestLocked(p, ctx)
	r.mu.Unlock()
	return ActivePhase{r: r, span: span, ctx: ctx}
}

// parentLocked returns the context of the span that a phase with parent
// kind k hangs under. Without its exec (or forward) span, a phase hangs
// under the next span up rather than being lost.
func (r *scope) parentLocked(k spans.Parent) context.Context {
	switch k {
	case spans.ParentForward:
		if r.forward != nil {
			return r.forward
		}
		fallthrough
	case spans.ParentExec:
		if r.exec != nil {
			return r.exec
		}
	}
	return r.ctx
}

// nestLocked keeps the context of a span that other phases nest in.
func (r *scope) nestLocked(p spans.Phase, ctx context.Context) {
	switch p {
	case spans.Exec:
		r.exec = ctx
	case spans.Forward:
		r.forward = ctx
	}
}

// Run runs fn inside phase p: the phase starts before fn and ends when it
// returns. fn gets ctx with the phase span in it. An error from fn marks the
// phase failed and is returned. A panic in fn marks the phase failed, ends
// it, and is re-raised.
func (r *scope) run(ctx context.Context, p spans.Phase, fn func(context.Context) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	a := r.startPhaseAPI(p)
	if a.r != nil {
		ctx = trace.ContextWithSpan(ctx, a.span)
		defer func() {
			if v := recover(); v != nil {
				a.EndError(fmt.Errorf("panic: %v", v))
				panic(v)
			}
		}()
	}
	err := fn(ctx)
	a.EndError(err)
	return err
}

// openSpans is the set of phase spans started and not yet ended, in start
// order. Most requests have a few open at once, so they live inline.
type openSpans struct {
	n     int
	small [6]trace.Span
	more  []trace.Span
}

func (o *openSpans) add(s trace.Span) {
	if o.n < len(o.small) {
		o.small[o.n] = s
		o.n++
		return
	}
	o.more = append(o.more, s)
}

func (o *openSpans) index(s trace.Span) int {
	for i := 0; i < o.n; i++ {
		if o.small[i] == s {
			return i
		}
	}
	for i, m := range o.more {
		if m == s {
			return len(o.small) + i
		}
	}
	return -1
}

func (o *openSpans) contains(s trace.Span) bool { return o.index(s) >= 0 }

// remove removes s, keeping the start order, and reports whether it was
// there.
func (o *openSpans) remove(s trace.Span) bool {
	i := o.index(s)
	switch {
	case i < 0:
		return false
	case i < len(o.small):
		copy(o.small[i:o.n], o.small[i+1:o.n])
		if len(o.more) > 0 {
			o.small[len(o.small)-1] = o.more[0]
			o.more = o.more[1:]
		} else {
			o.n--
			o.small[o.n] = nil
		}
	default:
		j := i - len(o.small)
		o.more = append(o.more[:j], o.more[j+1:]...)
	}
	return true
}

// drain empties the set and returns its spans in start order.
func (o *openSpans) drain() []trace.Span {
	out := make([]trace.Span, 0, o.n+len(o.more))
	out = append(out, o.small[:o.n]...)
	out = append(out, o.more...)
	*o = openSpans{}
	return out
}
