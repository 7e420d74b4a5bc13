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

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

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
	if v, _ := attr(pre, semconv.GenAIRequestModelKey); v.AsString() != "Qwen/Qwen2.5-Omni-7B" {
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

// TestLLMPhasesAreRecordedUnderTheStage: an LLM stage records each phase
// whose two ends it saw, with the engine's own times, under its stage
// span; a phase with an end not seen is not recorded, and makes no span.
func TestLLMPhasesAreRecordedUnderTheStage(t *testing.T) {
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	cases := []struct {
		name string
		// queued, scheduled, first, last: a zero time was not seen.
		events [4]time.Time
		want   map[spans.Phase]time.Duration
	}{
		{"all seen", [4]time.Time{ms(0), ms(5), ms(50), ms(300)},
			map[spans.Phase]time.Duration{spans.LLMQueue: 5 * time.Millisecond, spans.LLMPrefill: 45 * time.Millisecond, spans.LLMDecode: 250 * time.Millisecond}},
		{"queued and scheduled never seen: only decode", [4]time.Time{{}, {}, ms(50), ms(300)},
			map[spans.Phase]time.Duration{spans.LLMDecode: 250 * time.Millisecond}},
		{"still decoding at the end", [4]time.Time{ms(0), ms(5), ms(50), {}},
			map[spans.Phase]time.Duration{spans.LLMQueue: 5 * time.Millisecond, spans.LLMPrefill: 45 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorded(t)
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "llm", Start: base})
			_, st := r.in.StartStage(ctx, otelomni.StageInfo{Name: "thinker", Type: attrs.StageLLM, Start: base})
			e := tc.events
			for _, ph := range []struct {
				p          spans.Phase
				start, end time.Time
			}{{spans.LLMQueue, e[0], e[1]}, {spans.LLMPrefill, e[1], e[2]}, {spans.LLMDecode, e[2], e[3]}} {
				if ph.start.IsZero() || ph.end.IsZero() {
					continue // an end not seen: not measured
				}
				if err := st.RecordPhase(ph.p, spans.Between(ph.start, ph.end), nil); err != nil {
					t.Fatal(err)
				}
			}
			st.EndAt(ms(400), nil)
			req.EndAt(ms(400), nil)
			got := byName(r.rec.Ended())
			for _, p := range []spans.Phase{spans.LLMQueue, spans.LLMPrefill, spans.LLMDecode} {
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

func TestLLMPhasesRejectBadInput(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "llm"})
	_, st := r.in.StartStage(ctx, otelomni.StageInfo{Type: attrs.StageLLM})
	now := time.Now()
	if err := st.RecordPhase(spans.LLMQueue, spans.Between(time.Time{}, now), nil); !errors.Is(err, spans.ErrZeroTime) {
		t.Errorf("zero time: %v", err)
	}
	if err := st.RecordPhase(spans.LLMDecode, spans.Between(now, now.Add(-time.Second)), nil); !errors.Is(err, spans.ErrEndBeforeStart) {
		t.Errorf("last token before first: %v", err)
	}
	st.End(nil)
	req.End(nil)
	if n := len(byName(r.rec.Ended())[spans.LLMDecode.SpanName()]); n != 0 {
		t.Errorf("a negative decode made %d spans", n)
	}
	if s := r.in.Stats(); s.RejectedIntervals != 2 {
		t.Errorf("RejectedIntervals = %d, want 2", s.RejectedIntervals)
	}
}

// sentAt is what a sending stage tells the receiving one of a hand-over:
// its wall-clock times of sending, read once each.
type sentAt struct{ start, end time.Time }

func send(d time.Duration) sentAt {
	start := time.Now()
	time.Sleep(d)
	return sentAt{start, start.Add(time.Since(start))}
}

func TestTransferAcrossProcesses(t *testing.T) {
	cases := []struct {
		name string
		// record builds the receiving stage's record from the sender's
		// times (on its own wall clock) and the receipt.
		record  func(tx sentAt, rxStart, rxEnd time.Time) spans.TransferRecord
		parts   []spans.Phase
		skewed  uint64
		wantErr bool
	}{
		{"all parts", func(tx sentAt, rxStart, rxEnd time.Time) spans.TransferRecord {
			return spans.TransferRecord{Tx: spans.Between(tx.start.Round(0), tx.end.Round(0)),
				InFlight: spans.Between(tx.end.Round(0), rxStart), RxDecode: spans.Between(rxStart, rxEnd)}
		}, []spans.Phase{plan.TransferTx, plan.TransferInFlight, plan.TransferRxDecode}, 0, false},
		{"connector reports no send times: no tx, no in flight", func(_ sentAt, rxStart, rxEnd time.Time) spans.TransferRecord {
			return spans.TransferRecord{RxDecode: spans.Between(rxStart, rxEnd)}
		}, []spans.Phase{plan.TransferRxDecode}, 0, false},
		{"sender's clock 10s ahead: in flight left out and counted", func(tx sentAt, rxStart, rxEnd time.Time) spans.TransferRecord {
			ahead := func(t time.Time) time.Time { return t.Round(0).Add(10 * time.Second) }
			return spans.TransferRecord{Tx: spans.Between(ahead(tx.start), ahead(tx.end)),
				InFlight: spans.Between(ahead(tx.end), rxStart), RxDecode: spans.Between(rxStart, rxEnd)}
		}, []spans.Phase{plan.TransferTx, plan.TransferRxDecode}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newTwoProcesses(t)
			ctx, req := p.gw.in.Start(context.Background(), otelomni.RequestInfo{ID: "img-1"})
			tx := send(2 * time.Millisecond)
			time.Sleep(time.Millisecond)
			_, st := p.st.in.StartStage(p.handOver(ctx), otelomni.StageInfo{ID: 1, Name: "dit", Type: attrs.StageDiffusion})
			rxStart := time.Now()
			time.Sleep(time.Millisecond)
			rec := tc.record(tx, rxStart, time.Now())
			rec.FromStage, rec.ToStage, rec.Bytes, rec.Connector = 0, 1, 8<<20, "mooncake"
			if err := st.RecordTransfer(rec); (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			st.End(nil)
			req.End(nil)

			all := p.all()
			tr := one(t, all, plan.TransferSpanName)
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
	if n := len(byName(r.rec.Ended())[plan.TransferSpanName]); n != 0 {
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
	outs := byName(all)[plan.OutputSpanName]
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
			_ = st.RecordPhase(spans.LLMQueue, spans.Between(base, base), nil)
			st.StartPhase(context.Background(), spans.Exec).End(nil)
			_ = st.MarkOutput(false, time.Now())
			_ = st.RecordTransfer(spans.TransferRecord{RxDecode: spans.Between(base, base)})
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
	_ = zero.RecordPhase(spans.LLMPrefill, spans.Between(base, base), nil)
}
