// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// defaultLimits are the limits of an import without OTEL_* limits set.
var defaultLimits = emit.Limits{Attributes: sdktrace.DefaultAttributeCountLimit, ValueLength: 4096}

// The times a span can carry.
var minTime, maxTime = plan.MinTime, plan.MaxTime

// emitStubs emits the requests with an Emitter and returns their spans as
// the SDK's read-only spans, for tests that look at spans the SDK's way;
// the first error stops it.
func emitStubs(anchor time.Time, reqs ...*forms.Request) ([]sdktrace.ReadOnlySpan, error) {
	em := emit.NewEmitter(defaultLimits, nil)
	var out []sdktrace.ReadOnlySpan
	for _, r := range reqs {
		ss := ptrace.NewSpanSlice()
		if err := em.Emit(r, anchor, &ss); err != nil {
			return out, err
		}
		for _, s := range ss.All() {
			out = append(out, stubOf(s).Snapshot())
		}
	}
	return out, nil
}

// stubOf is s as the SDK's test span.
func stubOf(s ptrace.Span) tracetest.SpanStub {
	tid, sid := trace.TraceID(s.TraceID()), trace.SpanID(s.SpanID())
	st := tracetest.SpanStub{
		Name:              s.Name(),
		SpanContext:       trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(s.Flags() & 0xff)}),
		SpanKind:          trace.SpanKind(s.Kind()),
		StartTime:         s.StartTimestamp().AsTime(),
		EndTime:           s.EndTimestamp().AsTime(),
		DroppedAttributes: int(s.DroppedAttributesCount()),
	}
	if p := s.ParentSpanID(); !p.IsEmpty() {
		st.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID(p), TraceFlags: trace.FlagsSampled})
	}
	for k, v := range s.Attributes().All() {
		st.Attributes = append(st.Attributes, attribute.KeyValue{Key: attribute.Key(k), Value: valueOf(v)})
	}
	return st
}

func valueOf(v pcommon.Value) attribute.Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return attribute.StringValue(v.Str())
	case pcommon.ValueTypeBool:
		return attribute.BoolValue(v.Bool())
	case pcommon.ValueTypeInt:
		return attribute.Int64Value(v.Int())
	case pcommon.ValueTypeDouble:
		return attribute.Float64Value(v.Double())
	case pcommon.ValueTypeSlice:
		var ss []string
		for _, x := range v.Slice().All() {
			ss = append(ss, x.AsString())
		}
		return attribute.StringSliceValue(ss)
	}
	return attribute.StringValue(v.AsString())
}
