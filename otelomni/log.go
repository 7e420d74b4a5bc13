// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/trace"
)

// Keys of the attributes the log handler adds.
const (
	// logTraceIDKey is the trace id of the request a record was logged in.
	logTraceIDKey = "trace_id"
	// logSpanIDKey is the span id of the innermost span a record was logged
	// in: the phase's, when logged with a phase's context.
	logSpanIDKey = "span_id"
)

// NewLogHandler returns a log/slog handler that adds two string attributes
// at the top level of every record logged with a context that holds a span,
// "trace_id" (the trace's id, 32 hex digits) and "span_id" (the innermost
// span's id, 16 hex digits), and passes the record on to next. Log with
// the context of the innermost phase ([ActivePhase.Context]) and the
// record carries that phase's span id; a record logged outside any
// request carries neither. Search logs by trace_id to see what a request
// logged, and jump from a log line to its trace.
//
// A nil next (or a nil pointer, such as a nil *slog.JSONHandler) is taken
// as a text handler writing to standard error (slog.NewTextHandler(os.Stderr,
// nil)): records are never lost, and no call panics.
//
// To export the records themselves over OTLP, beside the trace, log
// through the OpenTelemetry slog bridge too
// (go.opentelemetry.io/contrib/bridges/otelslog): with OTEL_LOGS_EXPORTER
// set, otelsetup.Setup installs the global logger provider it exports
// through, and the bridge correlates records the same way.
func NewLogHandler(next slog.Handler) slog.Handler {
	if next == nil || panics(func() { next.Enabled(context.Background(), slog.LevelInfo) }) {
		next = slog.NewTextHandler(os.Stderr, nil)
	}
	return &logHandler{next: next, base: next}
}

// logHandler adds the ids at the top level of a record, whatever groups
// were opened: next has every WithAttrs and WithGroup applied; base has
// those before the first group, and ops the rest, to replay after the ids.
type logHandler struct {
	next, base slog.Handler
	ops        []func(slog.Handler) slog.Handler
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.next.Handle(context.Background(), r)
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	ids := [2]slog.Attr{slog.String(logTraceIDKey, sc.TraceID().String()), slog.String(logSpanIDKey, sc.SpanID().String())}
	if len(h.ops) == 0 {
		r.AddAttrs(ids[:]...)
		return h.next.Handle(ctx, r)
	}
	// In a group: the ids go before it.
	next := h.base.WithAttrs(ids[:])
	for _, op := range h.ops {
		next = op(next)
	}
	return next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := &logHandler{next: h.next.WithAttrs(as), base: h.base, ops: h.ops}
	if len(h.ops) == 0 {
		out.base = out.next
	} else {
		out.ops = append(h.ops[:len(h.ops):len(h.ops)], func(n slog.Handler) slog.Handler { return n.WithAttrs(as) })
	}
	return out
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &logHandler{next: h.next.WithGroup(name), base: h.base,
		ops: append(h.ops[:len(h.ops):len(h.ops)], func(n slog.Handler) slog.Handler { return n.WithGroup(name) })}
}
