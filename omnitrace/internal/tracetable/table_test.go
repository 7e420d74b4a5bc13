// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracetable

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

type Span = traceview.Span

var t0 = time.Date(2025, 1, 30, 12, 0, 0, 0, time.UTC)

func at(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }

// hostileSpan is a span of a trace someone else wrote.
func hostileSpan(id, parent, name string, start, end float64) Span {
	return Span{TraceID: "t", SpanID: id, ParentID: parent, Name: name, Start: at(start), End: at(end),
		Attrs: map[string]attribute.Value{}}
}

func utf8Valid(b []byte) bool { return strings.ToValidUTF8(string(b), "\uFFFD") == string(b) }

func TestTableBoundsColumnsRowsAndCells(t *testing.T) {
	tr := []Span{hostileSpan("r", "", spans.RequestSpanName, 0, 10)}
	for i := 0; i < 100; i++ {
		s := hostileSpan(fmt.Sprint("s", i), "r", spans.StageSpanName, 1, 2)
		s.Attrs[string(attrs.StageIDKey)] = attribute.Int64Value(int64(i))
		s.Attrs[string(attrs.StageNameKey)] = attribute.StringValue(fmt.Sprint("stage", i))
		tr = append(tr, s)
		for j := 0; j < 20; j++ {
			tr = append(tr, hostileSpan(fmt.Sprint("q", i, "-", j), s.SpanID, plan.LLMDecode.SpanName(), 1, 2))
		}
	}
	var out bytes.Buffer
	Write(&out, tr)
	if !strings.Contains(out.String(), "84 more stage or hand-over columns") {
		t.Errorf("columns beyond %d are counted, not printed:\n%.2000s", maxColumns, out.String())
	}
	if !strings.Contains(out.String(), "+16 more") {
		t.Errorf("values beyond %d in a cell are counted:\n%.2000s", maxCellValues, out.String())
	}
	if lines := strings.Count(out.String(), "\n"); lines > maxRows+10 {
		t.Errorf("%d lines", lines)
	}
}

// TestTablesOfOneTraceAreBounded: a trace holding thousands of request
// spans writes at most maxTables tables, and says how many it left out.
func TestTablesOfOneTraceAreBounded(t *testing.T) {
	var trace []Span
	for i := range 3 * maxTables {
		r := hostileSpan(strconv.Itoa(i), "", spans.RequestSpanName, float64(i), float64(i+1))
		r.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue(strconv.Itoa(i))
		trace = append(trace, r)
	}
	var out bytes.Buffer
	if n := Write(&out, trace); n != maxTables || !strings.Contains(out.String(), "200 more requests") {
		t.Errorf("%d tables; tail:\n%s", n, out.String()[max(0, out.Len()-300):])
	}
}

// TestTableFindsRequestsUnderOtherSpans: a request span under a gateway's
// server span, or set loose from a loop of parents, gets its table; a
// trace without one writes none and says so by the count.
func TestTableFindsRequestsUnderOtherSpans(t *testing.T) {
	gw := hostileSpan("g", "", "POST /v1/images", 0, 12)
	req := hostileSpan("r", "g", spans.RequestSpanName, 1, 11)
	req.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("under-a-gateway")
	exec := hostileSpan("e", "r", spans.Exec.SpanName(), 2, 10)
	exec.Attrs[string(attrs.PhaseKey)] = attribute.StringValue(spans.Exec.String())
	var out bytes.Buffer
	if n := Write(&out, []Span{gw, req, exec}); n != 1 || !strings.Contains(out.String(), `request "under-a-gateway"`) ||
		!strings.Contains(out.String(), "exec") {
		t.Errorf("%d tables:\n%s", n, out.String())
	}
	// A loop: the request's parent is its own child.
	loopReq, loopExec := req, exec
	loopReq.ParentID = "e"
	out.Reset()
	if n := Write(&out, []Span{loopReq, loopExec}); n != 1 || !strings.Contains(out.String(), "note:") {
		t.Errorf("a loop: %d tables:\n%s", n, out.String())
	}
	out.Reset()
	if n := Write(&out, []Span{gw}); n != 0 || out.Len() != 0 {
		t.Errorf("no request span: %d tables:\n%s", n, out.String())
	}
	// A second request beside the first, and one nested under its exec:
	// each has its table, and a request id picks one.
	r2 := hostileSpan("r2", "g", spans.RequestSpanName, 1, 11)
	r2.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("second")
	nested := hostileSpan("n", "e", spans.RequestSpanName, 3, 4)
	nested.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("nested")
	all := []Span{gw, req, exec, r2, nested}
	out.Reset()
	if n := Write(&out, all); n != 3 {
		t.Errorf("%d tables, want 3:\n%s", n, out.String())
	}
	out.Reset()
	if n := Write(&out, all, "nested"); n != 1 || !strings.Contains(out.String(), `request "nested"`) || strings.Contains(out.String(), "second") {
		t.Errorf("the table of one request: %d tables:\n%s", n, out.String())
	}
}

// TestAStageLengthNotMeasuredIsNotShown: an imported stage whose record
// gave no length of its own has a span only to hold its attributes and
// children; its zero length is no measured 0, which a stage measured as
// 0 shows.
func TestAStageLengthNotMeasuredIsNotShown(t *testing.T) {
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
	trace := []Span{req, mkStage("s0", "thinker", 0, 0, 0, true), mkStage("s1", "dit", 1, 0, 100, false), mkStage("s2", "vae", 2, 100, 100, false)}
	var out bytes.Buffer
	Write(&out, trace)
	var stageRow string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "stage") {
			stageRow = line
		}
	}
	if got := strings.Join(strings.Fields(stageRow), " "); got != "stage 100.000 0.000" {
		t.Errorf("the stage row shows the measured 0 and 100 only:\n%s", out.String())
	}
}

// TestASpanEndingBeforeItStartsIsNotedNotShown: its length is no
// measurement.
func TestASpanEndingBeforeItStartsIsNotedNotShown(t *testing.T) {
	req := hostileSpan("r", "", spans.RequestSpanName, 0, 10)
	req.Attrs[string(attrs.RequestIDKey)] = attribute.StringValue("neg")
	neg := hostileSpan("e", "r", spans.Exec.SpanName(), 8, 3)
	neg.Attrs[string(attrs.PhaseKey)] = attribute.StringValue(spans.Exec.String())
	var out bytes.Buffer
	Write(&out, []Span{req, neg})
	if strings.Contains(out.String(), "-5.000") || !strings.Contains(out.String(), "ends before it starts") {
		t.Errorf("a span ending before it starts:\n%s", out.String())
	}
}

// TestHostileTracesMakeBoundedTables: shared ids, loops, chains deeper
// than any view recurses and a 999 000-byte stage name make a bounded
// table of valid text, the problem noted under it.
func TestHostileTracesMakeBoundedTables(t *testing.T) {
	deep := []Span{hostileSpan("r", "", spans.RequestSpanName, 0, 10)}
	for i := 0; i < 5000; i++ {
		parent := "r"
		if i > 0 {
			parent = fmt.Sprint("d", i-1)
		}
		deep = append(deep, hostileSpan(fmt.Sprint("d", i), parent, spans.Exec.SpanName(), 1, 2))
	}
	stage := func(id, name string) Span {
		s := hostileSpan(id, "r", spans.StageSpanName, 1, 9)
		s.Attrs[string(attrs.StageNameKey)] = attribute.StringValue(name)
		s.Attrs[string(attrs.StageIDKey)] = attribute.Int64Value(0)
		return s
	}
	for name, c := range map[string]struct {
		trace []Span
		note  bool
	}{
		"shared ids":        {[]Span{hostileSpan("a", "", spans.RequestSpanName, 0, 10), hostileSpan("a", "a", spans.Exec.SpanName(), 1, 2)}, true},
		"a loop":            {[]Span{hostileSpan("a", "b", spans.RequestSpanName, 0, 10), hostileSpan("b", "a", spans.RequestSpanName, 1, 2)}, true},
		"a deep chain":      {deep, true},
		"a huge stage name": {[]Span{hostileSpan("r", "", spans.RequestSpanName, 0, 10), stage("s", strings.Repeat("日", 333000)), stage("s2", "\x1b[2J\xff")}, false},
	} {
		var out bytes.Buffer
		Write(&out, c.trace)
		if out.Len() > 64<<10 || strings.Contains(out.String(), "\x1b") || !utf8Valid(out.Bytes()) {
			t.Errorf("%s: %d bytes, or a control character or invalid UTF-8", name, out.Len())
		}
		if c.note && !strings.Contains(out.String(), "note: ") {
			t.Errorf("%s: no note:\n%.1000s", name, out.String())
		}
	}
}

// FuzzTable builds traces from arbitrary bytes, with ids drawn from a tiny
// alphabet so that shared ids, self-parents and loops are common: the
// table never panics, and prints bounded valid text.
func FuzzTable(f *testing.F) {
	f.Add([]byte("aa\x00ba\x01ab\x02"))
	f.Add([]byte("r\x00\x00sr\x01ts\x02us\x03"))
	names := []string{spans.RequestSpanName, spans.StageSpanName, plan.TransferSpanName, spans.Exec.SpanName(),
		spans.Forward.SpanName(), plan.OutputSpanName, plan.LLMDecode.SpanName(), spans.Postprocess.SpanName()}
	f.Fuzz(func(t *testing.T, b []byte) {
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
		var out bytes.Buffer
		for _, tr := range traceview.ByTrace(ss) {
			Write(&out, tr)
		}
		if !utf8Valid(out.Bytes()) || strings.ContainsAny(out.String(), "\x1b\x00\r") {
			t.Fatalf("the table printed invalid UTF-8 or a control character")
		}
		if limit := 4096 + 4096*len(ss); out.Len() > limit {
			t.Fatalf("%d bytes of tables for %d spans", out.Len(), len(ss))
		}
	})
}

// TestTheTableAndTheSummaryReadTheSameTree: the table reads a trace's tree
// as traceview's summary reads it: for traces of every shape (single-stage
// diffusion and LLM requests, a multi-stage request with a hand-over,
// phases nested in exec and forward, outputs, a stage of no known type),
// the phases the table shows are those the summary counts.
func TestTheTableAndTheSummaryReadTheSameTree(t *testing.T) {
	phase := func(id, parent string, p spans.Phase, start, end float64) Span {
		s := hostileSpan(id, parent, p.SpanName(), start, end)
		s.Attrs[string(attrs.PhaseKey)] = attribute.StringValue(p.String())
		return s
	}
	withAttr := func(s Span, k string, v attribute.Value) Span { s.Attrs[k] = v; return s }
	req := func(id string) Span {
		return withAttr(hostileSpan(id, "", spans.RequestSpanName, 0, 100), string(attrs.RequestIDKey), attribute.StringValue(id))
	}
	stage := func(id string, n int64, name, typ string) Span {
		s := hostileSpan(id, "r", spans.StageSpanName, 1, 90)
		s.Attrs[string(attrs.StageIDKey)] = attribute.Int64Value(n)
		s.Attrs[string(attrs.StageNameKey)] = attribute.StringValue(name)
		if typ != "" {
			s.Attrs[string(attrs.StageTypeKey)] = attribute.StringValue(typ)
		}
		return s
	}
	out := func(s Span, i int64) Span { return withAttr(s, string(attrs.OutputIndexKey), attribute.Int64Value(i)) }
	transfer := withAttr(withAttr(hostileSpan("t", "r", plan.TransferSpanName, 20, 30), string(attrs.TransferFromStageKey), attribute.Int64Value(0)),
		string(attrs.TransferToStageKey), attribute.Int64Value(1))
	traces := map[string][]Span{
		"single diffusion": {req("r"), phase("q", "r", spans.QueueWait, 1, 2), phase("e", "r", spans.Exec, 2, 50),
			phase("k", "e", spans.KVRecv, 2, 3), phase("f", "e", spans.Forward, 3, 40), phase("d", "f", spans.DenoiseStep, 3, 4),
			phase("v", "e", spans.VAEDecode, 40, 50), out(phase("p0", "r", spans.Postprocess, 50, 60), 0), out(phase("p1", "r", spans.Postprocess, 60, 70), 1)},
		"single llm": {withAttr(req("r"), string(attrs.StageTypeKey), attribute.StringValue(attrs.StageLLM)),
			phase("a", "r", plan.LLMQueue, 1, 2), phase("b", "r", plan.LLMPrefill, 2, 5), phase("c", "r", plan.LLMDecode, 5, 50)},
		"multi-stage": {req("r"), stage("s0", 0, "thinker", attrs.StageLLM), phase("a", "s0", plan.LLMPrefill, 2, 5), phase("b", "s0", plan.LLMDecode, 5, 20),
			transfer, phase("tx", "t", plan.TransferTx, 20, 22), phase("fl", "t", plan.TransferInFlight, 22, 25), phase("rx", "t", plan.TransferRxDecode, 25, 30),
			stage("s1", 1, "dit", ""), phase("e", "s1", spans.Exec, 30, 80), phase("f", "e", spans.Forward, 31, 70),
			stage("s2", 2, "other", attrs.StageOther), phase("x", "s2", spans.Exec, 80, 85)},
	}
	for name, tr := range traces {
		var b bytes.Buffer
		if Write(&b, append([]Span(nil), tr...)) != 1 {
			t.Fatalf("%s: no table:\n%s", name, b.String())
		}
		table := map[string]bool{}
		for _, line := range strings.Split(b.String(), "\n")[2:] {
			if len(line) < 24 || !strings.HasPrefix(line, "  ") {
				continue
			}
			label, _, _ := strings.Cut(strings.TrimSpace(line[2:24]), " #")
			table[label] = true
		}
		var sum traceview.Summary
		sum.Add(append([]Span(nil), tr...))
		summary := map[string]bool{}
		for label, n := range sum.Spans() {
			f := strings.Fields(label)
			switch {
			case n == 0 || label == "request" || label == spans.DenoiseStep.String():
				continue // the table shows no row per step
			case f[0] == "stage" || f[0] == "transfer" && len(f) == 2:
				summary[f[0]] = true
			default:
				summary[f[len(f)-1]] = true
			}
		}
		if !maps.Equal(table, summary) {
			t.Errorf("%s: the table shows %v, the summary counts %v\n%s", name, slices.Sorted(maps.Keys(table)), slices.Sorted(maps.Keys(summary)), b.String())
		}
	}
}
