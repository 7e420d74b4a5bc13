package otelomni

import (
	"context"
	"fmt"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// Stage is the span of one stage that served a request in a multi-stage
// pipeline (omni.stage), a child of the request span, and the phases
// recorded under it. A stage usually runs in a process of its own: start it
// from the context extracted from the stage message ([Instrumenter.Extract]),
// which holds the request span.
//
// Its methods are safe for concurrent use, and safe (doing nothing) on the
// Stage that [Instrumenter.StartStage] returns when nothing is recorded, on a
// nil *Stage and on the zero Stage.
type Stage struct {
	scope
	// parent holds the request span: the parent of the transfers this
	// stage receives.
	parent  context.Context
	stageID int
}

var noStage = &Stage{}

// StartStage starts the span of one stage (omni.stage) under the request
// span that ctx holds, local or remote, with the stage's attributes. It is a
// SERVER span under a remote parent (the request span in another process),
// INTERNAL under a local one. When nothing is recorded it allocates nothing
// and returns ctx unchanged.
func (in *Instrumenter) StartStage(ctx context.Context, info StageInfo) (context.Context, *Stage) {
	if ctx == nil {
		ctx = context.Background()
	}
	ts, ms := in.tracer(), in.meters()
	if !ts.enabled && ms.inst == nil {
		return ctx, noStage
	}
	sctx, span := ts.startScope(ctx, spans.StageSpanName, info.Start)
	if span == nil && ms.inst == nil {
		return sctx, noStage
	}
	if info.Type == "" {
		info.Type = attrs.StageOther
	}
	s := &Stage{parent: ctx, stageID: info.ID}
	s.init(in, ts.tracer, span, sctx, ms.inst, info.Model, info.Type, info.Start)
	s.kind = kindStage
	s.id = fmt.Sprintf("stage %d %s", info.ID, info.Name)
	if span != nil {
		span.SetAttributes(info.appendAttrs(s.attrBuf[:0])...)
	}
	return sctx, s
}

// SetUsage records the stage's token counts (gen_ai.usage.input_tokens and
// gen_ai.usage.output_tokens), once known.
func (s *Stage) SetUsage(inputTokens, outputTokens int) {
	s.SetAttributes(attrs.InputTokens(inputTokens), attrs.OutputTokens(outputTokens))
}
