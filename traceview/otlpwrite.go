package traceview

import (
	"encoding/hex"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// The writer encodes the OTLP/JSON form of opentelemetry-proto's
// ExportTraceServiceRequest (go.opentelemetry.io/proto/otlp) by hand: the
// protobuf JSON mapping through protojson would write ids in base64 where
// the OTLP/JSON specification wants hex, and costs about four times more
// per span (BenchmarkWriteOTLPJSON against BenchmarkProtojsonOTLP: 2 and 8
// µs per span on a 2-vCPU machine). Tests read every document back through
// protojson ([ParseOTLPJSON]) and a real OTLP/HTTP receiver.

// WriteOTLPJSON writes spans as one OTLP/JSON ExportTraceServiceRequest on
// one line (hex ids, as the OTLP/JSON specification and Jaeger write
// them), grouped by service and process id;
// [ParseOTLPJSON] reads it back.
func WriteOTLPJSON(w io.Writer, ss []Span) error {
	type res struct {
		service string
		pid     int64
	}
	var order []res
	groups := map[res][]int{}
	for i := range ss {
		k := res{ss[i].Service, ss[i].PID}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	b := []byte(`{"resourceSpans":[`)
	for gi, k := range order {
		if gi > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"resource":{"attributes":[`...)
		n := 0
		if k.service != "" {
			b = appendKV(b, "service.name", attribute.StringValue(k.service))
			n++
		}
		if k.pid != 0 {
			if n > 0 {
				b = append(b, ',')
			}
			b = appendKV(b, "process.pid", attribute.Int64Value(k.pid))
		}
		b = append(b, `]},"scopeSpans":[{"spans":[`...)
		for j, i := range groups[k] {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendViewSpan(b, &ss[i])
		}
		b = append(b, `]}]}`...)
	}
	b = append(b, "]}\n"...)
	_, err := w.Write(b)
	return err
}

func appendViewSpan(b []byte, s *Span) []byte {
	b = append(b, '{')
	// An id that is not hex of its size cannot be written as one: it is
	// left out rather than written as something no reader accepts.
	b = appendHexField(b, `"traceId":`, s.TraceID, 32)
	b = appendHexField(b, `"spanId":`, s.SpanID, 16)
	b = appendHexField(b, `"parentSpanId":`, s.ParentID, 16)
	b = append(b, `"name":`...)
	b = appendJSONString(b, s.Name)
	b = appendTimes(b, s.Start.UnixNano(), s.End.UnixNano())
	b = append(b, `,"attributes":[`...)
	keys := make([]string, 0, len(s.Attrs))
	for k := range s.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a file that does not change from run to run
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKV(b, k, s.Attrs[k])
	}
	b = append(b, ']')
	b = appendStatus(b, s.StatusCode, s.StatusMessage)
	return append(b, '}')
}

func appendHexField(b []byte, field, id string, size int) []byte {
	if len(id) != size {
		return b
	}
	if _, err := hex.DecodeString(id); err != nil {
		return b
	}
	b = append(b, field...)
	b = appendJSONString(b, id)
	return append(b, ',')
}

func appendTimes(b []byte, start, end int64) []byte {
	b = append(b, `,"startTimeUnixNano":"`...)
	b = strconv.AppendUint(b, nanos(start), 10)
	b = append(b, `","endTimeUnixNano":"`...)
	b = strconv.AppendUint(b, nanos(end), 10)
	return append(b, '"')
}

// nanos is a time for OTLP's unsigned field: before 1970 is not a time
// OTLP carries, and 0 says "unknown".
func nanos(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func appendStatus(b []byte, c codes.Code, msg string) []byte {
	switch c {
	case codes.Error:
		b = append(b, `,"status":{"code":2`...)
		if msg != "" {
			b = append(b, `,"message":`...)
			b = appendJSONString(b, msg)
		}
		return append(b, '}')
	case codes.Ok:
		return append(b, `,"status":{"code":1}`...)
	}
	return b
}

func appendKV(b []byte, k string, v attribute.Value) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, k)
	b = append(b, `,"value":`...)
	b = appendValue(b, v)
	return append(b, '}')
}

func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return append(strconv.AppendBool(append(b, `{"boolValue":`...), v.AsBool()), '}')
	case attribute.INT64:
		b = strconv.AppendInt(append(b, `{"intValue":"`...), v.AsInt64(), 10)
		return append(b, `"}`...)
	case attribute.FLOAT64:
		return append(appendDouble(append(b, `{"doubleValue":`...), v.AsFloat64()), '}')
	case attribute.STRING:
		return append(appendJSONString(append(b, `{"stringValue":`...), v.AsString()), '}')
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE:
		b = append(b, `{"arrayValue":{"values":[`...)
		switch v.Type() {
		case attribute.BOOLSLICE:
			for i, x := range v.AsBoolSlice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.BoolValue(x))
			}
		case attribute.INT64SLICE:
			for i, x := range v.AsInt64Slice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.Int64Value(x))
			}
		case attribute.FLOAT64SLICE:
			for i, x := range v.AsFloat64Slice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.Float64Value(x))
			}
		default:
			for i, x := range v.AsStringSlice() {
				b = appendSep(b, i)
				b = appendValue(b, attribute.StringValue(x))
			}
		}
		return append(b, `]}}`...)
	}
	return append(b, `{}`...)
}

func appendSep(b []byte, i int) []byte {
	if i > 0 {
		return append(b, ',')
	}
	return b
}

// appendDouble writes a double as the protobuf JSON mapping does: a
// number, or the strings "NaN", "Infinity" and "-Infinity".
func appendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendJSONString writes s as a JSON string; each invalid UTF-8 sequence
// becomes U+FFFD, so that the output is always valid JSON and valid OTLP.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"
