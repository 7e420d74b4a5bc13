package otelomni

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// ActivePhase is a phase started on the live path. End it when the phase
// ends; its end time comes from the monotonic clock (start plus elapsed), so
// a step of the wall clock cannot make it negative. The zero ActivePhase,
// returned when nothing is recorded, is safe to use.
type ActivePhase struct {
	r    *scope
	id   uint64
	span trace.Span
	ctx  context.Context
}

// End ends the phase now. Ending it twice, or after its request ended (which
// ended it), does nothing.
func (a ActivePhase) End() {
	if a.r != nil {
		a.end(nil)
	}
}

// EndError ends the phase now, marked failed with err (status Error and
// error.type) when err is not nil.
func (a ActivePhase) EndError(err error) {
	if a.r != nil {
		a.end(err)
	}
}

func (a ActivePhase) end(err error) {
	a.r.mu.Lock()
	o, mine := a.r.open.remove(a.id)
	a.r.mu.Unlock()
	if !mine {
		return
	}
	if err != nil && o.span != nil {
		markError(o.span, err)
	}
	a.r.finish(&o, time.Time{})
}

// SetAttributes records kv on the phase span, such as attrs.BatchSize on
// exec.
func (a ActivePhase) SetAttributes(kv ...attribute.KeyValue) {
	if a.span != nil {
		a.span.SetAttributes(kv...)
	}
}

// Context returns a context that holds the phase span, for spans of your own
// inside the phase; nil when nothing is recorded.
func (a ActivePhase) Context() context.Context { return a.ctx }

// Recording reports whether the phase makes a span or a measurement.
func (a ActivePhase) Recording() bool { return a.r != nil }

// openPhase is a live phase started and not yet ended.
type openPhase struct {
	id     uint64
	phase  spans.Phase
	output int
	span   trace.Span // nil when the scope records metrics only
	ctx    context.Context
	start  time.Time // set when there is no span to ask
}

// finish ends an open phase's span and records its measurement. now is
// the end when the caller has read the clock already (the zero time: read it
// here, only if a measurement needs it).
func (r *scope) finish(o *openPhase, now time.Time) {
	if o.span != nil {
		o.span.End()
	}
	if r.met != nil {
		if now.IsZero() {
			now = time.Now()
		}
		start, end := r.spanTimes(o.span, o.start, now)
		r.observe(o.ctx, o.phase, start, end, o.output)
	}
}

func (r *scope) startPhaseAPI(p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	if !r.recording() {
		return ActivePhase{}
	}
	return r.startLive(p, kv)
}

func (r *scope) startLive(p spans.Phase, kv []attribute.KeyValue) ActivePhase {
	if !p.Valid() || p == spans.DenoiseStep || p.Parent() == spans.ParentTransfer {
		r.in.stats.misused(fmt.Sprintf("StartPhase(%v): use StartStep for denoise steps and a transfer for its parts", p))
		return ActivePhase{}
	}
	return r.startPhase(p, -1, kv)
}

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
	o := openPhase{phase: p, output: outputIndex(p, kv), ctx: r.ctx}
	if r.span != nil {
		o.ctx, o.span = r.tracer.Start(r.parentLocked(p.Parent()), p.SpanName())
		if step < 0 && len(kv) == 0 {
			o.span.SetAttributes(r.pattrs.of(p)...) // the common case: no copy
		} else {
			a := append(r.attrBuf[:0], r.pattrs.of(p)...)
			if step >= 0 {
				a = append(a, attrs.Step(step))
			}
			o.span.SetAttributes(append(a, kv...)...)
		}
		r.nestLocked(p, o.ctx)
	}
	if r.span == nil || r.met != nil {
		// The measurement's own start, for when there is no SDK span to
		// ask (tracing off, or a provider that is not the SDK's).
		o.start = time.Now()
	}
	o.id = r.open.add(o)
	r.mu.Unlock()
	return ActivePhase{r: r, id: o.id, span: o.span, ctx: o.ctx}
}

// outputIndex returns the omni.output.index among a per-output phase's
// attributes, or -1.
func outputIndex(p spans.Phase, kv []attribute.KeyValue) int {
	if !p.PerOutput() {
		return -1
	}
	for _, a := range kv {
		if a.Key == attrs.OutputIndexKey {
			return int(a.Value.AsInt64())
		}
	}
	return -1
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

func (r *scope) run(ctx context.Context, p spans.Phase, fn func(context.Context) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	a := r.startPhaseAPI(p)
	if a.r != nil {
		if a.span != nil {
			ctx = trace.ContextWithSpan(ctx, a.span)
		}
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

// openPhases is the set of live phases started and not yet ended, in start
// order. Most scopes have a few open at once, so they live inline.
type openPhases struct {
	next  uint64
	n     int
	small [4]openPhase
	more  []openPhase
}

func (o *openPhases) add(p openPhase) uint64 {
	o.next++
	p.id = o.next
	if o.n < len(o.small) {
		o.small[o.n] = p
		o.n++
	} else {
		o.more = append(o.more, p)
	}
	return p.id
}

// remove removes the phase with id, keeping the start order, and returns it.
func (o *openPhases) remove(id uint64) (openPhase, bool) {
	for i := 0; i < o.n; i++ {
		if o.small[i].id == id {
			p := o.small[i]
			copy(o.small[i:o.n], o.small[i+1:o.n])
			if len(o.more) > 0 {
				o.small[len(o.small)-1] = o.more[0]
				o.more = o.more[1:]
			} else {
				o.n--
				o.small[o.n] = openPhase{}
			}
			return p, true
		}
	}
	for i, m := range o.more {
		if m.id == id {
			o.more = append(o.more[:i], o.more[i+1:]...)
			return m, true
		}
	}
	return openPhase{}, false
}

// drain empties the set and returns its phases in start order.
func (o *openPhases) drain() []openPhase {
	if o.n == 0 && len(o.more) == 0 {
		return nil
	}
	out := make([]openPhase, 0, o.n+len(o.more))
	out = append(out, o.small[:o.n]...)
	out = append(out, o.more...)
	next := o.next
	*o = openPhases{next: next}
	return out
}
