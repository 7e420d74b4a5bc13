package traceview

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// The OTLP/JSON shapes this package reads: an ExportTraceServiceRequest
// ({"resourceSpans": [...]}), Jaeger's /api/v3 answer ({"result":
// {"resourceSpans": [...]}}), or several of either, one per line (the OTLP
// file exporter's format).
type otlpDoc struct {
	ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	Result        *struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	} `json:"result"`
}

type otlpResourceSpans struct {
	Resource struct {
		Attributes []otlpKV `json:"attributes"`
	} `json:"resource"`
	ScopeSpans []struct {
		Spans []otlpSpan `json:"spans"`
	} `json:"scopeSpans"`
}

type otlpSpan struct {
	TraceID      string          `json:"traceId"`
	SpanID       string          `json:"spanId"`
	ParentSpanID string          `json:"parentSpanId"`
	Name         string          `json:"name"`
	Start        json.RawMessage `json:"startTimeUnixNano"`
	End          json.RawMessage `json:"endTimeUnixNano"`
	Attributes   []otlpKV        `json:"attributes"`
	Status       struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	} `json:"status"`
}

type otlpKV struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpValue struct {
	String *string          `json:"stringValue"`
	Int    *json.RawMessage `json:"intValue"`
	Double *float64         `json:"doubleValue"`
	Bool   *bool            `json:"boolValue"`
	Array  *struct {
		Values []otlpValue `json:"values"`
	} `json:"arrayValue"`
}

// ParseOTLPJSON reads every span of one or more OTLP/JSON documents.
func ParseOTLPJSON(r io.Reader) ([]Span, error) {
	dec := json.NewDecoder(r)
	var out []Span
	for {
		var doc otlpDoc
		if err := dec.Decode(&doc); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("traceview: reading OTLP/JSON: %w", err)
		}
		rss := doc.ResourceSpans
		if doc.Result != nil {
			rss = append(rss, doc.Result.ResourceSpans...)
		}
		for _, rs := range rss {
			res := attrMap(rs.Resource.Attributes)
			service := ""
			if v, ok := res["service.name"]; ok {
				service = v.AsString()
			}
			var pid int64
			if v, ok := res["process.pid"]; ok {
				pid = v.AsInt64()
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp, err := s.convert()
					if err != nil {
						return out, err
					}
					sp.Service, sp.PID = service, pid
					out = append(out, sp)
				}
			}
		}
	}
}

func (s *otlpSpan) convert() (Span, error) {
	start, err := unixNano(s.Start)
	if err != nil {
		return Span{}, fmt.Errorf("traceview: span %s: start: %w", s.Name, err)
	}
	end, err := unixNano(s.End)
	if err != nil {
		return Span{}, fmt.Errorf("traceview: span %s: end: %w", s.Name, err)
	}
	sp := Span{
		TraceID: normID(s.TraceID), SpanID: normID(s.SpanID), ParentID: normID(s.ParentSpanID),
		Name: s.Name, Start: start, End: end, Attrs: attrMap(s.Attributes),
		StatusMessage: s.Status.Message,
	}
	switch string(s.Status.Code) {
	case "2", `"STATUS_CODE_ERROR"`:
		sp.StatusCode = codes.Error
	case "1", `"STATUS_CODE_OK"`:
		sp.StatusCode = codes.Ok
	}
	return sp, nil
}

// normID returns a span or trace id as lower-case hex. Jaeger writes hex;
// the protobuf JSON mapping writes base64.
func normID(id string) string {
	if id == "" {
		return ""
	}
	if _, err := hex.DecodeString(id); err == nil && (len(id) == 16 || len(id) == 32) {
		return id
	}
	if b, err := base64.StdEncoding.DecodeString(id); err == nil && (len(b) == 8 || len(b) == 16) {
		return hex.EncodeToString(b)
	}
	return id
}

// unixNano reads a time that OTLP/JSON writes as a string or a number of
// nanoseconds.
func unixNano(raw json.RawMessage) (time.Time, error) {
	s := string(raw)
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("not a time in nanoseconds: %q", string(raw))
	}
	return time.Unix(0, n), nil
}

func attrMap(kvs []otlpKV) map[string]attribute.Value {
	m := make(map[string]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.value()
	}
	return m
}

func (v otlpValue) value() attribute.Value {
	switch {
	case v.String != nil:
		return attribute.StringValue(*v.String)
	case v.Int != nil:
		s := string(*v.Int)
		if len(s) >= 2 && s[0] == '"' {
			s = s[1 : len(s)-1]
		}
		n, _ := strconv.ParseInt(s, 10, 64)
		return attribute.Int64Value(n)
	case v.Double != nil:
		return attribute.Float64Value(*v.Double)
	case v.Bool != nil:
		return attribute.BoolValue(*v.Bool)
	case v.Array != nil:
		ss := make([]string, len(v.Array.Values))
		for i, e := range v.Array.Values {
			ss[i] = e.value().String()
		}
		return attribute.StringSliceValue(ss)
	}
	return attribute.Value{}
}
