// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"bytes"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// FuzzReadOTLPJSON feeds the reader arbitrary documents: it must never
// panic, its errors stay short, and what it reads must survive the views
// and a round trip through the writer.
func FuzzReadOTLPJSON(f *testing.F) {
	f.Add([]byte(`{"result":{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"omni.request","startTimeUnixNano":"1796000000000000000","endTimeUnixNano":"1796000000500000000","attributes":[{"key":"omni.request.id","value":{"stringValue":"r"}}],"status":{"code":2,"message":"boom"}}]}]}]}}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"eee19b7ec3c1b174","name":"x","startTimeUnixNano":1,"endTimeUnixNano":0}]}]}]}` + "\n" + `{"resourceSpans":[]}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"omni.stage","attributes":[{"key":"omni.stage.id","value":{"intValue":"-9223372036854775808"}},{"key":"a","value":{"arrayValue":{"values":[{"kvlistValue":{"values":[]}}]}}}]}]}]}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		ss, err := readAll(bytes.NewReader(doc))
		if err != nil && len(err.Error()) > 1024 {
			t.Fatalf("an error of %d bytes", len(err.Error()))
		}
		viewsHold(t, ss)
		var b bytes.Buffer
		if err := WriteOTLPJSON(&b, ss); err != nil {
			t.Fatal(err)
		}
		back, err := readAll(&b)
		if err != nil {
			t.Fatalf("the writer's output does not read back: %v\n%s", err, b.Bytes())
		}
		if len(back) != len(ss) {
			t.Fatalf("%d spans written, %d read back", len(ss), len(back))
		}
	})
}

// FuzzTrees builds traces from arbitrary bytes, with ids drawn from a tiny
// alphabet so that shared ids, self-parents and loops are common: every
// span must appear exactly once in the forest, and no view may panic or
// print more than a bounded amount.
func FuzzTrees(f *testing.F) {
	f.Add([]byte("aa\x00ba\x01ab\x02"))
	f.Add([]byte("r\x00\x00sr\x01ts\x02us\x03"))
	f.Fuzz(runFuzzTrees)
}

func runFuzzTrees(t *testing.T, b []byte) {
	{
		names := []string{spans.RequestSpanName, spans.StageSpanName, plan.TransferSpanName, spans.Exec.SpanName(),
			spans.Forward.SpanName(), plan.OutputSpanName, plan.LLMDecode.SpanName(), spans.Postprocess.SpanName()}
		var ss []Span
		for i := 0; i+2 < len(b) && len(ss) < 2000; i += 3 {
			s := hostileSpan(string(b[i]%8+'a'), string(b[i+1]%9+'a'), names[int(b[i+2])%len(names)], float64(b[i]), float64(b[i])+float64(b[i+1]))
			if b[i+1]%9 == 8 {
				s.ParentID = ""
			}
			s.Attrs[string(attrs.StageIDKey)] = attribute.Int64Value(int64(int8(b[i+2])))
			s.Attrs[string(attrs.OutputIndexKey)] = attribute.Int64Value(int64(b[i]))
			s.Attrs[string(attrs.StageNameKey)] = attribute.StringValue(string(b[i : i+3]))
			ss = append(ss, s)
		}
		roots, _ := Trees(append([]Span(nil), ss...))
		if n := countNodes(roots); n != len(ss) {
			t.Fatalf("the forest holds %d spans of %d", n, len(ss))
		}
		viewsHold(t, ss)
	}
}

// viewsHold runs every view over ss and checks that the output is bounded
// by what a person reads, valid UTF-8, and free of control characters.
func viewsHold(t *testing.T, ss []Span) {
	t.Helper()
	var out bytes.Buffer
	for _, tr := range ByTrace(ss) {
		Waterfall(&out, tr)
		var sum Summary
		sum.Add(tr)
		sum.Write(&out)
	}
	if !utf8Valid(out.Bytes()) || strings.ContainsAny(out.String(), "\x1b\x00\r") {
		t.Fatalf("the views printed invalid UTF-8 or a control character")
	}
	if limit := 4096 + 4096*len(ss); out.Len() > limit {
		t.Fatalf("%d bytes of views for %d spans", out.Len(), len(ss))
	}
}
