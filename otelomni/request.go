// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/spans"
)

// A Request, the span of one request or stage: its start (startRequest,
// startStage), the attributes known later (SetAttributes, SetUsage,
// SetStepsRun) and its end (End, EndAt), which ends the phases and the
// local stages still open.
//
// How the tree stays whole, whatever calls race: every time otelomni gives
// a span of a request is read from the request's clock while holding the
// request's lock (a local stage's, with its request's lock too), and is
// given to the span (trace.WithTimestamp) and to the histogram alike. The
// order in which the lock is taken is then the order of the times, so a
// child that ends first ends no later than its parent, and a parent that
// ends first ends its open children at its own end. No span is started or
// ended under the lock (span processors run outside it): a child whose
// span is still starting when its parent ends is marked to end at the
// parent's end, and the goroutine starting it ends it there.

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
	// start is the span's start: given, or read from clk when it started.
	start time.Time
	clk   clock
	// startsLater: start was given later than the time it was started,
	// so live phases check the clock against it (only then).
	startsLater bool
	// up is the request of this process that a stage hangs under, nil
	// for a request or a stage under a remote one: the stage ends no later
	// than it.
	up *Request

	mu sync.Mutex
	// ended is set once; endedAt is the end it was given; endedByUp says
	// its local request ended it. starting says its span is still
	// starting (a stage under a local request): the goroutine starting it
	// ends it, at endedAt, when it ended meanwhile.
	ended, starting, endedByUp bool
	endedAt                    time.Time
	// stepsRun is the steps actually run, when told.
	stepsRun int
	// seen marks the phases measured once per request; claimed the
	// per-output phases and steps measured.
	seen          uint32
	claimed       claims
	exec, forward parentPhase
	open          openPhases
	// lastEnd is the latest end of a phase recorded or ended, and of an
	// output: the request ends no earlier.
	lastEnd    time.Time
	outputs    int
	lastOutput time.Time
	firstOut   bool
	// stages are the stages of this process started under this request
	// and not ended: they end no later than it.
	stages []*Request
	// batchLinks counts the batches its span links (at most
	// maxBatchLinks).
	batchLinks int
}

// parentPhase is a phase that other phases hang under: exec, or forward.
type parentPhase struct {
	set, closed bool
	// ctx holds its span: the parent context of its parts. It is nil while
	// a live phase's span is starting: the parts recorded meanwhile wait in
	// pending for it.
	ctx context.Context
	// start and end are its interval; end is zero while it is open.
	start, end time.Time
	// live is the id of its open live phase, 0 when it was recorded or has
	// ended.
	live uint32
	// lastChild is the latest end of a part recorded inside it while it
	// was open: it ends no earlier.
	lastChild time.Time
	// batch is the batch a live exec joined, nil when none.
	batch *batchRef
	// pending are the parts recorded inside it while its span was
	// starting, emitted by the goroutine that starts it.
	pending []deferredPart
}

// interval returns the parent phase's start and end; the end is zero while
// it is open.
func (n *parentPhase) interval() (time.Time, time.Time) { return n.start, n.end }

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
	modality := in.str(info.Modality)
	tbl := in.table(model, stage.Type, metricModality(modality))
	clk := newClock()
	start := in.startTime(info.Start, id)
	given := !start.IsZero()
	if given {
		start = clk.place(start)
	} else {
		start = clk.base
	}

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
	r := in.newRequest(ctx, span, tbl, kindRequest, id, stage.ID, info.NumInferenceSteps, start, given, clk)
	if r == noRequest {
		return ctx, r
	}
	// The phases hang under ctx as it holds the span: the SDK finds their
	// parent there at once, with no layer to look through.
	r.parent, r.ctx = ctx, ctx
	if r.span != nil {
		// A stage of this process started under it finds it here, and
		// ends inside it.
		ctx = context.WithValue(ctx, requestKey{}, r)
	}
	return ctx, r
}

// requestKey is the context key of the local request a context's span is.
type requestKey struct{}

// localRequest returns the request of this process whose span ctx holds,
// or nil: a stage started under it ends inside it.
func localRequest(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	if r == nil || r.span == nil || trace.SpanFromContext(ctx) != r.span {
		return nil
	}
	return r
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
	given := !start.IsZero()
	clk := newClock()

	// Under a request of this process: registered with it first, with its
	// start, so that the request's end ends the stage too, at the same
	// moment and no earlier than the stage's start; its measurements carry
	// the request's modality.
	up := localRequest(ctx)
	var placeholder *Request
	clamped := false
	modality := ""
	if up != nil {
		modality = up.tbl.key.modality
		up.mu.Lock()
		if up.ended {
			up.mu.Unlock()
			in.stats.misused("a stage started under a request that had already ended")
			return ctx, noRequest
		}
		clk = clock{base: up.clk.now()}
		start, clamped = stageStart(clk, start, given, up.start)
		placeholder = &Request{in: in, up: up, starting: true, start: start, startsLater: start.After(clk.base)}
		up.stages = append(up.stages, placeholder)
		up.mu.Unlock()
	} else {
		start, _ = stageStart(clk, start, given, time.Time{})
	}
	if clamped {
		// A stage of this process starts no earlier than its request.
		in.stats.clampedEnd(stageName(info.ID, stage.Name) + ": given a start before its request's; started there")
	}
	tbl := in.table(in.str(info.Model), stage.Type, modality)

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
	if placeholder == nil {
		r := in.newRequest(sctx, span, tbl, kindStage, "", stage.ID, 0, start, given, clk)
		if r != noRequest {
			r.ctx, r.parent, r.id = sctx, ctx, stageName(info.ID, stage.Name)
		}
		return sctx, r
	}
	return up.startedStage(placeholder, sctx, ctx, span, tbl, stageName(info.ID, stage.Name), stage.ID, start, given, clk)
}

// stageStart is a stage's start: given (placed on clk), or clk's base, no
// earlier than floor (its local request's start, or zero); clamped says
// the given start was before floor.
func stageStart(clk clock, start time.Time, given bool, floor time.Time) (time.Time, bool) {
	if !given {
		return clk.base, false
	}
	start = clk.place(start)
	if !floor.IsZero() && start.Before(floor) {
		return floor, true
	}
	return start, false
}

// stageName names a stage in errors and logs.
func stageName(id int, name string) string { return "stage " + strconv.Itoa(id) + " " + name }

// startedStage fills in stage r, registered under request up before its
// span started: it records nothing when its span does not record and the
// histograms are off; it is ended at once, at up's end, when up ended
// while its span was starting.
func (up *Request) startedStage(r *Request, sctx, parent context.Context, span trace.Span, tbl *modelTable, name string, stageID int, start time.Time, given bool, clk clock) (context.Context, *Request) {
	made := up.in.newRequest(sctx, span, tbl, kindStage, name, stageID, 0, start, given, clk)
	up.mu.Lock()
	r.mu.Lock()
	if made == noRequest {
		r.ended = true
		r.mu.Unlock()
		up.removeStageLocked(r)
		up.mu.Unlock()
		return sctx, noRequest
	}
	ended, at := r.ended, r.endedAt
	r.tracer, r.span, r.ctx, r.parent, r.tbl, r.met = made.tracer, made.span, sctx, parent, tbl, made.met
	r.kind, r.id, r.stageID, r.clk = kindStage, name, stageID, clk
	r.starting = false
	r.mu.Unlock()
	up.mu.Unlock()
	if ended {
		// Its request ended while its span started: it ends there.
		if r.span != nil {
			endSpanAt(r.span, at)
		}
		r.observeScope(at, nil)
	}
	return sctx, r
}

// removeStageLocked forgets stage s, ended; up.mu is held.
func (up *Request) removeStageLocked(s *Request) {
	if i := slices.Index(up.stages, s); i >= 0 {
		up.stages = slices.Delete(up.stages, i, i+1)
	}
}

// newRequest returns the Request of a span just started, or noRequest when
// it records nothing: the span is not sampled and the histograms are off.
func (in *Instrumenter) newRequest(ctx context.Context, span trace.Span, tbl *modelTable, kind scopeKind, id string, stageID, steps int, start time.Time, given bool, clk clock) *Request {
	if span != nil && !span.IsRecording() {
		span = nil
	}
	met := in.met
	if met != nil && !met.phase.Enabled(ctx) {
		met = nil
	}
	if span == nil && met == nil {
		return noRequest
	}
	r := &Request{in: in, span: span, ctx: ctx, parent: ctx, tbl: tbl, met: met, kind: kind, id: id,
		stageID: stageID, steps: steps, start: start, clk: clk, startsLater: given && start.After(clk.base)}
	if span != nil {
		r.tracer = in.tracer
	}
	return r
}

// startTime returns a given start, or the zero time (now) when none was
// given or the given one is out of range, which is counted.
func (in *Instrumenter) startTime(t time.Time, id string) time.Time {
	if t.IsZero() || plan.InRange(t) {
		return t
	}
	in.stats.reject(&scopeError{id: id, what: "start " + t.String() + " is out of the range a span can carry; started now"})
	return time.Time{}
}

// table returns the attribute table of a model, stage type and modality,
// counting a model the histograms record as "_OTHER".
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
// records. An attribute whose key otelomni sets itself (the request's or
// stage's identity, given at its start so that samplers see it; the phase,
// step and output keys) is left out and counted in Stats.Misuse, as for
// RequestInfo.Attributes.
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
// asked (an early exit). Called before exec ends (or, on the record path,
// before exec is recorded), it also gives the exec span its mean step
// duration (omni.diffusion.mean_step_duration: exec divided by the steps
// run, a ratio of one span), and the exec-per-step histogram divides by the
// same steps instead of the number asked. A negative n is not
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
// friends; other errors carry their own type). The phases still open, and
// the stages of this process started under it, end with it, at the same
// moment. When a phase recorded with its own times ends later than now,
// the span ends there instead, so that no child outlives it (counted in
// Stats.ClampedEnds). Ending twice does nothing more. End never waits for
// another goroutine: a phase whose span is starting on another goroutine
// is ended there, at this end.
func (r *Request) End(err error) {
	if r.recording() {
		_ = r.end(time.Time{}, err)
	}
}

// EndAt ends the request (or stage) span at t, for timing handed over after
// the fact. A zero t, or one a span cannot carry, is refused: the span ends
// as End would, and EndAt returns an error. A t before the start of the
// request or of a phase it holds, or before the end of a phase, would make
// the tree inconsistent: the span then ends at the latest of those, and
// EndAt returns an error.
func (r *Request) EndAt(t time.Time, err error) error {
	if !r.recording() {
		return nil
	}
	if t.IsZero() || !plan.InRange(t) {
		if e := r.end(time.Time{}, err); e != nil {
			return e // ended already: that is the one refusal
		}
		bad := &scopeError{id: r.id, what: fmt.Sprintf("EndAt(%v): a zero time or one a span cannot carry; ended now", t)}
		r.in.stats.reject(bad)
		return bad
	}
	return r.end(r.clk.place(t), err)
}

// closing is a request or stage closed under its lock, to be ended once
// the lock is released: its open phases and its span, at at.
type closing struct {
	r    *Request
	at   time.Time
	err  error
	kids []openPhase
	// starting: its span is still starting; the goroutine starting it ends
	// it.
	starting bool
	stepsRun int
}

// closeLocked marks r ended at at and takes its open phases; r.mu is held.
func (r *Request) closeLocked(at time.Time, err error) closing {
	r.ended, r.endedAt = true, at
	kids := r.open.takeAll(at)
	r.closeParentsLocked(at)
	return closing{r: r, at: at, err: err, kids: kids, starting: r.starting, stepsRun: r.stepsRun}
}

// finish ends what close took: the phases (latest started first), then the
// span, and records the duration. A span processor that panics in one
// span's end does not keep the others open: every span ends, then the
// first panic goes on.
func (c *closing) finish() {
	r := c.r
	if len(c.kids) == 0 {
		// The common case, every phase ended: the span, and the duration
		// recorded whether or not a span processor panics in its end.
		if c.starting {
			return
		}
		defer r.observeScope(c.at, c.err)
		if r.span != nil {
			r.endSpan(r.span, c.at, c.err)
		}
		return
	}
	finishKids(*c)
}

// finishKids is finish of a request or stage with open phases. It takes c
// by value, so that its closures move nothing of the common case to the
// heap.
func finishKids(c closing) {
	r := c.r
	var steps []func()
	for i := len(c.kids) - 1; i >= 0; i-- {
		k := &c.kids[i]
		steps = append(steps, func() { r.finishTaken(k, c.at, c.stepsRun) })
	}
	if !c.starting {
		steps = append(steps, func() {
			if r.span != nil {
				r.endSpan(r.span, c.at, c.err)
			}
		}, func() { r.observeScope(c.at, c.err) })
	}
	runAll(steps)
}

// runAll runs every step, whichever panics; then the first panic, if any,
// goes on.
func runAll(steps []func()) {
	var first any
	for _, step := range steps {
		func() {
			defer func() {
				if v := recover(); v != nil && first == nil {
					first = v
				}
			}()
			step()
		}()
	}
	if first != nil {
		panic(first)
	}
}

func (r *Request) end(at time.Time, err error) error {
	up := r.up
	if up != nil {
		up.mu.Lock()
	}
	r.mu.Lock()
	if r.ended {
		byUp := r.endedByUp
		r.mu.Unlock()
		if up != nil {
			up.mu.Unlock()
		}
		if !byUp {
			// A stage its request ended is not ended twice by its owner.
			r.in.stats.misused("a request or stage was ended twice")
		}
		return ErrRequestEnded
	}
	stages := r.stages
	r.stages = nil
	for _, s := range stages {
		s.mu.Lock()
	}
	// Read with every lock held: nothing of this request or its stages
	// can start or end at a later time than this one before it ends.
	now := r.clk.now()
	t, bad, clamped := r.endTimeLocked(at, now, stages)
	var ended []closing
	for _, s := range stages {
		if !s.ended {
			s.endedByUp = true
			ended = append(ended, s.closeLocked(t, nil))
		}
		s.mu.Unlock()
	}
	self := r.closeLocked(t, err)
	r.mu.Unlock()
	if up != nil {
		// Its request ends no earlier than it.
		up.lastEnd = later(up.lastEnd, t)
		up.removeStageLocked(r)
		up.mu.Unlock()
	}
	if clamped {
		// Counted once the locks are released: the error handler is the
		// user's code.
		what := r.id + ": ended before a phase it holds ended, or before its given start; ended there"
		if bad != nil {
			what = bad.Error()
		}
		r.in.stats.clampedEnd(what)
	}
	if len(ended) == 0 {
		self.finish()
		return bad
	}
	finishAll(ended, self)
	return bad
}

// finishAll ends the stages a request ended, then the request: each ends,
// whichever span processor panics, then the first panic goes on. Apart
// from end, so that its common case moves nothing to the heap.
func finishAll(ended []closing, self closing) {
	steps := make([]func(), 0, len(ended)+1)
	for i := range ended {
		steps = append(steps, ended[i].finish)
	}
	runAll(append(steps, self.finish))
}

// endTimeLocked returns the time r ends at: at, or now when at is zero, no
// earlier than what it holds; clamped says the end was moved there, and the
// error why a given end was moved. r.mu and the stages' locks are held.
func (r *Request) endTimeLocked(at, now time.Time, stages []*Request) (t time.Time, bad error, clamped bool) {
	floor := r.lastEnd
	if r.startsLater || !at.IsZero() {
		floor = later(floor, r.start)
	}
	if !at.IsZero() {
		floor = later(floor, r.open.latestStart())
	}
	for _, s := range stages {
		floor = later(later(floor, s.lastEnd), s.open.latestStart())
		if s.startsLater || !at.IsZero() {
			floor = later(floor, s.start)
		}
	}
	if at.IsZero() {
		if floor.After(now) {
			return floor, nil, true
		}
		return now, nil, false
	}
	if at.Before(floor) {
		return floor, &scopeError{id: r.id, what: fmt.Sprintf("EndAt(%v) is before its start or a phase it holds (%v); ended there", at, floor)}, true
	}
	return at, nil, false
}

// observeScope records the request's (or stage's) duration, from its
// start to end.
func (r *Request) observeScope(end time.Time, err error) {
	if r.met == nil {
		return
	}
	d := end.Sub(r.start)
	if d < 0 {
		return
	}
	if r.kind == kindStage {
		opts := r.tbl.rec.scope
		if err != nil {
			opts = r.tbl.rec.failedStage(r.in.errorType(err))
		}
		r.met.stage.Record(r.ctx, seconds(d), opts...)
		return
	}
	opts := r.tbl.rec.request
	if err != nil {
		opts = r.tbl.rec.failedRequest(r.in.errorType(err))
	}
	r.met.request.Float64Histogram.Record(r.ctx, seconds(d), opts...)
}
