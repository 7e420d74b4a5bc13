// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

func TestEngineStartIsATraceOfItsOwnWithItsSteps(t *testing.T) {
	r := newRecorded(t)
	// Started from a request's context by mistake: still its own trace.
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "r"})
	e := r.in.StartEngine(ctx, otelomni.EngineInfo{Model: "Qwen/Qwen-Image"})
	load := e.StartLoad(otelomni.LoadInfo{Model: "Qwen/Qwen-Image", WeightBytes: 40 << 30, DType: "bfloat16", DeviceKind: "cuda", DeviceCount: 2})
	load.SetAcceleratorMemory(42 << 30)
	load.End(nil)
	e.StartWarmup().End(nil)
	for i, name := range []string{"thinker", "talker"} {
		e.StartStageInit(otelomni.StageInfo{ID: i, Name: name, Type: attrs.StageLLM}).End(nil)
	}
	e.End(nil)
	req.End(nil)
	ss := r.rec.Ended()
	root := one(t, ss, plan.EngineStartSpanName)
	if root.Parent().IsValid() || root.SpanContext().TraceID() == one(t, ss, spans.RequestSpanName).SpanContext().TraceID() {
		t.Error("omni.engine.start must be a trace root of its own, never under a request")
	}
	want := map[string]int{plan.EngineLoadSpanName: 1, plan.EngineWarmupSpanName: 1, plan.EngineStageInitSpanName: 2}
	for name, n := range want {
		got := byName(ss)[name]
		if len(got) != n {
			t.Fatalf("%d %s spans, want %d", len(got), name, n)
		}
		for _, s := range got {
			if s.Parent().SpanID() != root.SpanContext().SpanID() {
				t.Errorf("%s is not a child of omni.engine.start", name)
			}
		}
	}
	l := one(t, ss, plan.EngineLoadSpanName)
	for k, v := range map[string]any{"omni.engine.model": "Qwen/Qwen-Image", "omni.engine.weight_bytes": int64(40 << 30),
		"omni.engine.dtype": "bfloat16", "omni.engine.device.kind": "cuda", "omni.engine.device.count": int64(2),
		"omni.engine.accelerator_memory_bytes": int64(42 << 30)} {
		if got, _ := attr(l, attributeKey(k)); got.AsInterface() != v {
			t.Errorf("%s = %v, want %v", k, got.AsInterface(), v)
		}
	}
}

func TestEngineOnNilAndOffDoesNothing(t *testing.T) {
	var nilIn *otelomni.Instrumenter
	for _, in := range []*otelomni.Instrumenter{nilIn, otelomni.New(otelomni.WithTracerProvider(noopTP()))} {
		e := in.StartEngine(context.Background(), otelomni.EngineInfo{})
		e.StartLoad(otelomni.LoadInfo{}).End(nil)
		e.StartWarmup().End(nil)
		e.End(errors.New("x"))
		b := in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b"})
		_ = b.Record(nil, nil)
		b.End(nil)
	}
}

func TestBatchLinksEveryMemberBothWays(t *testing.T) {
	for _, path := range []string{"live", "record"} {
		t.Run(path, func(t *testing.T) {
			r := newRecorded(t)
			t0 := time.Now()
			var reqs []*otelomni.Request
			var execs []otelomni.ActivePhase
			for _, id := range []string{"a", "b", "c"} {
				ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: id, Start: t0})
				reqs = append(reqs, req)
				if path == "live" {
					execs = append(execs, req.StartPhase(ctx, spans.Exec))
				}
			}
			b := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "step-7", Model: "m", Start: t0}, reqs...)
			for i, req := range reqs {
				if path == "live" {
					execs[i].End(nil)
				} else if err := b.Record(req, &spans.DiffusionRecord{Exec: spans.Between(t0, t0.Add(time.Duration(i+1)*time.Millisecond))}); err != nil {
					t.Fatal(err)
				}
			}
			b.End(nil)
			for _, req := range reqs {
				req.End(nil)
			}
			ss := r.rec.Ended()
			batch := one(t, ss, plan.BatchSpanName)
			if batch.Parent().IsValid() {
				t.Error("omni.batch must be a trace root")
			}
			linked := map[trace.SpanID]bool{}
			for _, l := range batch.Links() {
				linked[l.SpanContext.SpanID()] = true
			}
			execSpans := byName(ss)[spans.Exec.SpanName()]
			if len(execSpans) != 3 || len(linked) != 3 {
				t.Fatalf("%d execs, %d links from the batch; want 3 and 3", len(execSpans), len(linked))
			}
			for _, e := range execSpans {
				if !linked[e.SpanContext().SpanID()] {
					t.Errorf("the batch has no link to exec %s", e.SpanContext().SpanID())
				}
				if len(e.Links()) != 1 || e.Links()[0].SpanContext.SpanID() != batch.SpanContext().SpanID() {
					t.Errorf("exec's links %v, want one back to the batch", e.Links())
				}
				id, _ := attr(e, attrs.BatchIDKey)
				size, _ := attr(e, attrs.BatchSizeKey)
				if id.AsString() != "step-7" || size.AsInt64() != 3 {
					t.Errorf("exec carries batch %q of %d, want step-7 of 3", id.AsString(), size.AsInt64())
				}
			}
		})
	}
}

func TestBatchRecordAfterItsEndRecordsNothing(t *testing.T) {
	r := newRecorded(t)
	t0 := time.Now()
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "late", Start: t0})
	b := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "step-9"}, req)
	b.End(nil)
	before := r.in.Stats().Misuse
	rec := &spans.DiffusionRecord{Exec: spans.Between(t0, time.Now())}
	if err := b.Record(req, rec); !errors.Is(err, otelomni.ErrRequestEnded) {
		t.Errorf("Record after the batch's end: %v, want an error matching ErrRequestEnded", err)
	}
	if got := r.in.Stats().Misuse - before; got != 1 {
		t.Errorf("%d misuse counted, want 1", got)
	}
	if n := len(byName(r.rec.Ended())[spans.Exec.SpanName()]); n != 0 {
		t.Fatalf("%d exec spans recorded in an ended batch, want 0", n)
	}
	// Nothing was taken: the member records its exec without the batch.
	if err := req.Record(rec); err != nil {
		t.Fatal(err)
	}
	req.End(nil)
	ss := r.rec.Ended()
	exec := one(t, ss, spans.Exec.SpanName())
	if _, ok := attr(exec, attrs.BatchIDKey); ok || len(exec.Links()) != 0 {
		t.Errorf("the exec carries a batch: links %v", exec.Links())
	}
	if linksTo(one(t, ss, plan.BatchSpanName), exec) {
		t.Error("the ended batch links the exec")
	}
}

func TestABatchMemberWithoutExecIsLinkedBothWaysByItsRequest(t *testing.T) {
	r := newRecorded(t)
	_, a := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "a"})
	_, gone := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "gone"})
	b := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b"}, a, gone)
	gone.End(nil) // ended before the batch: linked neither way
	b.End(nil)
	a.End(nil)
	ss := r.rec.Ended()
	batch := one(t, ss, plan.BatchSpanName)
	var reqA, reqGone sdktrace.ReadOnlySpan
	for _, s := range byName(ss)[spans.RequestSpanName] {
		if v, _ := attr(s, attrs.RequestIDKey); v.AsString() == "a" {
			reqA = s
		} else {
			reqGone = s
		}
	}
	if !linksTo(batch, reqA) || !linksTo(reqA, batch) {
		t.Error("a member with no exec must be linked both ways by its request span")
	}
	if linksTo(batch, reqGone) || linksTo(reqGone, batch) {
		t.Error("a member that ended before the batch must be linked neither way")
	}
}

func TestAnExecRunsInOneBatch(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "m"})
	exec := req.StartPhase(ctx, spans.Exec)
	b1 := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b1"}, req)
	b2 := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b2"}, req, req)
	exec.End(nil)
	b1.End(nil)
	b2.End(nil)
	req.End(nil)
	ss := r.rec.Ended()
	e := one(t, ss, spans.Exec.SpanName())
	if id, _ := attr(e, attrs.BatchIDKey); id.AsString() != "b1" || len(e.Links()) != 1 {
		t.Errorf("exec in batch %q with links %v, want b1's alone", id.AsString(), e.Links())
	}
	for _, b := range byName(ss)[plan.BatchSpanName] {
		if id, _ := attr(b, attrs.BatchIDKey); id.AsString() == "b2" && len(b.Links()) != 0 {
			t.Errorf("b2 links %v: the exec runs in b1", b.Links())
		}
	}
	if c := r.in.Stats().Conflicts; c != 2 {
		t.Errorf("%d conflicts counted, want 2 (the exec given twice to b2)", c)
	}
}

func TestStepsRunGiveExecItsMeanStep(t *testing.T) {
	r := newRecorded(t)
	t0 := time.Now()
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "early-exit", NumInferenceSteps: 50, Start: t0})
	if err := req.Record(&spans.DiffusionRecord{Exec: spans.Between(t0, t0.Add(2800*time.Millisecond)), StepsRun: 28}); err != nil {
		t.Fatal(err)
	}
	req.End(nil)
	ss := r.rec.Ended()
	if v, _ := attr(one(t, ss, spans.Exec.SpanName()), attrs.MeanStepDurationKey); math.Abs(v.AsFloat64()-0.1) > 1e-9 {
		t.Errorf("mean step %v s, want 0.1 (2.8 s / 28 steps run, not / 50 asked)", v.AsFloat64())
	}
	if v, _ := attr(one(t, ss, spans.RequestSpanName), attrs.StepsRunKey); v.AsInt64() != 28 {
		t.Errorf("steps run %d, want 28", v.AsInt64())
	}
}

// TestABatchLinksAtMostItsLimitBothWays: an SDK keeps a bounded number of
// links on a span and evicts the oldest beyond, so a batch links at most
// 1024 members (what otelsetup keeps); a member beyond is linked neither
// way, counted, and recorded all the same, on both paths.
func TestABatchLinksAtMostItsLimitBothWays(t *testing.T) {
	const limit, members = 1024, 1030
	for _, path := range []string{"live", "record"} {
		t.Run(path, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
				sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{LinkCountLimit: limit, AttributeCountLimit: -1, EventCountLimit: -1,
					AttributeValueLengthLimit: -1, AttributePerEventCountLimit: -1, AttributePerLinkCountLimit: -1}))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			in := otelomni.New(otelomni.WithTracerProvider(tp))
			t0 := time.Now()
			var reqs []*otelomni.Request
			var execs []otelomni.ActivePhase
			for i := range members {
				ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: fmt.Sprint(i), Start: t0})
				reqs = append(reqs, req)
				if path == "live" {
					execs = append(execs, req.StartPhase(ctx, spans.Exec))
				}
			}
			before := in.Stats().Conflicts
			b := in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "big", Start: t0}, reqs...)
			refused := 0
			for i, req := range reqs {
				if path == "live" {
					execs[i].End(nil)
				} else if err := b.Record(req, &spans.DiffusionRecord{Exec: spans.Between(t0, time.Now())}); err != nil {
					refused++
				}
			}
			b.End(nil)
			for _, req := range reqs {
				req.End(nil)
			}
			ss := rec.Ended()
			if !assertNoNegativeSpan(t, ss) {
				t.Fatal("a link without its reverse, or a batch id without a link")
			}
			batch := one(t, ss, plan.BatchSpanName)
			if n := len(batch.Links()); n != limit || batch.DroppedLinks() != 0 {
				t.Errorf("the batch links %d members (%d dropped), want %d", n, batch.DroppedLinks(), limit)
			}
			if n := len(byName(ss)[spans.Exec.SpanName()]); n != members {
				t.Errorf("%d execs recorded, want every one of %d", n, members)
			}
			if in.Stats().Conflicts == before {
				t.Error("the members beyond the limit were not counted")
			}
			if path == "record" && refused != members-limit {
				t.Errorf("%d records returned an error, want %d", refused, members-limit)
			}
		})
	}
}
