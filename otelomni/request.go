package otelomni

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// RequestInfo describes a request when its span starts. Every field is
// optional except ID; a field left at its zero value is not recorded, except
// GuidanceScale, whose 0 is a real value and which is therefore a pointer.
// Strings are client input: each is recorded as valid UTF-8 and bounded (see
// WithValueLimit).
type RequestInfo struct {
	// ID is the request id, recorded exactly as given (within the value
	// limit) and never parsed.
	ID string
	// Model is the requested model, such as "Qwen/Qwen-Image".
	Model string
	// Modality is the output modality: attrs.ModalityImage, ...Video,
	// ...Audio, ...Text or ...Latent.
	Modality string
	// NumInferenceSteps is the number of denoising steps requested.
	NumInferenceSteps int
	// GuidanceScale is the classifier-free guidance scale; nil when unknown.
	GuidanceScale *float64
	// Height, Width and NumFrames give the size of the output in pixels and
	// frames.
	Height, Width, NumFrames int
	// Stage describes the one stage that serves the request in a
	// single-stage pipeline; the request span then carries the stage
	// attributes itself. Leave it empty in a multi-stage pipeline.
	Stage StageInfo
	// Start is the request's arrival time; the zero time means now. A
	// time a span cannot carry (before 1970, after 2262-04-11) is refused:
	// the request starts now and the refusal is counted.
	Start time.Time
	// Attributes are recorded on the request span as well, at its start.
	Attributes []attribute.KeyValue
	// Prompt is the request's text prompt. It is recorded only when the
	// instrumenter was made WithContentCapture, and then cut short.
	Prompt string
}

// StageInfo describes one stage of a pipeline. A StageInfo whose Type is
// empty is not recorded on a request span.
type StageInfo struct {
	// ID is the stage's index in the pipeline, from 0.
	ID int
	// Name is the stage's name, such as "thinker" or "dit".
	Name string
	// Type is attrs.StageLLM, attrs.StageDiffusion or attrs.StageOther;
	// any other value is recorded as attrs.StageOther.
	Type string
	// ReplicaID names the replica of the stage that served the request.
	ReplicaID string
	// Model is the model this stage runs; it is repeated on the stage's
	// phase spans (gen_ai.request.model). Optional.
	Model string
	// Start is when the stage started, for a stage rebuilt after the fact
	// ([Instrumenter.StartStage] only); the zero time means now.
	Start time.Time
}

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
	// start is the scope's start: given, or read when it started.
	start time.Time

	mu    sync.Mutex
	ended bool
	// starting counts live phases being started outside mu; an End waits
	// for them on cond, so that no phase starts after its request ended.
	starting int
	cond     *sync.Cond
	// seen marks the phases measured, each once per request.
	seen          uint32
	exec, forward nest
	open          openPhases
	// lastEnd is the latest end among recorded phases: the request ends no
	// earlier.
	lastEnd    time.Time
	llm        llmState
	outputs    int
	lastOutput time.Time
	firstOut   atomic.Bool
}

// nest is a phase that other phases hang under: exec, or forward.
type nest struct {
	set  bool
	ctx  context.Context
	span trace.Span
	// start is when it started; end is zero while it is open.
	start, end time.Time
	// live is the id of its open live phase, 0 when it was recorded.
	live uint64
	// lastChild is the latest end of a part recorded inside it while it
	// was open: it ends no earlier.
	lastChild time.Time
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
	stage := in.stageInfo(&info.Stage)
	model, id := in.str(info.Model), in.str(info.ID)
	start := in.startTime(info.Start, id)
	tbl := in.table(model, stage.Type)

	var span trace.Span
	if in.tracer != nil {
		a := startPool.Get().(*startArgs)
		n := in.requestAttrs(a.kv[:0], info, id, model, &stage)
		var extra []attribute.KeyValue
		if len(info.Attributes) > 0 {
			extra = in.kvs(info.Attributes)
		}
		if in.cfg.contentMax > 0 && info.Prompt != "" {
			extra = append(extra[:len(extra):len(extra)], attrs.Prompt(in.strMax(info.Prompt, in.cfg.contentMax)))
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
	return in.newScope(ctx, ctx, span, tbl, kindRequest, id, stage.ID, info.NumInferenceSteps, start)
}

func (in *Instrumenter) startStage(ctx context.Context, info *StageInfo) (context.Context, *Request) {
	stage := in.stageInfo(info)
	if stage.Type == "" {
		stage.Type = attrs.StageOther
	}
	start := info.Start
	if !start.IsZero() && !spans.InRange(start) {
		start = in.startTime(start, "stage "+strconv.Itoa(stage.ID))
	}
	tbl := in.table(in.str(info.Model), stage.Type)

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
	sctx, r := in.newScope(sctx, ctx, span, tbl, kindStage, "", stage.ID, 0, start)
	if r != noRequest {
		r.id = "stage " + strconv.Itoa(stage.ID) + " " + stage.Name
	}
	return sctx, r
}

// newScope returns the Request of a span just started, or noRequest when
// it records nothing: the span is not sampled and the histograms are off.
func (in *Instrumenter) newScope(ctx, parent context.Context, span trace.Span, tbl *modelTable, kind scopeKind, id string, stageID, steps int, start time.Time) (context.Context, *Request) {
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
	if start.IsZero() {
		start = time.Now()
	}
	r := &Request{in: in, span: span, ctx: ctx, tbl: tbl, met: met, kind: kind, id: id,
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
func (in *Instrumenter) table(model, stageType string) *modelTable {
	t, other := in.models.get(model, stageType)
	if other {
		in.stats.otherModel()
	}
	return t
}

// stageInfo returns s with its strings bounded and its type one of the
// three the contract knows.
func (in *Instrumenter) stageInfo(s *StageInfo) StageInfo {
	out := *s
	out.Name, out.ReplicaID = in.str(s.Name), in.str(s.ReplicaID)
	switch s.Type {
	case "", attrs.StageLLM, attrs.StageDiffusion, attrs.StageOther:
	default:
		out.Type = attrs.StageOther
	}
	return out
}

// requestAttrs appends the request span's attributes to kv and returns how
// many there are.
func (in *Instrumenter) requestAttrs(kv []attribute.KeyValue, info *RequestInfo, id, model string, stage *StageInfo) int {
	kv = append(kv,
		attrs.RequestID(id),
		attrs.OperationName(attrs.OperationGenerateContent))
	if model != "" {
		kv = append(kv, attrs.RequestModel(model))
	}
	if info.Modality != "" {
		m := in.str(info.Modality)
		kv = append(kv, attrs.OutputModality(m))
		if t, ok := attrs.OutputType(m); ok {
			kv = append(kv, t)
		}
	}
	if info.NumInferenceSteps > 0 {
		kv = append(kv, attrs.NumInferenceSteps(info.NumInferenceSteps))
	}
	if info.GuidanceScale != nil {
		kv = append(kv, attrs.GuidanceScale(*info.GuidanceScale))
	}
	if info.Height > 0 {
		kv = append(kv, attrs.Height(info.Height))
	}
	if info.Width > 0 {
		kv = append(kv, attrs.Width(info.Width))
	}
	if info.NumFrames > 0 {
		kv = append(kv, attrs.NumFrames(info.NumFrames))
	}
	if stage.Type != "" {
		kv = stage.appendAttrs(kv)
	}
	return len(kv)
}

func (s *StageInfo) appendAttrs(kv []attribute.KeyValue) []attribute.KeyValue {
	kv = append(kv, attrs.StageID(s.ID), attrs.StageType(s.Type))
	if s.Name != "" {
		kv = append(kv, attrs.StageName(s.Name))
	}
	if s.ReplicaID != "" {
		kv = append(kv, attrs.ReplicaID(s.ReplicaID))
	}
	return kv
}

// scopeError is an error about a request or stage as a whole.
type scopeError struct{ id, what string }

func (e *scopeError) Error() string { return "otelomni: " + e.id + ": " + e.what }
