package otelomni

import (
	"context"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
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
	// Prompt is the request's text prompt. It is recorded only when the
	// instrumenter was made WithContentCapture, and then truncated.
	Prompt string
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
	// Start is when the stage started, for a stage rebuilt after the fact
	// ([Instrumenter.StartStage] only); the zero time means now.
	Start time.Time
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

// noRequest is what Start returns when nothing is recorded. It is never
// written to.
var noRequest = &Request{}

// Prebuilt start options of the request span: no allocation per request.
var (
	startServer   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	startInternal = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
)

func (in *Instrumenter) start(ctx context.Context, ts *tracerState, ms *meterState, info *RequestInfo) (context.Context, *Request) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, span := ts.startScope(ctx, spans.RequestSpanName, info.Start)
	if span == nil && ms.inst == nil {
		return ctx, noRequest
	}
	r := &Request{}
	r.init(in, ts.tracer, span, ctx, ms.inst, info.Model, info.Stage.Type, info.Start)
	r.id, r.steps, r.kind = info.ID, info.NumInferenceSteps, kindRequest
	if span != nil {
		span.SetAttributes(r.requestAttrs(info)...)
		if in.cfg.contentMax > 0 && info.Prompt != "" {
			span.SetAttributes(attrs.Prompt(truncateUTF8(info.Prompt, in.cfg.contentMax)))
		}
	}
	return ctx, r
}

// startScope starts the span of a request or stage: SERVER, or INTERNAL
// under a local parent, at start when it is given. It returns a nil span
// when tracing is off or the span is not sampled, with the context that
// carries the sampling decision on.
func (ts *tracerState) startScope(ctx context.Context, name string, start time.Time) (context.Context, trace.Span) {
	if !ts.enabled {
		return ctx, nil
	}
	opts := startServer
	if psc := trace.SpanContextFromContext(ctx); psc.IsValid() && !psc.IsRemote() {
		opts = startInternal
	}
	if !start.IsZero() {
		opts = []trace.SpanStartOption{opts[0], trace.WithTimestamp(start)}
	}
	ctx, span := ts.tracer.Start(ctx, name, opts...)
	if !span.IsRecording() {
		return ctx, nil
	}
	return ctx, span
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

// truncateUTF8 returns s cut to at most n bytes, at a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
