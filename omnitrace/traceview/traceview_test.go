// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

var t0 = time.Date(2025, 1, 30, 12, 0, 0, 0, time.UTC)

func at(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }

// record makes the trace of one request from a record, through the SDK.
func record(t *testing.T, info otelomni.RequestInfo, rec *spans.DiffusionRecord, end time.Time) []Span {
	t.Helper()
	var got []Span
	exp := NewExporter(io.Discard, WithoutWaterfalls())
	exp.collector.onTrace = func(s []Span) { got = s }
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	in := otelomni.New(otelomni.WithTracerProvider(tp))
	info.Start = t0
	_, req := in.Start(context.Background(), info)
	if err := req.Record(rec); err != nil {
		t.Fatal(err)
	}
	if err := req.EndAt(end, nil); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("the exporter delivered no trace")
	}
	return got
}

func TestWaterfallShowsNotMeasuredAndZeroLength(t *testing.T) {
	tr := record(t, otelomni.RequestInfo{ID: "chatcmpl-1", NumInferenceSteps: 10}, &spans.DiffusionRecord{
		Exec:        spans.Between(at(0), at(100)),
		QueueWait:   spans.Between(at(1), at(1)),
		Forward:     spans.Between(at(10), at(90)),
		Postprocess: spans.Between(at(100), at(110)),
	}, at(110))
	var b bytes.Buffer
	Waterfall(&b, tr)
	out := b.String()
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = l
		}
	}
	for _, absent := range []string{"preprocess", "kv_recv", "vae_decode", "output_ready_wait"} {
		if !strings.HasSuffix(lines[absent], "not measured") {
			t.Errorf("%s: %q, want not measured", absent, lines[absent])
		}
	}
	if l := lines["queue_wait"]; !strings.Contains(l, "│") || !strings.HasSuffix(strings.TrimSpace(l), "0.000") {
		t.Errorf("measured 0 should be a thin mark and 0.000: %q", l)
	}
	if l := lines["forward"]; !strings.HasSuffix(strings.TrimSpace(l), "80.000") || !strings.HasPrefix(l, "    forward") {
		t.Errorf("forward should be nested under exec with 80 ms: %q", l)
	}
	if strings.Contains(out, "190.000") {
		t.Error("something added exec and forward together")
	}
}

func TestWaterfallInterleavesOutputs(t *testing.T) {
	tr := record(t, otelomni.RequestInfo{ID: "stream"}, &spans.DiffusionRecord{
		Exec: spans.Between(at(0), at(100)),
		Outputs: []spans.OutputTiming{
			{ReadyWait: spans.Between(at(40), at(45)), Postprocess: spans.Between(at(45), at(50))},
			{Postprocess: spans.Between(at(100), at(105)), Final: true},
		},
	}, at(105))
	var b bytes.Buffer
	Waterfall(&b, tr)
	var order []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "#") {
			f := strings.Fields(l)
			order = append(order, f[0]+f[1])
			if f[1] == "#1" && f[0] == "output_ready_wait" && !strings.HasSuffix(l, "not measured") {
				t.Errorf("the synchronous output has a wait: %q", l)
			}
		}
	}
	if got := strings.Join(order, " "); got != "output_ready_wait#0 postprocess#0 output_ready_wait#1 postprocess#1" {
		t.Errorf("rows %q", got)
	}
}

func TestSummaryCountsRequestsAndSpansAndNeverSums(t *testing.T) {
	var s Summary
	for i := 0; i < 4; i++ {
		rec := &spans.DiffusionRecord{Exec: spans.Between(at(0), at(float64(100*(i+1)))), Postprocess: spans.Between(at(500), at(510))}
		if i%2 == 0 {
			rec.Preprocess = spans.Between(at(0), at(0)) // measured 0
		}
		s.Add(record(t, otelomni.RequestInfo{ID: "r", NumInferenceSteps: 10}, rec, at(510)))
	}
	got := s.Spans()
	if got["preprocess"] != 2 || got["exec"] != 4 || got["queue_wait"] != 0 || got["request"] != 4 {
		t.Errorf("spans per phase %v", got)
	}
	var b bytes.Buffer
	s.Write(&b)
	out := b.String()
	for _, want := range []string{"preprocess", "2/4", "queue_wait", "0/4"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && f[0] == "exec" && f[1] != "per":
			// p50 of 100, 200, 300, 400 by nearest rank is 200; max 400.
			if f[3] != "200.000" || f[6] != "400.000" {
				t.Errorf("exec row %q", l)
			}
		case len(f) > 0 && f[0] == "queue_wait":
			if f[3] != "-" {
				t.Errorf("a phase never measured must show -, not 0: %q", l)
			}
		case len(f) > 0 && f[0] == "preprocess":
			if f[3] != "0.000" {
				t.Errorf("a measured 0 must show 0.000: %q", l)
			}
		}
	}
}

func TestReadOTLPJSON(t *testing.T) {
	// Jaeger's shape: hex ids, ints as strings, a result wrapper; then the
	// file exporter's, one TracesData a line, with numbers as numbers and
	// enums by name.
	doc := `{"result":{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}},{"key":"process.pid","value":{"intValue":"42"}}]},
"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"omni.request","startTimeUnixNano":"1796000000000000000","endTimeUnixNano":"1796000000500000000",
"attributes":[{"key":"omni.request.id","value":{"stringValue":"0_501f96ba-7c1d"}},{"key":"omni.diffusion.num_inference_steps","value":{"intValue":"50"}},{"key":"omni.output.final","value":{"boolValue":true}}],"status":{"code":2,"message":"boom"}}]}]}]}}
{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"x","startTimeUnixNano":1796000000000000000,"endTimeUnixNano":1796000000000000000,"status":{"code":"STATUS_CODE_OK"}}]}]}]}`
	ss, err := readAll(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 {
		t.Fatalf("%d spans", len(ss))
	}
	a, b := ss[0], ss[1]
	if a.Service != "svc" || a.PID != 42 || a.Str(string(attrs.RequestIDKey)) != "0_501f96ba-7c1d" || a.Duration() != 500*time.Millisecond {
		t.Errorf("span a %+v", a)
	}
	if n, ok := a.Int(string(attrs.NumInferenceStepsKey)); !ok || n != 50 {
		t.Errorf("steps %d %v", n, ok)
	}
	if f, ok := a.Bool(string(attrs.OutputFinalKey)); !ok || !f || a.StatusCode != codes.Error || a.StatusMessage != "boom" {
		t.Errorf("final %v status %v %q", f, a.StatusCode, a.StatusMessage)
	}
	if b.TraceID != a.TraceID || b.SpanID != a.SpanID || b.StatusCode != codes.Ok {
		t.Errorf("ids %s/%s, want %s/%s; status %v", b.TraceID, b.SpanID, a.TraceID, a.SpanID, b.StatusCode)
	}
	if _, err := readAll(strings.NewReader(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","startTimeUnixNano":"soon"}]}]}]}`)); err == nil {
		t.Error("a malformed time must be an error")
	}
}

func TestOTLPJSONRoundTrip(t *testing.T) {
	tr := record(t, otelomni.RequestInfo{ID: "0_501f96ba-7c1d", NumInferenceSteps: 4}, &spans.DiffusionRecord{
		Exec: spans.Between(at(0), at(100)), QueueWait: spans.Between(at(1), at(1)),
	}, at(100))
	tr[0].Service, tr[0].PID = "svc", 7
	var b bytes.Buffer
	if err := WriteOTLPJSON(&b, tr); err != nil {
		t.Fatal(err)
	}
	back, err := readAll(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(tr) {
		t.Fatalf("%d spans back, want %d", len(back), len(tr))
	}
	byID := map[string]Span{}
	for _, s := range back {
		byID[s.SpanID] = s
	}
	for _, s := range tr {
		g := byID[s.SpanID]
		if g.Name != s.Name || g.ParentID != s.ParentID || !g.Start.Equal(s.Start) || !g.End.Equal(s.End) ||
			g.Service != s.Service || g.PID != s.PID || len(g.Attrs) != len(s.Attrs) {
			t.Errorf("%s: got %+v, want %+v", s.Name, g, s)
		}
		for k, v := range s.Attrs {
			if g.Attrs[k] != v {
				t.Errorf("%s: %s = %v, want %v", s.Name, k, g.Attrs[k], v)
			}
		}
	}
}
