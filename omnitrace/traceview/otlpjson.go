// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// maxDocument bounds one OTLP/JSON document (one TracesData, or one
// Jaeger answer): a reader never holds more than this of its input at
// once. A variable for tests.
var maxDocument int64 = 256 << 20

// maxErrorText bounds the part of a decoding error quoted back: an error
// about a 50 MB document is no message for a terminal.
const maxErrorText = 300

// errOTLPJSON is wrapped by every error that malformed OTLP/JSON causes.
var errOTLPJSON = errors.New("traceview: reading OTLP/JSON")

// ReadOTLPJSON reads the spans of one or more OTLP/JSON documents, one
// after another, and hands the spans of each to fn as soon as it is read:
// TracesData (or ExportTraceServiceRequest) objects as the OpenTelemetry
// Collector's file exporter writes them, one a line, and Jaeger's /api/v3
// answers, which wrap one in {"result": ...}. Each document is at most
// 256 MiB, and is decoded by the Collector's own OTLP/JSON decoding
// (pdata's ptrace.JSONUnmarshaler): trace and span ids in hex, as the
// OTLP/JSON specification writes them.
//
// A span whose times OTLP cannot mean (after 2262) is skipped and the rest
// of its document read; a document that is not OTLP, or not JSON, is
// skipped and the reading goes on at the next line; a document cut short
// at the end of the input (a truncated last line) ends the reading. Each
// of these is said, bounded, in the error returned once the input is read,
// which wraps errOTLPJSON; an error from fn stops the reading and is
// returned.
func ReadOTLPJSON(r io.Reader, fn func([]Span) error) error {
	lr := &limitedReader{r: r}
	dec := json.NewDecoder(lr)
	var skip skipCount
	var bad badDocs
	for n := 1; ; n++ {
		lr.left = maxDocument
		var raw json.RawMessage
		err := dec.Decode(&raw)
		switch {
		case err == io.EOF:
			return errors.Join(skip.err(), bad.err())
		case err != nil && lr.left <= 0:
			// Too large to read: skipped to the next line, as a malformed
			// one.
			bad.add(n, fmt.Errorf("larger than %d bytes", maxDocument))
			lr.left = 1 << 62
			var ok bool
			if dec, ok = nextLine(dec, lr); !ok {
				return errors.Join(skip.err(), bad.err())
			}
			continue
		case err != nil:
			var syntax *json.SyntaxError
			if !errors.As(err, &syntax) {
				// The input ends inside a document (a file cut short), or
				// cannot be read: what came before it stands.
				return errors.Join(skip.err(), bad.err(), fmt.Errorf("%w: document %d: %s", errOTLPJSON, n, sanitize.String(err.Error(), maxErrorText)))
			}
			// A malformed document: the next may begin on the next line,
			// as the file exporter writes one a line.
			bad.add(n, err)
			var ok bool
			if dec, ok = nextLine(dec, lr); !ok {
				return errors.Join(skip.err(), bad.err()) // nothing after it
			}
			continue
		}
		ss, derr := decodeDocument(raw)
		if derr != nil {
			var partial *skippedSpans
			if !errors.As(derr, &partial) {
				bad.add(n, derr) // well-formed JSON, but no OTLP: the next may be
				continue
			}
			skip.add(n, partial)
		}
		if err := fn(ss); err != nil {
			return err
		}
	}
}

// nextLine returns a decoder of what follows the line of the document dec
// could not read, holding no more than a buffer of that line; false when
// nothing follows. What dec left may begin with the line end after the
// previous document: the bad document's line is the first not blank.
func nextLine(dec *json.Decoder, r io.Reader) (*json.Decoder, bool) {
	rest := bufio.NewReader(io.MultiReader(dec.Buffered(), r))
	for {
		c, err := rest.ReadByte()
		if err != nil {
			return nil, false
		}
		if c != '\n' && c != '\r' && c != ' ' && c != '\t' {
			break
		}
	}
	for {
		_, err := rest.ReadSlice('\n')
		if err == nil {
			return json.NewDecoder(rest), true
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, false
		}
	}
}

// badDocs counts the documents that could not be read at all.
type badDocs struct {
	n, first int
	err1     error
}

func (b *badDocs) add(doc int, err error) {
	if b.n == 0 {
		b.first, b.err1 = doc, err
	}
	b.n++
}

func (b *badDocs) err() error {
	if b.n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s not read (the first, document %d: %s)", errOTLPJSON, plural(b.n, "document"), b.first, sanitize.String(b.err1.Error(), maxErrorText))
}

// skippedSpans reports the spans of a document left out, and why the first
// was.
type skippedSpans struct {
	n     int
	first error
}

func (e *skippedSpans) Error() string {
	return fmt.Sprintf("%s skipped (%v)", plural(e.n, "span"), e.first)
}

// skipCount adds up the spans skipped over the documents read.
type skipCount struct {
	spans, docs, firstDoc int
	first                 error
}

func (c *skipCount) add(doc int, s *skippedSpans) {
	if c.first == nil {
		c.first, c.firstDoc = s.first, doc
	}
	c.spans += s.n
	c.docs++
}

func (c *skipCount) err() error {
	if c.spans == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s skipped in %s (the first, in document %d: %s)", errOTLPJSON,
		plural(c.spans, "span"), plural(c.docs, "document"), c.firstDoc, sanitize.String(c.first.Error(), maxErrorText))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// limitedReader fails once more than left bytes are read, so that one
// endless document cannot take all memory.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errors.New("document too large")
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// decodeDocument decodes one document: a TracesData, or Jaeger's wrapper
// of one.
func decodeDocument(raw []byte) ([]Span, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var wrapper struct {
		Result json.RawMessage `json:"result"`
	}
	if bytes.Contains(raw, []byte(`"result"`)) {
		if err := json.Unmarshal(raw, &wrapper); err == nil && len(wrapper.Result) > 0 && !bytes.Equal(wrapper.Result, []byte("null")) {
			raw = wrapper.Result
		}
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(raw)
	if err != nil {
		return nil, err
	}
	if td.ResourceSpans().Len() == 0 && !bytes.Contains(raw, []byte(`"resourceSpans"`)) && !bytes.Contains(raw, []byte(`"resource_spans"`)) {
		// No OTLP at all: {"foo": 1}, or a backend's {"error": {...}}.
		return nil, fmt.Errorf("no resourceSpans in %s", sanitize.String(string(raw), 200))
	}
	return fromTraces(td)
}

// fromTraces converts OTLP traces to spans. A span whose times OTLP
// cannot mean (after 2262) is skipped, and the error says how many were;
// the other spans are returned. A span that ends before it starts is
// kept: that is the views' to report.
func fromTraces(td ptrace.Traces) ([]Span, error) {
	out := make([]Span, 0, td.SpanCount())
	var skip *skippedSpans
	for _, rs := range td.ResourceSpans().All() {
		service, pid := "", int64(0)
		if v, ok := rs.Resource().Attributes().Get("service.name"); ok {
			service = v.Str()
		}
		if v, ok := rs.Resource().Attributes().Get("process.pid"); ok {
			pid = v.Int()
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				sp, err := fromSpan(s)
				if err != nil {
					if skip == nil {
						skip = &skippedSpans{first: err}
					}
					skip.n++
					continue
				}
				sp.Service, sp.PID = service, pid
				out = append(out, sp)
			}
		}
	}
	if skip != nil {
		return out, skip
	}
	return out, nil
}

func fromSpan(s ptrace.Span) (Span, error) {
	start, err := unixNano(uint64(s.StartTimestamp()))
	if err != nil {
		return Span{}, fmt.Errorf("span %q: start: %w", sanitize.String(s.Name(), 64), err)
	}
	end, err := unixNano(uint64(s.EndTimestamp()))
	if err != nil {
		return Span{}, fmt.Errorf("span %q: end: %w", sanitize.String(s.Name(), 64), err)
	}
	sp := Span{
		Name: s.Name(), Start: start, End: end,
		Attrs:         make(map[string]attribute.Value, s.Attributes().Len()),
		StatusMessage: s.Status().Message(),
	}
	if id := s.TraceID(); !id.IsEmpty() {
		sp.TraceID = id.String()
	}
	if id := s.SpanID(); !id.IsEmpty() {
		sp.SpanID = id.String()
	}
	if id := s.ParentSpanID(); !id.IsEmpty() {
		sp.ParentID = id.String()
	}
	for k, v := range s.Attributes().All() {
		sp.Attrs[k] = fromValue(v, 0)
	}
	for _, l := range s.Links().All() {
		sp.Links = append(sp.Links, Link{TraceID: l.TraceID().String(), SpanID: l.SpanID().String()})
	}
	switch s.Status().Code() {
	case ptrace.StatusCodeError:
		sp.StatusCode = codes.Error
	case ptrace.StatusCodeOk:
		sp.StatusCode = codes.Ok
	}
	return sp, nil
}

// unixNano reads OTLP's unsigned nanoseconds since 1970; beyond what a
// time.Time in nanoseconds holds (2262) is refused, not wrapped negative.
func unixNano(n uint64) (time.Time, error) {
	if n > math.MaxInt64 {
		return time.Time{}, fmt.Errorf("%d ns is beyond 2262", n)
	}
	return time.Unix(0, int64(n)).UTC(), nil
}

// maxValueDepth bounds nested arrays turned into one value.
const maxValueDepth = 8

// fromValue converts an OTLP attribute value; arrays become string slices
// and maps their JSON text, as the views only print them.
func fromValue(v pcommon.Value, depth int) attribute.Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return attribute.StringValue(v.Str())
	case pcommon.ValueTypeBool:
		return attribute.BoolValue(v.Bool())
	case pcommon.ValueTypeInt:
		return attribute.Int64Value(v.Int())
	case pcommon.ValueTypeDouble:
		return attribute.Float64Value(v.Double())
	case pcommon.ValueTypeBytes:
		return attribute.StringValue(base64.StdEncoding.EncodeToString(v.Bytes().AsRaw()))
	case pcommon.ValueTypeSlice:
		vals := v.Slice()
		ss := make([]string, 0, vals.Len())
		for _, e := range vals.All() {
			if depth >= maxValueDepth {
				break
			}
			ss = append(ss, fromValue(e, depth+1).String())
		}
		return attribute.StringSliceValue(ss)
	case pcommon.ValueTypeMap:
		return attribute.StringValue(v.AsString())
	}
	return attribute.Value{}
}
