// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
)

// How a span otelomni makes ends, whichever it is (a phase, a request or
// stage, a batch, an engine): a failure's status and error.type
// (markError), then the end at the time otelomni read or was given
// (endSpanAt); a request's spans end through Request.endSpan, which does
// both.

// endSpan ends span, the request's (or stage's) or one of its phases', at
// at; a non-nil err marks it failed first.
func (r *Request) endSpan(span trace.Span, at time.Time, err error) {
	if err != nil {
		markError(r.in, span, err)
	}
	endSpanAt(span, at)
}

// markError sets status Error with err's message and error.type on span,
// both bounded: a 10 MB error must cost neither a batch nor a log line.
func markError(in *Instrumenter, span trace.Span, err error) {
	span.SetStatus(codes.Error, in.str(err.Error()))
	span.SetAttributes(omniattr.ErrorType(in.errorType(err)))
}

// endSpanAt ends s at at. Every time otelomni ends a span at is one it read
// (or was given): never the SDK's own clock, so that the span lasts
// exactly what its measurement records.
func endSpanAt(s trace.Span, at time.Time) {
	s.End(trace.WithTimestamp(at))
}
