// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/spans"
)

// A Request, the span of one request or stage: its start (startRequest,
// startStage), the attributes known later (SetAttributes, SetUsage,
// SetStepsRun) and its end (End, EndAt), which ends the phases still open.

// scopeKind tells a request from a stage: they end into different
// histograms.
type scopeKind uint8

const (
	kindRequest scopeKind = iota + 1
	kindStage
)

// Request is the span of one request (omni.request), or of one stage of it
// (omni.stage, from [Instrumenter.StartStage]), and the phases recorded
// under it. Both are the same type: a stage records what a request records,
// under its own span.
//
// Its methods are safe for concurrent use, and safe (doing nothing) on the
// Request that Start and StartStage return when nothing is recorded, on a
// nil *Request and on the zero Request.
type Request struct {
	in *Instrumenter
	// tracer and span are nil when no span is recorded (tracing off, or the
	// request not sampled) and only measurements are.
	tracer trace.Tracer
	span   trace.Span
	// ctx holds the span: the parent of the phases.
	ctx context.Context
	// parent holds the request span: the parent of the transfers. For a
	// request it is ctx; for a stage, the context StartStage was given.
	parent context.Context
	tbl    *modelTable
	// met is nil when the histograms are off.
	met     *instruments
	kind    scopeKind
	id      string // bounded, for errors and logs
	stageID int
	steps   int
	// stepsRun is the steps actually run, when told (under mu).
	stepsRun int
	// start is the scope's start: given, or read when it started.
	start time.Time
	// startsLater: start was given later than the time it was started,
	// so live phases check the clock against it (only then).
	startsLater bool

	// ended is set once, under mu; read without it too.
	ended atomic.Bool
	// starting counts live phases being started or ended outside mu, and
	// links to a batch being made; an End waits for them on cond, so that
	// no phase starts or ends after its request ended, and no link is
	// made one way only.
	starting atomic.Int32
	// seen marks the phases measured, each once per request.
	seen atomic.Uint32
	// liveEnd is the latest end of a live phase that ended on its own, in
	// Unix nanoseconds: an end given to the request (EndAt) is no earlier.
	// An end now needs no such check: it comes after theirs.
	liveEnd atomic.Int64

	mu   sync.Mutex
	cond *sync.Cond
	// childrenStarting counts live phases being started under a live exec or
	// forward; its end waits for them on cond.
	childrenStarting int
	// claimed marks the per-output phases and steps measured.
	claimed       map[claimKey]bool
	exec, forward parentPhase
	open          openPhases
	// lastEnd is the latest end among recorded phases: the request ends no
	// earlier.
	lastEnd time.Time
	// llm is made at the first LLM event: most requests never have one.
	llm        *llmState
	outputs    int
	lastOutput time.Time
	firstOut   atomic.Bool
}

// parentPhase is a phase that other phases hang under: exec, or forward.
type parentPhase struct {
	set, closed bool
	ctx         context.Context
	// span is the live phase's span, which knows its own times; nil for a
	// recorded phase, whose start and end are kept.
	span       trace.Span
	start, end time.Time
	// live is the id of its open live phase, 0 when it was recorded.
	live uint32
	// lastChild is the latest end of a part recorded inside it while it
	// was open: it ends no earlier.
	lastChild time.Time
	// ending is when a live phase was closed: its span ends no earlier.
	ending time.Time
	// batch is the batch a live exec joined, nil when none.
	batch *batchRef
}

// interval returns the parent phase's start and end, as otelomni read them; the
// end is zero while it is open. A live phase's start was read after its
// span started, and its end (ending) before its span ended: the interval
// lies inside the exported span's.
func (n *parentPhase) interval() (time.Time, time.Time) {
	end := n.end
	if n.closed && end.IsZero() {
		end = n.ending
	}
	return n.start, end
}

// noRequest is what Start returns when nothing is recorded. It is never
// written to.
var noRequest = &Request{}

// recording reports whether r records spans, measurements or both.
func (r *Request) recording() bool { return r != nil && r.in != nil }

// Prebuilt span kinds: no allocation per request.
var (
	kindServer   = trace.WithSpanKind(trace.SpanKindServer)
	kindInternal = trace.WithSpanKind(trace.SpanKindInternal)
)

// maxStartAttrs is the size of the pooled attribute buffer of a request or
// stage span's start.
const maxStartAttrs = 24

// startArgs are the attributes and options of one request or stage span's
// start. They are pooled: the OpenTelemetry API copies both into the span's
// own configuration (trace.NewSpanStartConfig) before Start returns, and the
// boxed attribute option is kept per length, so a start costs no
// allocation of otelomni's own.
type startArgs struct {
	kv    [maxStartAttrs]attribute.KeyValue
	byLen [maxStartAttrs + 1]trace.SpanStartOption
	opts  [5]trace.SpanStartOption
}

var startPool = sync.Pool{New: func() any { return new(startArgs) }}

// options returns the start options with the first n attributes of a.kv.
func (a *startArgs) options(kind trace.SpanStartOption, n int, extra []attribute.KeyValue, start time.Time, links ...trace.SpanStartOption) []trace.SpanStartOption {
	o := append(a.opts[:0], kind)
	if len(extra) == 0 {
		if a.byLen[n] == nil {
			a.byLen[n] = trace.WithAttributes(a.kv[:n]...)
		}
		o = append(o, a.byLen[n])
	} else {
		all := make([]attribute.KeyValue, 0, n+len(extra))
		o = append(o, trace.WithAttributes(append(append(all, a.kv[:n]...), extra...)...))
	}
	if !start.IsZero() {
		o = append(o, trace.WithTimestamp(start))
	}
	return append(o, links...)
}

func (in *Instrumenter) startRequest(ctx context.Context, info *RequestInfo) (context.Context, *Request) {
	stage := in.stageInfo(&info.Stage, info.Stage.Type != "")
	model, id := in.str(info.Model), in.str(info.ID)
	start := in.startTime(info.Start, id)
	modality := in.str(info.Modality)
	tbl := in.table(model, stage.Type, metricModality(modality))

	var span trace.Span
	if in.tracer != nil {
		a := startPool.Get().(*startArgs)
		n := in.requestAttrs(a.kv[:0], info, id, model, modality, &stage)
		var extra []attribute.KeyValue
		if len(info.Attributes) > 0 {
			extra = in.callerKVs("RequestInfo.Attributes", info.Attributes)
		}
		if in.cfg.contentMax > 0 && info.Prompt != "" {
			extra = append(extra[:len(extra):len(extra)], omniattr.Prompt(in.strMax(info.Prompt, in.cfg.contentMax)))
		}
		kind := kindServer
		psc := trace.SpanContextFromContext(ctx)
		var link []trace.SpanStartOption
		switch {
		case psc.IsValid() && psc.IsRemote() && in.cfg.publicEndpoint != nil && in.cfg.publicEndpoint(ctx):
			// An untrusted caller's context decides nothing: a new trace,
			// linked to it.
			link = []trace.SpanStartOption{trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: psc})}
		case psc.IsValid() && !psc.IsRemote():
			kind = kindInternal
		}
		ctx, span = in.tracer.Start(ctx, spans.RequestSpanName, a.options(kind, n, extra, start, link...)...)
		startPool.Put(a)
	}
	return in.newRequest(ctx, ctx, span, tbl, kindRequest, id, stage.ID, info.NumInferenceSteps, start)
}

func (in *Instrumenter) startStage(ctx context.Context, info *StageInfo) (context.Context, *Request) {
	stage := in.stageInfo(info, true)
	if stage.Type == "" {
		stage.Type = attrs.StageOther
	}
	start := info.Start
	if !start.IsZero() {
		start = in.startTime(start, "stage "+strconv.Itoa(info.ID))
	}
	tbl := in.table(in.str(info.Model), stage.Type, "")

	sctx := ctx
	var span trace.Span
	if in.tracer != nil {
		a := startPool.Get().(*startArgs)
		n := len(stage.appendAttrs(a.kv[:0]))
		kind := kindServer
		if psc := trace.SpanContextFromContext(ctx); psc.IsValid() && !psc.IsRemote() {
			kind = kindInternal
		}
		sctx, span = in.tracer.Start(ctx, spans.StageSpanName, a.options(kind, n, nil, start)...)
		startPool.Put(a)
	}
	sctx, r := in.newRequest(sctx, ctx, span, tbl, kindStage, "", stage.ID, 0, start)
	if r != noRequest {
		r.id = "stage " + strconv.Itoa(info.ID) + " " + stage.Name
	}
	return sctx, r
}

// newRequest returns the Request of a span just started, or noRequest when
// it records nothing: the span is not sampled and the histograms are off.
func (in *Instrumenter) newRequest(ctx, parent context.Context, span trace.Span, tbl *modelTable, kind scopeKind, id string, stageID, steps int, start time.Time) (context.Context, *Request) {
	if span != nil && !span.IsRecording() {
		span = nil
	}
	met := in.met
	if met != nil && !met.phase.Enabled(ctx) {
		met = nil
	}
	if span == nil && met == nil {
		return ctx, noRequest
	}
	later := false
	if start.IsZero() {
		// The span started just before: this reading is no earlier than
		// its own start, so a phase that starts no earlier lies inside.
		start = time.Now()
	} else {
		later = start.After(time.Now())
	}
	r := &Request{in: in, span: span, ctx: ctx, tbl: tbl, met: met, kind: kind, id: id, startsLater: later,
		stageID: stageID, steps: steps, start: start}
	if span != nil {
		r.tracer = in.tracer
	}
	r.parent = ctx
	if kind == kindStage {
		r.parent = parent
	}
	return ctx, r
}

// startTime returns a given start, or the zero time (now) when none was
// given or the given one is out of range, which is counted.
func (in *Instrumenter) startTime(t time.Time, id string) time.Time {
	if t.IsZero() || spans.InRange(t) {
		return t
	}
	in.stats.reject(&scopeError{id: id, what: "start " + t.String() + " is out of the range a span can carry; started now"})
	return time.Time{}
}

// table returns the attribute table of a model and stage type, counting a
// model the histograms record as "_OTHER".
func (in *Instrumenter) table(model, stageType, modality string) *modelTable {
	t, other := in.models.get(model, stageType, modality)
	if other {
		in.stats.otherModel()
	}
	return t
}

// scopeError is an error about a request or stage as a whole.
type scopeError struct{ id, what string }

func (e *scopeError) Error() string { return "otelomni: " + e.id + ": " + e.what }

// SetAttributes records kv on the request (or stage) span, such as counts
// known only at the end. Strings are bounded like every string otelomni
// records. An attribute whose key otelomni sets itself is left out and
// counted in Stats.Misuse, as for RequestInfo.Attributes.
func (r *Request) SetAttributes(kv ...attribute.KeyValue) {
	if !r.recording() || r.span == nil {
		return
	}
	r.span.SetAttributes(r.in.callerKVs("Request.SetAttributes", kv)...)
}

// SetUsage records the token counts (gen_ai.usage.input_tokens and
// gen_ai.usage.output_tokens), once known. A negative count is not
// recorded, and is counted in Stats.Misuse.
func (r *Request) SetUsage(inputTokens, outputTokens int) {
	if !r.recording() {
		return
	}
	var kv [2]attribute.KeyValue
	n := 0
	for _, c := range [...]struct {
		what string
		v    int
		kv   func(int) attribute.KeyValue
	}{{"input tokens", inputTokens, omniattr.InputTokens}, {"output tokens", outputTokens, omniattr.OutputTokens}} {
		if c.v < 0 {
			_ = r.in.outOfRange(c.what, int64(c.v), 0, math.MaxInt, "not recorded", nil)
			continue
		}
		kv[n] = c.kv(c.v)
		n++
	}
	if n > 0 && r.span != nil {
		r.span.SetAttributes(kv[:n]...)
	}
}

// SetStepsRun records the number of denoising steps the request actually
// ran (omni.diffusion.num_steps_run), which can differ from the number
// asked (an early exit). Called before exec ends, it also gives the exec
// span its mean step duration (omni.diffusion.mean_step_duration: exec
// divided by the steps run, a ratio of one span), and the exec-per-step
// histogram uses it instead of the number asked. A negative n is not
// recorded, and is counted in Stats.Misuse; 0 is taken as not known.
func (r *Request) SetStepsRun(n int) {
	if !r.recording() || n == 0 {
		return
	}
	if n < 0 {
		_ = r.in.outOfRange("steps run", int64(n), 0, math.MaxInt, "not recorded", nil)
		return
	}
	r.mu.Lock()
	r.stepsRun = n
	r.mu.Unlock()
	if r.span != nil {
		r.span.SetAttributes(omniattr.StepsRun(n))
	}
}

// End ends the request (or stage) span now. A non-nil err marks it failed:
// status Error with err's message, and error.type (see ErrClientAbort and
// friends; other errors carry their own type). Phases still open are ended
// first, at the same moment. When a phase recorded with its own times ends
// later than now, the span ends there instead, so that no child outlives
// it (counted in Stats.ClampedEnds). Ending twice does nothing more.
func (r *Request) End(err error) {
	if r.recording() {
		_ = r.end(time.Time{}, err)
	}
}

// EndAt ends the request (or stage) span at t, for timing handed over after
// the fact. A zero t, or one a span cannot carry, is refused: the span ends
// as End would, and EndAt returns an error. A t before the start of the
// request or of a phase it holds, or before the end of a recorded phase,
// would make the tree inconsistent: the span then ends at the latest of
// those, and EndAt returns an error.
func (r *Request) EndAt(t time.Time, err error) error {
	if !r.recording() {
		return nil
	}
	if t.IsZero() || !spans.InRange(t) {
		bad := &scopeError{id: r.id, what: fmt.Sprintf("EndAt(%v): a zero time or one a span cannot carry; ended now", t)}
		r.in.stats.reject(bad)
		if e := r.end(time.Time{}, err); e != nil {
			return e
		}
		return bad
	}
	return r.end(t, err)
}

func (r *Request) end(at time.Time, err error) error {
	r.mu.Lock()
	if r.ended.Load() {
		r.mu.Unlock()
		r.in.stats.misused("a request or stage was ended twice")
		return ErrRequestEnded
	}
	r.ended.Store(true)
	for r.starting.Load() > 0 {
		// A live phase is starting on another goroutine: end after it,
		// so that it does not start after its request ended.
		if r.cond == nil {
			r.cond = sync.NewCond(&r.mu)
		}
		r.cond.Wait()
	}
	open := r.open.drain()
	floor := r.lastEnd
	r.mu.Unlock()

	var bad error
	var now time.Time
	if at.IsZero() {
		// A start given from another clock may lie in the future, and a
		// recorded phase may end later than now: the span ends no earlier.
		if start := r.scopeStart(); !floor.IsZero() || !r.start.IsZero() || r.span == nil {
			now = time.Now()
			if start.After(now) {
				floor = later(floor, start)
			}
			if floor.After(now) {
				at = floor
				r.in.stats.clampedEnd(fmt.Sprintf("%s: ended before a phase it holds ended; ended at that phase's end", r.id))
			}
		}
	} else {
		if n := r.liveEnd.Load(); n != 0 {
			floor = later(floor, time.Unix(0, n))
		}
		floor = later(floor, r.scopeStart())
		for i := range open {
			floor = later(floor, open[i].start)
		}
		if at.Before(floor) {
			bad = &scopeError{id: r.id, what: fmt.Sprintf("EndAt(%v) is before its start or a phase it holds (%v); ended there", at, floor)}
			r.in.stats.clampedEnd(bad.Error())
			at = floor
		}
	}
	// Children end before their parents: latest started first.
	for i := len(open) - 1; i >= 0; i-- {
		r.finish(&open[i], at, nil)
	}
	if r.span != nil {
		r.endSpan(r.span, at, err)
	}
	r.observeScope(at, now, err)
	return bad
}

// observeScope records the request's (or stage's) duration.
func (r *Request) observeScope(at, now time.Time, err error) {
	if r.met == nil {
		return
	}
	start, end := r.start, at
	if end.IsZero() {
		end = now
		if end.IsZero() {
			end = time.Now()
		}
	}
	d := end.Sub(start)
	if d < 0 {
		return
	}
	ctx := r.ctx
	if r.kind == kindStage {
		opts := r.tbl.rec.scope
		if err != nil {
			opts = r.tbl.rec.failedStage(r.in.errorType(err))
		}
		r.met.stage.Record(ctx, seconds(d), opts...)
		return
	}
	opts := r.tbl.rec.request
	if err != nil {
		opts = r.tbl.rec.failedRequest(r.in.errorType(err))
	}
	r.met.request.Float64Histogram.Record(ctx, seconds(d), opts...)
}
