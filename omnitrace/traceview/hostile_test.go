// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// hostileSpan is a span of a trace someone else wrote.
func hostileSpan(id, parent, name string, start, end float64) Span {
	return Span{TraceID: "t", SpanID: id, ParentID: parent, Name: name, Start: at(start), End: at(end),
		Attrs: map[string]attribute.Value{}}
}

func TestHostileTracesAreReportedNotFatal(t *testing.T) {
	bigName := strings.Repeat("日", 333000) // 999 000 bytes
	stage := func(id, parent, name string) Span {
		s := hostileSpan(id, parent, spans.StageSpanName, 1, 9)
		s.Attrs[string(attrs.StageNameKey)] = attribute.StringValue(name)
		s.Attrs[string(attrs.StageIDKey)] = attribute.Int64Value(0)
		return s
	}
	deep := []Span{hostileSpan("r", "", spans.RequestSpanName, 0, 10)}
	for i := 0; i < 5000; i++ {
		parent := "r"
		if i > 0 {
			parent = fmt.Sprint("d", i-1)
		}
		deep = append(deep, hostileSpan(fmt.Sprint("d", i), parent, spans.Exec.SpanName(), 1, 2))
	}
	cases := []struct {
		name    string
		trace   []Span
		problem string
	}{
		{"spans that share an id", []Span{
			hostileSpan("a", "", spans.RequestSpanName, 0, 10),
			hostileSpan("a", "a", spans.Exec.SpanName(), 1, 2),
		}, "used by more than one span"},
		{"a span that names itself as parent", []Span{
			hostileSpan("a", "a", spans.RequestSpanName, 0, 10),
		}, "names itself"},
		{"two spans that are each other's parent", []Span{
			hostileSpan("a", "b", spans.RequestSpanName, 0, 10),
			hostileSpan("b", "a", spans.RequestSpanName, 1, 2),
		}, "each other's ancestors"},
		{"a loop of three under a request", []Span{
			hostileSpan("r", "", spans.RequestSpanName, 0, 10),
			hostileSpan("a", "c", spans.StageSpanName, 1, 2),
			hostileSpan("b", "a", spans.StageSpanName, 1, 2),
			hostileSpan("c", "b", spans.StageSpanName, 1, 2),
		}, "each other's ancestors"},
		{"a chain deeper than any view recurses", deep, "deeper than"},
		{"a 999 000-byte stage name", []Span{
			hostileSpan("r", "", spans.RequestSpanName, 0, 10),
			stage("s", "r", bigName),
			stage("s2", "r", "\x1b[2J\xff"),
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			roots, problems := Trees(append([]Span(nil), c.trace...))
			if n := countNodes(roots); n != len(c.trace) {
				t.Errorf("the forest holds %d spans, want each of the %d once", n, len(c.trace))
			}
			if c.problem != "" && !strings.Contains(strings.Join(problems, "\n"), c.problem) {
				t.Errorf("problems %q lack %q", problems, c.problem)
			}
			var out bytes.Buffer
			var sum Summary
			sum.Add(append([]Span(nil), c.trace...))
			sum.Write(&out)
			Waterfall(&out, append([]Span(nil), c.trace...))
			if out.Len() > 64<<10 {
				t.Errorf("%d bytes of output for a trace of %d spans", out.Len(), len(c.trace))
			}
			if strings.Contains(out.String(), "\x1b") || !utf8Valid(out.Bytes()) {
				t.Error("output carries a control character or invalid UTF-8")
			}
			if c.problem != "" && sum.Problems() == 0 {
				t.Error("the problem is not counted by the summary")
			}
		})
	}
}

func countNodes(roots []*Node) int {
	n := 0
	stack := append([]*Node(nil), roots...)
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n++
		stack = append(stack, c.Children...)
	}
	return n
}

func utf8Valid(b []byte) bool { return strings.ToValidUTF8(string(b), "\uFFFD") == string(b) }

func TestReadOTLPJSONRefusesWhatOTLPCannotMean(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"a time beyond 2262", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"x","startTimeUnixNano":"18446744073709551615"}]}]}]}`, "beyond 2262"},
		{"not an object", `[1,2]`, "not a JSON object"},
		{"a truncated document", `{"resourceSpans":[`, "document 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readAll(strings.NewReader(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}

func TestReadOTLPJSONErrorsAreBounded(t *testing.T) {
	doc := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"` + strings.Repeat("x", 1<<20) + `","startTimeUnixNano":"` + strings.Repeat("y", 1<<20) + `"}]}]}]}`
	_, err := readAll(strings.NewReader(doc))
	if err == nil || len(err.Error()) > 1024 {
		t.Errorf("error of %d bytes", len(fmt.Sprint(err)))
	}
}

// TestRequestsUnderOtherSpansAreFound: a request span under a gateway's
// server span, or nested under another request, is summarised, and has its
// waterfall, each once.
func TestRequestsUnderOtherSpansAreFound(t *testing.T) {
	gw := hostileSpan("g", "", "POST /v1/images", 0, 12)
	req := hostileSpan("r", "g", spans.RequestSpanName, 1, 11)
	req.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("under-a-gateway")
	exec := hostileSpan("e", "r", spans.Exec.SpanName(), 2, 10)
	exec.Attrs[string(attrs.PhaseKey)] = attribute.StringValue(spans.Exec.String())
	var out bytes.Buffer
	var sum Summary
	sum.Add([]Span{gw, req, exec})
	if sum.Requests() != 1 || sum.Spans()["exec"] != 1 {
		t.Errorf("the summary of a request under a gateway: %d requests, spans %v", sum.Requests(), sum.Spans())
	}
	r2 := hostileSpan("r2", "g", spans.RequestSpanName, 1, 11)
	r2.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("second")
	nested := hostileSpan("n", "e", spans.RequestSpanName, 3, 4)
	nested.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("nested")
	all := []Span{gw, req, exec, r2, nested}
	// Each request's exec is divided by its own steps, once: the nested
	// request's exec is not also counted under the request it hangs in.
	req.Attrs[string(attrs.NumInferenceStepsKey)] = attribute.Int64Value(2)
	nested.Attrs[string(attrs.NumInferenceStepsKey)] = attribute.Int64Value(2)
	nestedExec := hostileSpan("ne", "n", spans.Exec.SpanName(), 3, 4)
	nestedExec.Attrs[string(attrs.PhaseKey)] = attribute.StringValue(spans.Exec.String())
	all = append(all, nestedExec)
	var sum3 Summary
	sum3.Add(all)
	var table bytes.Buffer
	sum3.Write(&table)
	if got := sum3.Spans(); sum3.Requests() != 3 || got["exec"] != 2 ||
		!regexp.MustCompile(`exec per step \(ratio\) +2/3 +2 `).MatchString(table.String()) {
		t.Errorf("the summary counts %d requests, spans %v; want 3 requests, 2 execs, 2 per-step ratios:\n%s", sum3.Requests(), got, table.String())
	}
	// Every request has its waterfall, the nested one too, each once.
	out.Reset()
	Waterfall(&out, all)
	for _, id := range []string{"under-a-gateway", "second", "nested"} {
		if n := strings.Count(out.String(), `"`+id+`"`); n != 1 {
			t.Errorf("request %s has %d waterfalls:\n%s", id, n, out.String())
		}
	}
	// The waterfall shows the request under the gateway too.
	out.Reset()
	Waterfall(&out, []Span{gw, req, exec})
	if !strings.Contains(out.String(), "under-a-gateway") {
		t.Errorf("the waterfall of a request under a gateway:\n%s", out.String())
	}
}

// TestAStageLengthNotMeasuredIsNeitherShownNorCounted: an imported stage
// whose record gave no length of its own has a span only to hold its
// attributes and children; its zero length is no measured 0.
func TestAStageLengthNotMeasuredIsNeitherShownNorCounted(t *testing.T) {
	req := hostileSpan("r", "", spans.RequestSpanName, 0, 300)
	req.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("7")
	mkStage := func(id, name string, stage int64, start, end float64, unmeasured bool) Span {
		s := hostileSpan(id, "r", spans.StageSpanName, start, end)
		s.Attrs[string(attrs.StageIDKey)] = attribute.Int64Value(stage)
		s.Attrs[string(attrs.StageNameKey)] = attribute.StringValue(name)
		if unmeasured {
			s.Attrs[string(omnikeys.LengthUnmeasured)] = attribute.BoolValue(true)
		}
		return s
	}
	thinker := mkStage("s0", "thinker", 0, 0, 0, true)
	dit := mkStage("s1", "dit", 1, 0, 100, false)
	zero := mkStage("s2", "vae", 2, 100, 100, false) // measured as 0
	trace := []Span{req, thinker, dit, zero}
	var sum Summary
	sum.Add(trace)
	if got := sum.Spans(); got["stage thinker"] != 0 || got["stage dit"] != 1 || got["stage vae"] != 1 {
		t.Errorf("summary spans %v: the thinker's length was not measured", got)
	}
}

// TestWhatCannotBeReadOrMeantIsSaidAndTheRestShown: a span with a time
// beyond 2262 is skipped and its document's other spans read; a truncated
// last document keeps the ones before it; a span ending before it starts
// is noted, its length neither shown nor counted; problems are counted
// past the bounded list.
func TestWhatCannotBeReadOrMeantIsSaidAndTheRestShown(t *testing.T) {
	good := `{"traceId":"0123456789abcdef0123456789abcdef","spanId":"00000000000000a1","name":"omni.request","startTimeUnixNano":"1796000000000000000","endTimeUnixNano":"1796000000001000000","attributes":[{"key":"omni.request.id","value":{"stringValue":"good"}}]}`
	bad := `{"traceId":"0123456789abcdef0123456789abcdef","spanId":"00000000000000b1","name":"x","startTimeUnixNano":"18446744073709551615"}`
	doc := `{"resourceSpans":[{"scopeSpans":[{"spans":[` + bad + `,` + good + `]}]}]}` + "\n" +
		`{"resourceSpans":[{"scopeSpans":[{"spans":[` + bad + `,` + bad + `]}]}]}` + "\n" + `{"resourceSpans":[{"scopeSp`
	ss, err := readAll(strings.NewReader(doc))
	if len(ss) != 1 || ss[0].Str(string(attrs.RequestIDKey)) != "good" {
		t.Fatalf("read %d spans, want the good one", len(ss))
	}
	if err == nil || !strings.Contains(err.Error(), "3 spans skipped in 2 documents") || !strings.Contains(err.Error(), "document 3") || len(err.Error()) > 1024 {
		t.Errorf("error %v: want the skipped span and the truncated document said", err)
	}

	req := hostileSpan("r", "", spans.RequestSpanName, 0, 10)
	req.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("neg")
	neg := hostileSpan("e", "r", spans.Exec.SpanName(), 8, 3)
	neg.Attrs[string(attrs.PhaseKey)] = attribute.StringValue(spans.Exec.String())
	if _, problems := Trees([]Span{req, neg}); !strings.Contains(strings.Join(problems, "\n"), "ends before it starts") {
		t.Errorf("a span ending before it starts is not noted: %q", problems)
	}
	var sum Summary
	sum.Add([]Span{req, neg})
	if sum.Spans()["exec"] != 0 || sum.Problems() != 1 {
		t.Errorf("summary spans %v, problems %d: the exec's length is no measurement", sum.Spans(), sum.Problems())
	}

	var loops []Span
	for i := range 3 * maxProblems {
		s := hostileSpan(strconv.Itoa(i), strconv.Itoa(i), "x", 0, 1) // each its own parent
		loops = append(loops, s)
	}
	var sum2 Summary
	sum2.Add(loops)
	if sum2.Problems() != 3*maxProblems {
		t.Errorf("%d problems counted, want %d", sum2.Problems(), 3*maxProblems)
	}
}

// TestABadDocumentCostsNoDocumentAfterIt: a document that is not JSON, or
// JSON that is no OTLP, is counted and skipped; the documents after it (one
// a line, as the file exporter writes them) are read.
func TestABadDocumentCostsNoDocumentAfterIt(t *testing.T) {
	doc := func(id string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcd` + id + `","spanId":"00000000000000` + id + `","name":"omni.request","startTimeUnixNano":"1796000000000000000","endTimeUnixNano":"1796000000001000000"}]}]}]}`
	}
	in := strings.Join([]string{doc("01"), `{"resourceSpans": [ this is not JSON`, doc("02"), `{"resourceSpans": "not a list"}`, `[1, 2]`, doc("03")}, "\n")
	ss, err := readAll(strings.NewReader(in))
	if len(ss) != 3 {
		t.Errorf("read %d spans, want the 3 good documents' (error %v)", len(ss), err)
	}
	if err == nil || !strings.Contains(err.Error(), "3 documents not read") {
		t.Errorf("error %v, want the 3 bad documents counted", err)
	}
}

// TestADocumentWithoutOTLPIsCounted: JSON that holds no OTLP at all (a
// backend's error answer) is counted as a document not read, not taken
// for an empty trace.
func TestADocumentWithoutOTLPIsCounted(t *testing.T) {
	_, err := readAll(strings.NewReader(`{"error": {"code": 500, "message": "storage down"}}` + "\n" + `{"resourceSpans": []}`))
	if err == nil || !strings.Contains(err.Error(), "1 document not read") || !strings.Contains(err.Error(), "storage down") {
		t.Errorf("error %v: want the error answer counted, and an empty request accepted", err)
	}
}

// TestADocumentTooLargeCostsNoDocumentAfterIt: a document beyond the bound
// is counted and skipped to the next line; the next document is read.
func TestADocumentTooLargeCostsNoDocumentAfterIt(t *testing.T) {
	defer func(n int64) { maxDocument = n }(maxDocument)
	maxDocument = 1 << 10
	good := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"00000000000000a1","name":"omni.request","startTimeUnixNano":"1796000000000000000","endTimeUnixNano":"1796000000001000000"}]}]}]}`
	big := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"` + strings.Repeat("x", 1<<12) + `"}]}]}]}`
	ss, err := readAll(strings.NewReader(big + "\n" + good + "\n"))
	if len(ss) != 1 || err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("read %d spans, error %v: want the good document, and the large one counted", len(ss), err)
	}
}

// readAll reads every span of r's documents, and what could not be read.
func readAll(r io.Reader) ([]Span, error) {
	var out []Span
	err := ReadOTLPJSON(r, func(ss []Span) error {
		out = append(out, ss...)
		return nil
	})
	return out, err
}
