package traceview

import (
	"encoding/json"
	"io"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// WriteOTLPJSON writes spans as one OTLP/JSON ExportTraceServiceRequest
// (hex ids, as Jaeger and the OTLP file exporter write them), grouped by
// service and process id; [ParseOTLPJSON] reads it back.
func WriteOTLPJSON(w io.Writer, ss []Span) error {
	type res struct {
		service string
		pid     int64
	}
	var order []res
	groups := map[res][]map[string]any{}
	for i := range ss {
		s := &ss[i]
		k := res{s.Service, s.PID}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], spanJSON(s))
	}
	var rss []any
	for _, k := range order {
		var rattrs []any
		if k.service != "" {
			rattrs = append(rattrs, kvJSON("service.name", attribute.StringValue(k.service)))
		}
		if k.pid != 0 {
			rattrs = append(rattrs, kvJSON("process.pid", attribute.Int64Value(k.pid)))
		}
		rss = append(rss, map[string]any{
			"resource":   map[string]any{"attributes": rattrs},
			"scopeSpans": []any{map[string]any{"spans": groups[k]}},
		})
	}
	return json.NewEncoder(w).Encode(map[string]any{"resourceSpans": rss})
}

func spanJSON(s *Span) map[string]any {
	var kvs []any
	for k, v := range s.Attrs {
		kvs = append(kvs, kvJSON(k, v))
	}
	m := map[string]any{
		"traceId": s.TraceID, "spanId": s.SpanID, "name": s.Name,
		"startTimeUnixNano": strconv.FormatInt(s.Start.UnixNano(), 10),
		"endTimeUnixNano":   strconv.FormatInt(s.End.UnixNano(), 10),
		"attributes":        kvs,
	}
	if s.ParentID != "" {
		m["parentSpanId"] = s.ParentID
	}
	switch s.StatusCode {
	case codes.Error:
		m["status"] = map[string]any{"code": 2, "message": s.StatusMessage}
	case codes.Ok:
		m["status"] = map[string]any{"code": 1}
	}
	return m
}

func kvJSON(k string, v attribute.Value) map[string]any {
	var val map[string]any
	switch v.Type() {
	case attribute.BOOL:
		val = map[string]any{"boolValue": v.AsBool()}
	case attribute.INT64:
		val = map[string]any{"intValue": strconv.FormatInt(v.AsInt64(), 10)}
	case attribute.FLOAT64:
		val = map[string]any{"doubleValue": v.AsFloat64()}
	default:
		val = map[string]any{"stringValue": v.String()}
	}
	return map[string]any{"key": k, "value": val}
}
