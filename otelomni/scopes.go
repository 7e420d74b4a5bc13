// Code written out by hand for each scope type: Request and Stage expose
// the same phase methods, nil-safe, with their own documentation.

package otelomni

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/spans"
)

func (r *Request) sc() *scope {
	if r == nil {
		return nil
	}
	return &r.scope
}

// StartPhase starts phase p now, under its parent in the tree: kv_recv, forward and
// vae_decode under exec (once exec has started), the other phases directly
// under the request span. kv adds attributes, such as attrs.OutputIndex and
// attrs.OutputFinal for one output of a streaming request, or attrs.BatchSize
// on exec. A phase never started makes no span; a phase still open when the request
// ends is ended with it. Denoise steps use StartStep.
func (r *Request) StartPhase(p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	// Written out so that it inlines: a disabled phase costs a nil check.
	if r == nil || !r.on {
		return ActivePhase{}
	}
	return r.startLive(p, kv)
}

// StartStep starts the span of denoise step i (from 0) under forward. It does
// nothing unless per-step spans are on (WithDenoiseSteps).
func (r *Request) StartStep(i int) ActivePhase { return r.sc().startStepAPI(i) }

// Run runs fn inside phase p: the phase starts before fn and ends when it
// returns; fn gets ctx with the phase span in it. An error from fn marks the
// phase failed and is returned. A panic in fn marks the phase failed, ends
// it, and is re-raised.
func (r *Request) Run(ctx context.Context, p spans.Phase, fn func(context.Context) error) error {
	return r.sc().run(ctx, p, fn)
}

// Record turns a diffusion timing record, as an engine that timed itself reports
// it, into phase spans with the record's own start and end times: the same
// spans as the live path. A phase the record did not measure makes no span.
// A bad measurement (end before start, zero time) makes no span and is
// reported in the returned error, which names each bad phase
// (*spans.PhaseError); the other phases are still recorded.
func (r *Request) Record(rec *spans.DiffusionRecord) error { return r.sc().record(rec) }

// RecordPhase records one phase measured elsewhere (the scheduler's queue wait,
// say) as a span with the interval's own times. An unmeasured interval makes
// no span and no error; a bad one makes no span and returns a
// *spans.PhaseError.
func (r *Request) RecordPhase(p spans.Phase, iv spans.Interval, kv ...attribute.KeyValue) error {
	return r.sc().recordPhase(p, iv, kv...)
}

// RecordLLM turns an LLM stage's timing record into its phase spans (llm.queue,
// llm.prefill, llm.decode), each only when measured.
func (r *Request) RecordLLM(rec *spans.LLMRecord) error { return r.sc().recordLLM(rec) }

// MarkLLM records LLM event e now. Each LLM phase is emitted as soon as both
// of its ends have been seen: llm.queue at the first LLMScheduled after
// LLMQueued, llm.prefill at LLMFirstToken, llm.decode at LLMLastToken. A
// phase whose start was never seen (a request whose queued event was lost)
// makes no span. Only the first LLMScheduled counts.
func (r *Request) MarkLLM(e LLMEvent) error { return r.sc().markLLM(e, time.Now()) }

// MarkLLMAt is MarkLLM with the time the engine stamped the event; a zero t is
// refused.
func (r *Request) MarkLLMAt(e LLMEvent, t time.Time) error { return r.sc().markLLM(e, t) }

// EmitOutput makes the omni.output span of the next output (an audio chunk, a text
// chunk) at a stage that is not a diffusion stage: from the previous output,
// or the start of the request, to now, with omni.output.index and
// omni.output.final. It returns the output's index, or -1 when nothing is
// recorded.
func (r *Request) EmitOutput(final bool) int { return r.sc().emitOutput(final) }

// RecordOutput makes the omni.output span of output i with its own interval.
func (r *Request) RecordOutput(i int, iv spans.Interval, final bool) error {
	return r.sc().recordOutput(i, iv, final)
}

// SetAttributes records kv on the request span, such as counts known only at the end.
func (r *Request) SetAttributes(kv ...attribute.KeyValue) { r.sc().setAttributes(kv...) }

// Span returns the request span; a non-recording span when nothing is recorded.
func (r *Request) Span() trace.Span { return r.sc().spanOrNoop() }

// End ends the request span now. A non-nil err marks it failed: status Error with
// err's message, and error.type (see ErrClientAbort and friends; other errors
// carry their own type). Phases still open are ended first, at the same
// moment. Ending twice does nothing more.
func (r *Request) End(err error) {
	if r == nil || !r.on {
		return
	}
	r.end(time.Time{}, err)
}

// EndAt ends the request span at t, for timing handed over after the fact. A zero t,
// or one before a recorded phase ended, would make the tree inconsistent:
// the span then ends at its latest recorded phase end and EndAt returns an
// error.
func (r *Request) EndAt(t time.Time, err error) error { return r.sc().endAt(t, err) }

func (s *Stage) sc() *scope {
	if s == nil {
		return nil
	}
	return &s.scope
}

// StartPhase starts phase p now, under its parent in the tree: kv_recv, forward and
// vae_decode under exec (once exec has started), the other phases directly
// under the stage span. kv adds attributes, such as attrs.OutputIndex and
// attrs.OutputFinal for one output of a streaming request, or attrs.BatchSize
// on exec. A phase never started makes no span; a phase still open when the stage
// ends is ended with it. Denoise steps use StartStep.
func (s *Stage) StartPhase(p spans.Phase, kv ...attribute.KeyValue) ActivePhase {
	// Written out so that it inlines: a disabled phase costs a nil check.
	if s == nil || !s.on {
		return ActivePhase{}
	}
	return s.startLive(p, kv)
}

// StartStep starts the span of denoise step i (from 0) under forward. It does
// nothing unless per-step spans are on (WithDenoiseSteps).
func (s *Stage) StartStep(i int) ActivePhase { return s.sc().startStepAPI(i) }

// Run runs fn inside phase p: the phase starts before fn and ends when it
// returns; fn gets ctx with the phase span in it. An error from fn marks the
// phase failed and is returned. A panic in fn marks the phase failed, ends
// it, and is re-raised.
func (s *Stage) Run(ctx context.Context, p spans.Phase, fn func(context.Context) error) error {
	return s.sc().run(ctx, p, fn)
}

// Record turns a diffusion timing record, as an engine that timed itself reports
// it, into phase spans with the record's own start and end times: the same
// spans as the live path. A phase the record did not measure makes no span.
// A bad measurement (end before start, zero time) makes no span and is
// reported in the returned error, which names each bad phase
// (*spans.PhaseError); the other phases are still recorded.
func (s *Stage) Record(rec *spans.DiffusionRecord) error { return s.sc().record(rec) }

// RecordPhase records one phase measured elsewhere (the scheduler's queue wait,
// say) as a span with the interval's own times. An unmeasured interval makes
// no span and no error; a bad one makes no span and returns a
// *spans.PhaseError.
func (s *Stage) RecordPhase(p spans.Phase, iv spans.Interval, kv ...attribute.KeyValue) error {
	return s.sc().recordPhase(p, iv, kv...)
}

// RecordLLM turns an LLM stage's timing record into its phase spans (llm.queue,
// llm.prefill, llm.decode), each only when measured.
func (s *Stage) RecordLLM(rec *spans.LLMRecord) error { return s.sc().recordLLM(rec) }

// MarkLLM records LLM event e now. Each LLM phase is emitted as soon as both
// of its ends have been seen: llm.queue at the first LLMScheduled after
// LLMQueued, llm.prefill at LLMFirstToken, llm.decode at LLMLastToken. A
// phase whose start was never seen (a request whose queued event was lost)
// makes no span. Only the first LLMScheduled counts.
func (s *Stage) MarkLLM(e LLMEvent) error { return s.sc().markLLM(e, time.Now()) }

// MarkLLMAt is MarkLLM with the time the engine stamped the event; a zero t is
// refused.
func (s *Stage) MarkLLMAt(e LLMEvent, t time.Time) error { return s.sc().markLLM(e, t) }

// EmitOutput makes the omni.output span of the next output (an audio chunk, a text
// chunk) at a stage that is not a diffusion stage: from the previous output,
// or the start of the stage, to now, with omni.output.index and
// omni.output.final. It returns the output's index, or -1 when nothing is
// recorded.
func (s *Stage) EmitOutput(final bool) int { return s.sc().emitOutput(final) }

// RecordOutput makes the omni.output span of output i with its own interval.
func (s *Stage) RecordOutput(i int, iv spans.Interval, final bool) error {
	return s.sc().recordOutput(i, iv, final)
}

// SetAttributes records kv on the stage span, such as counts known only at the end.
func (s *Stage) SetAttributes(kv ...attribute.KeyValue) { s.sc().setAttributes(kv...) }

// Span returns the stage span; a non-recording span when nothing is recorded.
func (s *Stage) Span() trace.Span { return s.sc().spanOrNoop() }

// End ends the stage span now. A non-nil err marks it failed: status Error with
// err's message, and error.type (see ErrClientAbort and friends; other errors
// carry their own type). Phases still open are ended first, at the same
// moment. Ending twice does nothing more.
func (s *Stage) End(err error) {
	if s == nil || !s.on {
		return
	}
	s.end(time.Time{}, err)
}

// EndAt ends the stage span at t, for timing handed over after the fact. A zero t,
// or one before a recorded phase ended, would make the tree inconsistent:
// the span then ends at its latest recorded phase end and EndAt returns an
// error.
func (s *Stage) EndAt(t time.Time, err error) error { return s.sc().endAt(t, err) }
