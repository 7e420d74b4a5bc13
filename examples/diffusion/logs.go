// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// withTraceIDs adds the trace and span ids of the context a record is
// logged with (a phase's, through its Context) as trace_id and span_id, so
// that a log line leads to its trace and the trace's phase. To export the
// records themselves over OTLP, the OpenTelemetry slog bridge does the same
// (see main).
type withTraceIDs struct{ slog.Handler }

func (h withTraceIDs) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h withTraceIDs) WithAttrs(as []slog.Attr) slog.Handler {
	return withTraceIDs{h.Handler.WithAttrs(as)}
}

func (h withTraceIDs) WithGroup(name string) slog.Handler {
	return withTraceIDs{h.Handler.WithGroup(name)}
}
