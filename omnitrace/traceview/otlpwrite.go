// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"encoding/hex"
	"io"
	"sort"

	"github.com/otelomni/otelomni/omnitrace/internal/otlpvalue"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/codes"
)

// WriteOTLPJSON writes spans as one OTLP/JSON TracesData on one line, as
// the OpenTelemetry Collector's file exporter writes it (pdata's
// ptrace.JSONMarshaler: hex ids, as the OTLP/JSON specification and
// Jaeger write them), grouped by service and process id; [ReadOTLPJSON]
// reads it back. An id that is not hex of its size is left out. No spans
// write nothing.
func WriteOTLPJSON(w io.Writer, ss []Span) error {
	if len(ss) == 0 {
		// No document: [ReadOTLPJSON] refuses one that holds no spans.
		return nil
	}
	type res struct {
		service string
		pid     int64
	}
	td := ptrace.NewTraces()
	groups := map[res]ptrace.SpanSlice{}
	for i := range ss {
		k := res{ss[i].Service, ss[i].PID}
		spans, ok := groups[k]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			if k.service != "" {
				rs.Resource().Attributes().PutStr("service.name", k.service)
			}
			if k.pid != 0 {
				rs.Resource().Attributes().PutInt("process.pid", k.pid)
			}
			spans = rs.ScopeSpans().AppendEmpty().Spans()
			groups[k] = spans
		}
		toSpan(spans.AppendEmpty(), &ss[i])
	}
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func toSpan(d ptrace.Span, s *Span) {
	var tid pcommon.TraceID
	if hexID(tid[:], s.TraceID) {
		d.SetTraceID(tid)
	}
	var sid pcommon.SpanID
	if hexID(sid[:], s.SpanID) {
		d.SetSpanID(sid)
	}
	var pid pcommon.SpanID
	if hexID(pid[:], s.ParentID) {
		d.SetParentSpanID(pid)
	}
	d.SetName(s.Name)
	d.SetStartTimestamp(nanos(s.Start.UnixNano()))
	d.SetEndTimestamp(nanos(s.End.UnixNano()))
	keys := make([]string, 0, len(s.Attrs))
	for k := range s.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a file that does not change from run to run
	m := d.Attributes()
	m.EnsureCapacity(len(keys))
	for _, k := range keys {
		otlpvalue.Set(m.PutEmpty(k), s.Attrs[k], -1)
	}
	for _, l := range s.Links {
		dl := d.Links().AppendEmpty()
		if hexID(tid[:], l.TraceID) {
			dl.SetTraceID(tid)
		}
		if hexID(sid[:], l.SpanID) {
			dl.SetSpanID(sid)
		}
	}
	switch s.StatusCode {
	case codes.Error:
		d.Status().SetCode(ptrace.StatusCodeError)
		d.Status().SetMessage(s.StatusMessage)
	case codes.Ok:
		d.Status().SetCode(ptrace.StatusCodeOk)
	}
}

// hexID decodes id, hex of len(dst) bytes, into dst; false, dst zero, for
// anything else.
func hexID(dst []byte, id string) bool {
	clear(dst)
	if len(id) != 2*len(dst) {
		return false
	}
	if _, err := hex.Decode(dst, []byte(id)); err != nil {
		clear(dst)
		return false
	}
	return true
}

// nanos is a time for OTLP's unsigned field: before 1970 is not a time
// OTLP carries, and 0 says "unknown".
func nanos(n int64) pcommon.Timestamp {
	if n < 0 {
		return 0
	}
	return pcommon.Timestamp(n)
}
