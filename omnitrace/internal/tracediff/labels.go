// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"
	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// What a span is, for the rows it makes.

// singleStage names the stage of a single-stage request: its
// omni.stage.type, else what its phases are.
func singleStage(req *traceview.Node) string {
	if t := req.Span.Str(string(attrs.StageTypeKey)); t != "" {
		return label(t)
	}
	for _, c := range req.Children {
		if p, ok := plan.LookupSpanName(c.Span.Name); ok {
			if p >= plan.LLMQueue && p <= plan.LLMDecode {
				return attrs.StageLLM
			}
			if p < plan.LLMQueue {
				return attrs.StageDiffusion
			}
		}
	}
	return stageNone
}

func phaseOf(c *traceview.Span) string {
	if p, ok := plan.LookupSpanName(c.Name); ok {
		return p.String()
	}
	if c.Name == plan.OutputSpanName {
		return PhaseOutput
	}
	return display(c.Name)
}

func phaseRank(c *traceview.Span) int {
	if p, ok := plan.LookupSpanName(c.Name); ok {
		return int(p) + 1
	}
	if c.Name == plan.OutputSpanName {
		return plan.NumPhases + 2
	}
	return plan.NumPhases + 3
}

func lengthUnmeasured(s *traceview.Span) bool {
	v, _ := s.Bool(string(omnikeys.LengthUnmeasured))
	return v
}

func bad(s *traceview.Span) bool { return s.End.Before(s.Start) }

// maxLabel bounds the strings of a row's key, in bytes.
const maxLabel = 64

// display bounds a string from the trace for a row's key: valid UTF-8,
// no control characters.
func display(s string) string { return sanitize.Display(s, maxLabel) }

// label is display, "-" for nothing.
func label(s string) string {
	if s == "" {
		return stageNone
	}
	return display(s)
}
