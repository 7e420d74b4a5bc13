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
// (markError), then the end at a given time or now (endSpanAt); a
// request's spans end through Request.endSpan, which does both.

// endSpan ends span, the request's (or stage's) or one of its phases', at
// at, or now when at is zero; a non-nil err marks it failed first.
func (r *Request) endSpan(span trace.Span, at time.Time, err error) {
	if err != nil {
		r.markError(span, err)
	}
	endSpanAt(span, at)
}

// markError sets status Error with err's message and error.type on span,
// both bounded: a 10 MB error must cost neither a batch nor a log line.
func (r *Request) markError(span trace.Span, err error) {
	markError(r.in, span, err)
}

func markError(in *Instrumenter, span trace.Span, err error) {
	span.SetStatus(codes.Error, in.str(err.Error()))
	span.SetAttributes(omniattr.ErrorType(in.errorType(err)))
}

// endSpanAt ends s at at, or now (the SDK's clock) when at is zero.
func endSpanAt(s trace.Span, at time.Time) {
	if at.IsZero() {
		s.End()
		return
	}
	s.End(trace.WithTimestamp(at))
}

// exported says the tier receives span: it is sampled (a span that is
// not recorded is not sampled either).
func exported(span trace.Span) bool {
	return span != nil && span.SpanContext().IsSampled()
}
