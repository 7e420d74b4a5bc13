package otelomni

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// RequestInfo describes a request when its span starts. Every field is
// optional except ID; a field left at its zero value is not recorded, except
// GuidanceScale, whose 0 is a real value and which is therefore a pointer.
type RequestInfo struct {
	// ID is the request id, recorded exactly as given and never parsed.
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
	// Start is the request's arrival time; the zero time means now.
	Start time.Time
	// Attributes are recorded on the request span as well.
	Attributes []attribute.KeyValue
}

// StageInfo describes one stage of a pipeline. A StageInfo whose Type is
// empty is not recorded.
type StageInfo struct {
	// ID is the stage's index in the pipeline, from 0.
	ID int
	// Name is the stage's name, such as "thinker" or "dit".
	Name string
	// Type is attrs.StageLLM, attrs.StageDiffusion or attrs.StageOther.
	Type string
	// ReplicaID names the replica of the stage that served the request.
	ReplicaID string
	// Model is the model this stage runs; it is repeated on the stage's
	// phase spans (gen_ai.request.model). Optional.
	Model string
}

// Request is the span of one request (omni.request) and the phases
// recorded under it: in a single-stage pipeline, every phase; in a
// multi-stage one, the stages and transfers hang under it (see [Stage]).
// Its methods, those of [Scope], are safe for concurrent use, and safe
// (doing nothing) on the Request that [Instrumenter.Start] returns when
// tracing is off or the request is not sampled, on a nil *Request and on the
// zero Request.
type Request struct {
	scope
}

// scope is a span that phases hang under: a request's, or a stage's. It
// holds the live path and the record path; [Request] and [Stage] expose its
// methods, nil-safe.
type scope struct {
	in     *Instrumenter
	tracer trace.Tracer
	span   trace.Span
	// ctx holds the request span: the parent of its phases.
	ctx    context.Context
	pattrs *phaseAttrs
	id     string

	mu    sync.Mutex
	ended bool
	// exec and forward hold the exec and forward spans once started, as the
	// parents of the phases that nest in them.
	exec, forward context.Context
	open          openSpans
	// lastEnd is the latest explicit end among recorded phases.
	lastEnd time.Time
	llm     llmState
	// outputs counts the omni.output spans made, and lastOutput is when
	// the last one ended.
	outputs    int
	lastOutput time.Time
	// Buffers reused under mu, so that a phase costs no allocation beyond
	// the SDK's own.
	attrBuf  [16]attribute.KeyValue
	startOpt [1]trace.SpanStartOption
	endOpt   [1]trace.SpanEndOption
}

// noRequest is what Start returns when nothing is recorded. It is never
// written to.
var noRequest = &Request{}

// Prebuilt start options of the request span: no allocation per request.
var (
	startServer   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	startInternal = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
)

func (in *Instrumenter) start(ctx context.Context, tracer trace.Tracer, info *RequestInfo) (context.Context, *Request) {
	if ctx == nil {
		ctx = context.Background()
	}
	opts := startServer
	if psc := trace.SpanContextFromContext(ctx); psc.IsValid() && !psc.IsRemote() {
		opts = startInternal
	}
	if !info.Start.IsZero() {
		opts = []trace.SpanStartOption{opts[0], trace.WithTimestamp(info.Start)}
	}
	ctx, span := tracer.Start(ctx, spans.RequestSpanName, opts...)
	if !span.IsRecording() {
		return ctx, noRequest
	}
	r := &Request{}
	r.init(in, tracer, span, ctx, info.ID, info.Model)
	span.SetAttributes(r.requestAttrs(info)...)
	return ctx, r
}

func (r *scope) init(in *Instrumenter, tracer trace.Tracer, span trace.Span, ctx context.Context, id, model string) {
	r.in, r.tracer, r.span, r.ctx, r.id = in, tracer, span, ctx, id
	r.pattrs = in.models.get(model)
}

// requestAttrs builds the request span's attributes in r.attrBuf; r is not
// shared yet.
func (r *Request) requestAttrs(info *RequestInfo) []attribute.KeyValue {
	kv := append(r.attrBuf[:0],
		attrs.RequestID(info.ID),
		attrs.OperationName(attrs.OperationGenerateContent))
	if info.Model != "" {
		kv = append(kv, attrs.RequestModel(info.Model))
	}
	if info.Modality != "" {
		kv = append(kv, attrs.OutputModality(info.Modality))
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
	kv = info.Stage.appendAttrs(kv)
	return append(kv, info.Attributes...)
}

func (s *StageInfo) appendAttrs(kv []attribute.KeyValue) []attribute.KeyValue {
	if s.Type == "" {
		return kv
	}
	kv = append(kv, attrs.StageID(s.ID), attrs.StageType(s.Type))
	if s.Name != "" {
		kv = append(kv, attrs.StageName(s.Name))
	}
	if s.ReplicaID != "" {
		kv = append(kv, attrs.ReplicaID(s.ReplicaID))
	}
	return kv
}

// recording reports whether r makes spans at all.
func (r *scope) recording() bool { return r != nil && r.span != nil }

// Span returns the request span; a non-recording span when nothing is
// recorded.
func (r *scope) spanOrNoop() trace.Span {
	if !r.recording() {
		return trace.SpanFromContext(context.Background())
	}
	return r.span
}

// SetAttributes records kv on the request span, such as token counts known
// only at the end.
func (r *scope) setAttributes(kv ...attribute.KeyValue) {
	if r.recording() {
		r.span.SetAttributes(kv...)
	}
}

// End ends the span now. A non-nil err marks it failed: status Error
// with err's message, and error.type (see [ErrClientAbort] and friends; other
// errors carry their own type). Phases still open are ended first, at the
// same moment (the request was, say, aborted during exec). Ending a request
// twice does nothing more.
func (r *scope) endNow(err error) {
	if !r.recording() {
		return
	}
	r.end(time.Time{}, err)
}

// EndAt ends the span at t, for a request whose timing is handed
// over after the fact (see [Request.Record]). A zero t, or one before a phase
// recorded with explicit times ended, would make the tree inconsistent: the
// request then ends at its latest recorded phase end and EndAt returns an
// error.
func (r *scope) endAt(t time.Time, err error) error {
	if !r.recording() {
		return nil
	}
	r.mu.Lock()
	last := r.lastEnd
	r.mu.Unlock()
	var bad error
	if t.IsZero() || t.Before(last) {
		bad = fmt.Errorf("otelomni: request %s: end %v is zero or before its latest recorded phase end %v; ended there instead",
			r.id, t, last)
		r.in.stats.reject(bad)
		t = last
	}
	r.end(t, err)
	return bad
}

func (r *scope) end(at time.Time, err error) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		r.in.stats.misused("a request was ended twice")
		return
	}
	r.ended = true
	open := r.open.drain()
	r.mu.Unlock()
	// Children end before their parents: latest started first.
	for i := len(open) - 1; i >= 0; i-- {
		open[i].End()
	}
	if err != nil {
		markError(r.span, err)
	}
	if at.IsZero() {
		r.span.End()
		return
	}
	r.span.End(trace.WithTimestamp(at))
}

// markError sets status Error with err's message and error.type on span.
func markError(span trace.Span, err error) {
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(attrs.ErrorType(errorType(err)))
}
