// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// twoProcesses is a request process and a stage process, each with its own
// provider, joined only through a carrier, as two OS processes are.
type twoProcesses struct {
	gw, st *recorded
}

func newTwoProcesses(t *testing.T) *twoProcesses {
	return &twoProcesses{gw: newRecorded(t, w3c), st: newRecorded(t, w3c)}
}

// all returns both processes' spans.
func (p *twoProcesses) all() []sdktrace.ReadOnlySpan {
	return append(p.gw.rec.Ended(), p.st.rec.Ended()...)
}

// handOver injects the request context at the gateway and extracts it in
// the stage process, through a message struct's carrier field sent as JSON.
func (p *twoProcesses) handOver(ctx context.Context) context.Context {
	type message struct {
		Payload string
		Trace   propagation.MapCarrier
	}
	out := message{Trace: propagation.MapCarrier{}}
	p.gw.in.Inject(ctx, out.Trace)
	b, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	var in message
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return p.st.in.Extract(context.Background(), in.Trace)
}

func TestStageHangsUnderTheRequestAcrossProcesses(t *testing.T) {
	p := newTwoProcesses(t)
	ctx, req := p.gw.in.Start(context.Background(), otelomni.RequestInfo{ID: "speech-1"})
	rctx := p.handOver(ctx)
	_, st := p.st.in.StartStage(rctx, otelomni.StageInfo{ID: 0, Name: "thinker", Type: attrs.StageLLM, ReplicaID: "0", Model: "Qwen/Qwen2.5-Omni-7B"})
	st.SetUsage(512, 128)
	st.StartPhase(context.Background(), spans.Preprocess).End(nil)
	st.End(nil)
	req.End(nil)

	all := p.all()
	stage := one(t, all, spans.StageSpanName)
	request := one(t, all, spans.RequestSpanName)
	if stage.Parent().SpanID() != request.SpanContext().SpanID() || !stage.Parent().IsRemote() {
		t.Fatalf("stage's parent %v (remote %v), want the request span %v", stage.Parent().SpanID(), stage.Parent().IsRemote(), request.SpanContext().SpanID())
	}
	if stage.SpanKind() != trace.SpanKindServer {
		t.Errorf("a stage under a remote parent is SERVER, got %v", stage.SpanKind())
	}
	want := map[string]any{"omni.stage.id": int64(0), "omni.stage.name": "thinker", "omni.stage.type": "llm",
		"omni.replica.id": "0", "gen_ai.usage.input_tokens": int64(512), "gen_ai.usage.output_tokens": int64(128)}
	for k, v := range want {
		if got, _ := attr(stage, attributeKey(k)); got.AsInterface() != v {
			t.Errorf("%s = %v, want %v", k, got.AsInterface(), v)
		}
	}
	pre := one(t, all, spans.Preprocess.SpanName())
	if pre.Parent().SpanID() != stage.SpanContext().SpanID() {
		t.Error("a stage's phase must hang under the stage span")
	}
	if v, _ := attr(pre, attrs.RequestModelKey); v.AsString() != "Qwen/Qwen2.5-Omni-7B" {
		t.Errorf("the stage's model on its phase: %q", v.AsString())
	}
}

// handled collects what reaches the OpenTelemetry error handler until the
// test ends.
func handled(t *testing.T) func() []string {
	var mu sync.Mutex
	var got []string
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		got = append(got, err.Error())
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Print(err) })) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestThePropagatorIsTheGivenOrTheGlobal: the propagator is the one given
// with WithPropagators, else the global one at each call, as it is: the
// API's global before a program sets one carries nothing, and the first
// Inject says so once through the error handler. It runs in a child
// process: setting the global propagator cannot be undone.
func TestThePropagatorIsTheGivenOrTheGlobal(t *testing.T) {
	if os.Getenv("OTELOMNI_CHILD") != t.Name() {
		runChild(t)
		return
	}
	r := newRecorded(t)
	said := handled(t)
	before := otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTextMapPropagator(before) })
	// No WithPropagators, and no global propagator set in this process.
	in := otelomni.New(otelomni.WithTracerProvider(r.tp))
	ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "x"})
	defer req.End(nil)
	for i := 0; i < 3; i++ {
		c0 := propagation.MapCarrier{}
		in.Inject(ctx, c0)
		if len(c0) != 0 {
			t.Fatalf("the API's unset global injected %v", c0)
		}
	}
	var n int
	for _, m := range said() {
		if strings.Contains(m, "carries no fields") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("a propagator that carries nothing was reported %d times, want once: %q", n, said())
	}

	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	c := propagation.MapCarrier{}
	in.Inject(ctx, c)
	if c["traceparent"] == "" {
		t.Fatalf("the global set after New was not used: %v", c)
	}
	got := trace.SpanContextFromContext(in.Extract(context.Background(), c))
	if got.TraceID() != trace.SpanContextFromContext(ctx).TraceID() {
		t.Error("round trip lost the trace id")
	}

	// A real propagator is used as configured.
	in2 := otelomni.New(otelomni.WithTracerProvider(r.tp), otelomni.WithPropagators(propagation.Baggage{}))
	c2 := propagation.MapCarrier{}
	in2.Inject(ctx, c2)
	if _, ok := c2["traceparent"]; ok {
		t.Error("a configured propagator must not be replaced")
	}

	// An empty one, configured, sends nothing.
	in3 := otelomni.New(otelomni.WithTracerProvider(r.tp), otelomni.WithPropagators(propagation.NewCompositeTextMapPropagator()))
	c3 := propagation.MapCarrier{}
	in3.Inject(ctx, c3)
	if len(c3) != 0 {
		t.Errorf("a chosen propagator that carries nothing injected %v", c3)
	}

	// An empty one set as the global propagator sends nothing either.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	c4 := propagation.MapCarrier{}
	in.Inject(ctx, c4)
	if len(c4) != 0 {
		t.Errorf("a global propagator set to carry nothing injected %v", c4)
	}
	otel.SetTextMapPropagator(propagation.TraceContext{})
	c5 := propagation.MapCarrier{}
	in.Inject(ctx, c5)
	if c5["traceparent"] == "" {
		t.Errorf("the global propagator, read at each call: %v", c5)
	}
}

func TestUnsampledContextStillPropagates(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	in := otelomni.New(otelomni.WithTracerProvider(tp), w3c)
	ctx, _ := in.Start(context.Background(), otelomni.RequestInfo{ID: "x"})
	c := propagation.MapCarrier{}
	in.Inject(ctx, c)
	if c["traceparent"] == "" || c["traceparent"][len(c["traceparent"])-2:] != "00" {
		t.Errorf("an unsampled request must propagate its not-sampled decision: %v", c)
	}
}

func TestLLMPhasesOnlyWhenBothEndsSeen(t *testing.T) {
	base := time.Now()
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	cases := []struct {
		name   string
		events []struct {
			e otelomni.LLMEvent
			t time.Time
		}
		want map[spans.Phase]time.Duration
	}{
		{"all seen", evs(otelomni.LLMQueued, ms(0), otelomni.LLMScheduled, ms(5), otelomni.LLMFirstToken, ms(50), otelomni.LLMLastToken, ms(300)),
			map[spans.Phase]time.Duration{plan.LLMQueue: 5 * time.Millisecond, plan.LLMPrefill: 45 * time.Millisecond, plan.LLMDecode: 250 * time.Millisecond}},
		{"queued never seen: only decode", evs(otelomni.LLMFirstToken, ms(50), otelomni.LLMLastToken, ms(300)),
			map[spans.Phase]time.Duration{plan.LLMDecode: 250 * time.Millisecond}},
		{"re-schedule after preemption keeps the prefill start",
			evs(otelomni.LLMQueued, ms(0), otelomni.LLMScheduled, ms(5), otelomni.LLMPreempted, ms(20), otelomni.LLMScheduled, ms(30),
				otelomni.LLMFirstToken, ms(50), otelomni.LLMLastToken, ms(300)),
			map[spans.Phase]time.Duration{plan.LLMQueue: 5 * time.Millisecond, plan.LLMPrefill: 45 * time.Millisecond, plan.LLMDecode: 250 * time.Millisecond}},
		{"still decoding at the end", evs(otelomni.LLMQueued, ms(0), otelomni.LLMScheduled, ms(5), otelomni.LLMFirstToken, ms(50)),
			map[spans.Phase]time.Duration{plan.LLMQueue: 5 * time.Millisecond, plan.LLMPrefill: 45 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorded(t)
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "llm", Start: base})
			_, st := r.in.StartStage(ctx, otelomni.StageInfo{Name: "thinker", Type: attrs.StageLLM, Start: base})
			for _, e := range tc.events {
				if err := st.MarkLLM(e.e, e.t); err != nil {
					t.Fatal(err)
				}
			}
			st.End(nil)
			req.End(nil)
			got := byName(r.rec.Ended())
			for _, p := range []spans.Phase{plan.LLMQueue, plan.LLMPrefill, plan.LLMDecode} {
				d, want := tc.want[p]
				ss := got[p.SpanName()]
				if !want {
					if len(ss) != 0 {
						t.Errorf("%v: %d spans, want none (an end was never seen)", p, len(ss))
					}
					continue
				}
				if len(ss) != 1 || ss[0].EndTime().Sub(ss[0].StartTime()) != d {
					t.Errorf("%v: %d spans, want one lasting %v", p, len(ss), d)
					continue
				}
				if parentName(r.rec.Ended(), ss[0]) != spans.StageSpanName {
					t.Errorf("%v hangs under %s", p, parentName(r.rec.Ended(), ss[0]))
				}
			}
		})
	}
}

type llmEv = struct {
	e otelomni.LLMEvent
	t time.Time
}

func evs(args ...any) []llmEv {
	var out []llmEv
	for i := 0; i < len(args); i += 2 {
		out = append(out, llmEv{args[i].(otelomni.LLMEvent), args[i+1].(time.Time)})
	}
	return out
}

func TestLLMEventsRejectBadInput(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "llm"})
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{Type: attrs.StageLLM})
	now := time.Now()
	if err := st.MarkLLM(otelomni.LLMQueued, time.Time{}); !errors.Is(err, spans.ErrZeroTime) {
		t.Errorf("zero time: %v", err)
	}
	_ = st.MarkLLM(otelomni.LLMFirstToken, now)
	if err := st.MarkLLM(otelomni.LLMLastToken, now.Add(-time.Second)); !errors.Is(err, spans.ErrEndBeforeStart) {
		t.Errorf("last token before first: %v", err)
	}
	st.End(nil)
	req.End(nil)
	if n := len(byName(r.rec.Ended())[plan.LLMDecode.SpanName()]); n != 0 {
		t.Errorf("a negative decode made %d spans", n)
	}
}

func TestLLMEventsWithTheEnginesTimes(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{Start: base, ID: "llm"})
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{Type: attrs.StageLLM, Start: base})
	// No queued event: llm.queue is not measured.
	for _, e := range []struct {
		ev otelomni.LLMEvent
		t  time.Time
	}{{otelomni.LLMScheduled, at(5)}, {otelomni.LLMFirstToken, at(50)}, {otelomni.LLMLastToken, at(300)}} {
		if err := st.MarkLLM(e.ev, e.t); err != nil {
			t.Fatal(err)
		}
	}
	st.End(nil)
	req.End(nil)
	got := byName(r.rec.Ended())
	if len(got[plan.LLMQueue.SpanName()]) != 0 || len(got[plan.LLMPrefill.SpanName()]) != 1 || len(got[plan.LLMDecode.SpanName()]) != 1 {
		t.Fatalf("spans %v", names(r.rec.Ended()))
	}
	if d := got[plan.LLMDecode.SpanName()][0]; !d.StartTime().Equal(at(50)) || !d.EndTime().Equal(at(300)) {
		t.Errorf("decode %v to %v, want the events' times", d.StartTime(), d.EndTime())
	}
}

func TestTransferAcrossProcesses(t *testing.T) {
	cases := []struct {
		name    string
		header  func(h spans.TransferHeader) spans.TransferHeader
		parts   []spans.Phase
		skewed  uint64
		wantErr bool
	}{
		{"all parts", func(h spans.TransferHeader) spans.TransferHeader { return h },
			[]spans.Phase{plan.TransferTx, plan.TransferInFlight, plan.TransferRxDecode}, 0, false},
		{"connector reports no send times: no tx, no in flight", func(h spans.TransferHeader) spans.TransferHeader {
			h.TxStart, h.TxEnd = 0, 0
			return h
		}, []spans.Phase{plan.TransferRxDecode}, 0, false},
		{"sender's clock 10s ahead: in flight left out and counted", func(h spans.TransferHeader) spans.TransferHeader {
			h.TxStart += int64(10 * time.Second)
			h.TxEnd += int64(10 * time.Second)
			return h
		}, []spans.Phase{plan.TransferTx, plan.TransferRxDecode}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newTwoProcesses(t)
			ctx, req := p.gw.in.Start(context.Background(), otelomni.RequestInfo{ID: "img-1"})
			send := otelomni.StartSend(0, "mooncake")
			time.Sleep(2 * time.Millisecond)
			hdr := tc.header(send.Done(8 << 20))
			time.Sleep(time.Millisecond)
			_, st := p.st.in.StartStage(p.handOver(ctx), otelomni.StageInfo{ID: 1, Name: "dit", Type: attrs.StageDiffusion})
			rx := st.StartReceive(hdr)
			time.Sleep(time.Millisecond)
			if err := rx.End(); (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			st.End(nil)
			req.End(nil)

			all := p.all()
			tr := one(t, all, spans.TransferSpanName)
			if parentName(all, tr) != spans.RequestSpanName {
				t.Errorf("transfer hangs under %s, want omni.request", parentName(all, tr))
			}
			for k, v := range map[string]any{"omni.transfer.from_stage": int64(0), "omni.transfer.to_stage": int64(1),
				"omni.transfer.bytes": int64(8 << 20), "omni.transfer.connector": "mooncake"} {
				if got, _ := attr(tr, attributeKey(k)); got.AsInterface() != v {
					t.Errorf("%s = %v, want %v", k, got.AsInterface(), v)
				}
			}
			got := byName(all)
			for _, part := range []spans.Phase{plan.TransferTx, plan.TransferInFlight, plan.TransferRxDecode} {
				want := 0
				for _, q := range tc.parts {
					if q == part {
						want = 1
					}
				}
				if n := len(got[part.SpanName()]); n != want {
					t.Errorf("%v: %d spans, want %d", part, n, want)
				}
				for _, s := range got[part.SpanName()] {
					if s.Parent().SpanID() != tr.SpanContext().SpanID() {
						t.Errorf("%v hangs outside its transfer", part)
					}
					if s.StartTime().Before(tr.StartTime()) || s.EndTime().After(tr.EndTime()) {
						t.Errorf("%v lies outside its transfer span", part)
					}
				}
			}
			if s := p.st.in.Stats(); s.ClockSkew != tc.skewed {
				t.Errorf("ClockSkew = %d, want %d", s.ClockSkew, tc.skewed)
			}
		})
	}
}

func TestTransferWithNothingMeasuredMakesNoSpan(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "x"})
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Type: attrs.StageLLM})
	// Nothing measured: no span, and no error (the absence rule).
	if err := st.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: 1, Bytes: 10}); err != nil {
		t.Errorf("err %v, want none", err)
	}
	if s := r.in.Stats(); s.RejectedIntervals != 0 {
		t.Errorf("an unmeasured transfer was counted as bad input: %+v", s)
	}
	err := st.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: 1, Tx: spans.Between(at(5), at(1))})
	if !errors.Is(err, spans.ErrEndBeforeStart) {
		t.Errorf("err %v, want ErrEndBeforeStart", err)
	}
	st.End(nil)
	req.End(nil)
	if n := len(byName(r.rec.Ended())[spans.TransferSpanName]); n != 0 {
		t.Errorf("%d transfer spans, want 0", n)
	}
}

func TestOutputSpansAtANonDiffusionStage(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "tts"})
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 2, Name: "code2wav", Type: attrs.StageOther})
	for i := 0; i < 4; i++ {
		time.Sleep(time.Millisecond)
		if err := st.MarkOutput(i == 3, time.Now()); err != nil {
			t.Fatalf("MarkOutput %d: %v", i, err)
		}
	}
	st.End(nil)
	req.End(nil)
	all := r.rec.Ended()
	outs := byName(all)[spans.OutputSpanName]
	if len(outs) != 4 {
		t.Fatalf("%d output spans", len(outs))
	}
	stage := one(t, all, spans.StageSpanName)
	prevEnd := stage.StartTime()
	for i, o := range outs {
		idx, _ := attr(o, attrs.OutputIndexKey)
		final, _ := attr(o, attrs.OutputFinalKey)
		if idx.AsInt64() != int64(i) || final.AsBool() != (i == 3) || o.Parent().SpanID() != stage.SpanContext().SpanID() {
			t.Errorf("output %d: index %d final %v", i, idx.AsInt64(), final.AsBool())
		}
		switch {
		case i == 0 && o.StartTime().Before(prevEnd):
			// The stage's start as otelomni read it, just after its span
			// started: never before the span.
			t.Errorf("output 0 starts at %v, before its stage %v", o.StartTime(), prevEnd)
		case i > 0 && !o.StartTime().Equal(prevEnd):
			t.Errorf("output %d starts at %v, want the previous output's end %v", i, o.StartTime(), prevEnd)
		}
		prevEnd = o.EndTime()
	}
}

func TestDisabledStageAllocatesNothing(t *testing.T) {
	for _, in := range []*otelomni.Instrumenter{otelomni.New(otelomni.WithTracerProvider(noopTP()))} {
		n := testing.AllocsPerRun(100, func() {
			ctx, st := in.StartStage(context.Background(), otelomni.StageInfo{ID: 1, Type: attrs.StageLLM})
			_ = ctx
			_ = st.MarkLLM(otelomni.LLMQueued, time.Now())
			st.StartPhase(context.Background(), spans.Exec).End(nil)
			_ = st.MarkOutput(false, time.Now())
			_ = st.StartReceive(spans.TransferHeader{}).End()
			st.End(nil)
		})
		if n != 0 {
			t.Errorf("%v allocations", n)
		}
	}
	var nilStage *otelomni.Request
	nilStage.StartPhase(context.Background(), spans.Exec).End(nil)
	nilStage.End(nil)
	_ = nilStage.RecordTransfer(spans.TransferRecord{})
	var zero otelomni.Request
	_ = zero.MarkOutput(true, time.Now())
	_ = zero.MarkLLM(otelomni.LLMFirstToken, time.Now())
}
