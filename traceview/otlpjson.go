package traceview

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/otelomni/otelomni/sanitize"
)

// MaxOTLPDocument bounds one OTLP/JSON document (one ExportTraceServiceRequest,
// or one Jaeger answer): a reader never holds more than this of its input
// at once.
const MaxOTLPDocument = 256 << 20

// maxDocument is MaxOTLPDocument, a variable for tests.
var maxDocument int64 = MaxOTLPDocument

// maxErrorText bounds the part of a decoding error quoted back: an error
// about a 50 MB document is no message for a terminal.
const maxErrorText = 300

// ErrOTLPJSON is wrapped by every error that malformed OTLP/JSON causes.
var ErrOTLPJSON = errors.New("traceview: reading OTLP/JSON")

var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: 64}

// ParseOTLPJSON reads every span of one or more OTLP/JSON documents, one
// after another: ExportTraceServiceRequest objects as the OTLP file
// exporter writes them (one per line), or Jaeger's /api/v3 answers, which
// wrap one in {"result": ...}. Trace and span ids may be hex, as the
// OTLP/JSON specification and Jaeger write them, or base64, as the protobuf
// JSON mapping writes bytes. A span whose times OTLP cannot mean is
// skipped and the rest of its document read; a malformed document (a
// truncated last line) ends the reading. Either way it returns every span
// it could read together with an error wrapping [ErrOTLPJSON] that says
// what it could not.
func ParseOTLPJSON(r io.Reader) ([]Span, error) {
	var out []Span
	err := ReadOTLPJSON(r, func(ss []Span) error {
		out = append(out, ss...)
		return nil
	})
	return out, err
}

// ReadOTLPJSON reads OTLP/JSON documents as [ParseOTLPJSON] does and hands
// the spans of each document to fn as soon as it is read; an error from fn
// stops the reading and is returned.
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
				return errors.Join(skip.err(), bad.err(), fmt.Errorf("%w: document %d: %s", ErrOTLPJSON, n, sanitize.String(err.Error(), maxErrorText)))
			}
			// A malformed document: the next may begin on the next line,
			// as the OTLP file exporter writes one a line.
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
	return fmt.Errorf("%w: %s not read (the first, document %d: %s)", ErrOTLPJSON, plural(b.n, "document"), b.first, sanitize.String(b.err1.Error(), maxErrorText))
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
	return fmt.Errorf("%w: %s skipped in %s (the first, in document %d: %s)", ErrOTLPJSON,
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

// decodeDocument decodes one document: a request, or Jaeger's wrapper.
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
	var req coltracepb.ExportTraceServiceRequest
	if err := unmarshal.Unmarshal(raw, &req); err != nil {
		return nil, err
	}
	if len(req.GetResourceSpans()) == 0 && !bytes.Contains(raw, []byte(`"resourceSpans"`)) && !bytes.Contains(raw, []byte(`"resource_spans"`)) {
		// No OTLP at all: {"foo": 1}, or a backend's {"error": {...}}.
		return nil, fmt.Errorf("no resourceSpans in %s", sanitize.String(string(raw), 200))
	}
	return FromProto(req.GetResourceSpans())
}

// FromProto converts OTLP resource spans to spans. A span whose times OTLP
// cannot mean (after 2262) is skipped, and the error says how many were;
// the other spans are returned. A span that ends before it starts is kept:
// that is the views' to report.
func FromProto(rss []*tracepb.ResourceSpans) ([]Span, error) {
	var out []Span
	var skip *skippedSpans
	for _, rs := range rss {
		service, pid := "", int64(0)
		for _, kv := range rs.GetResource().GetAttributes() {
			switch kv.GetKey() {
			case "service.name":
				service = kv.GetValue().GetStringValue()
			case "process.pid":
				pid = kv.GetValue().GetIntValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp, err := fromProtoSpan(s)
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

func fromProtoSpan(s *tracepb.Span) (Span, error) {
	start, err := unixNano(s.GetStartTimeUnixNano())
	if err != nil {
		return Span{}, fmt.Errorf("span %q: start: %w", sanitize.String(s.GetName(), 64), err)
	}
	end, err := unixNano(s.GetEndTimeUnixNano())
	if err != nil {
		return Span{}, fmt.Errorf("span %q: end: %w", sanitize.String(s.GetName(), 64), err)
	}
	sp := Span{
		TraceID:  idHex(s.GetTraceId(), 16),
		SpanID:   idHex(s.GetSpanId(), 8),
		ParentID: idHex(s.GetParentSpanId(), 8),
		Name:     s.GetName(), Start: start, End: end,
		Attrs:         make(map[string]attribute.Value, len(s.GetAttributes())),
		StatusMessage: s.GetStatus().GetMessage(),
	}
	for _, kv := range s.GetAttributes() {
		sp.Attrs[kv.GetKey()] = fromAnyValue(kv.GetValue(), 0)
	}
	for _, l := range s.GetLinks() {
		sp.Links = append(sp.Links, Link{TraceID: idHex(l.GetTraceId(), 16), SpanID: idHex(l.GetSpanId(), 8)})
	}
	switch s.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_ERROR:
		sp.StatusCode = codes.Error
	case tracepb.Status_STATUS_CODE_OK:
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

// idHex returns an id as lower-case hex. The protobuf JSON mapping writes
// ids as base64, and the OTLP/JSON specification (and Jaeger) as hex; a hex
// id decoded as base64 comes out 1.5 times too long (24 bytes for a trace
// id, 12 for a span id), and encoding those bytes back gives the hex text
// exactly, since both lengths are whole base64 quanta.
func idHex(b []byte, size int) string {
	switch len(b) {
	case 0:
		return ""
	case size:
		return hex.EncodeToString(b)
	case size * 3 / 2:
		text := base64.StdEncoding.EncodeToString(b)
		if _, err := hex.DecodeString(text); err == nil {
			return toLowerHex(text)
		}
	}
	// Neither form: keep something printable that cannot pass for an id.
	return "invalid:" + hex.EncodeToString(b[:min(len(b), 32)])
}

func toLowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// maxValueDepth bounds nested arrays and maps turned into one value.
const maxValueDepth = 8

// fromAnyValue converts an OTLP attribute value; arrays become string
// slices and maps their JSON text, as the views only print them.
func fromAnyValue(v *commonpb.AnyValue, depth int) attribute.Value {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return attribute.StringValue(x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		return attribute.BoolValue(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return attribute.Int64Value(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return attribute.Float64Value(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return attribute.StringValue(base64.StdEncoding.EncodeToString(x.BytesValue))
	case *commonpb.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		ss := make([]string, 0, len(vals))
		for _, e := range vals {
			if depth >= maxValueDepth {
				break
			}
			ss = append(ss, fromAnyValue(e, depth+1).String())
		}
		return attribute.StringSliceValue(ss)
	case *commonpb.AnyValue_KvlistValue:
		b, _ := protojson.Marshal(x.KvlistValue)
		return attribute.StringValue(string(b))
	}
	return attribute.Value{}
}
