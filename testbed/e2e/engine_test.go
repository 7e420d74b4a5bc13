// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// jaegerSpan is what this test reads of a span from Jaeger's /api/v3: the
// links, which the views do not need.
type jaegerSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Attributes   []struct {
		Key   string `json:"key"`
		Value struct {
			String string `json:"stringValue"`
			Int    string `json:"intValue"`
		} `json:"value"`
	} `json:"attributes"`
	Links []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
}

func (s jaegerSpan) attr(k string) string {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value.String + a.Value.Int
		}
	}
	return ""
}

// fetchTrace reads one trace's spans from Jaeger, waiting for them to land.
func fetchTrace(t *testing.T, query, traceID string, want int) []jaegerSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + query + "/api/v3/traces/" + traceID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc struct {
			Result struct {
				ResourceSpans []struct {
					ScopeSpans []struct {
						Spans []jaegerSpan `json:"spans"`
					} `json:"scopeSpans"`
				} `json:"resourceSpans"`
			} `json:"result"`
		}
		var out []jaegerSpan
		if resp.StatusCode == http.StatusOK && json.Unmarshal(b, &doc) == nil {
			for _, rs := range doc.Result.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					out = append(out, ss.Spans...)
				}
			}
		}
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestEngineStartAndBatchesLandInJaeger: the engine's start trace with its
// steps, and a batch whose links point at every member's exec span and
// back, as a real Jaeger stores them.
func TestEngineStartAndBatchesLandInJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPEndpoint("grpc"))
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithServiceName("e2e-engine"))
	if err != nil {
		t.Fatal(err)
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))

	e := in.StartEngine(context.Background(), otelomni.EngineInfo{Model: "Qwen/Qwen-Image"})
	load := e.StartLoad(otelomni.LoadInfo{Model: "Qwen/Qwen-Image", WeightBytes: 40 << 30, DType: "bfloat16", DeviceKind: "cuda", DeviceCount: 1})
	load.SetAcceleratorMemory(41 << 30)
	load.End(nil)
	e.StartWarmup().End(nil)
	e.StartStageInit(otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion}).End(nil)
	engineTrace := e.Context()
	e.End(nil)

	const members = 3
	var reqs []*otelomni.Request
	var execs []otelomni.ActivePhase
	for i := 0; i < members; i++ {
		ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: fmt.Sprintf("member-%d", i), Model: "Qwen/Qwen-Image"})
		reqs = append(reqs, req)
		execs = append(execs, req.StartPhase(ctx, spans.Exec))
	}
	b := in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "step-42", Model: "Qwen/Qwen-Image"}, reqs...)
	for i := range reqs {
		execs[i].End(nil)
		reqs[i].End(nil)
	}
	b.End(nil)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The engine's start: a root of its own, its steps under it.
	es := fetchTrace(t, j.Query, traceIDOf(engineTrace), 4)
	names := map[string]int{}
	var root jaegerSpan
	for _, s := range es {
		names[s.Name]++
		if s.Name == plan.EngineStartSpanName {
			root = s
		}
	}
	if root.SpanID == "" || root.ParentSpanID != "" {
		t.Fatalf("no omni.engine.start root in Jaeger: %v", names)
	}
	for _, n := range []string{plan.EngineLoadSpanName, plan.EngineWarmupSpanName, plan.EngineStageInitSpanName} {
		if names[n] != 1 {
			t.Errorf("%d %s spans in the engine's trace, want 1", names[n], n)
		}
	}
	for _, s := range es {
		if s.Name == plan.EngineLoadSpanName && (s.ParentSpanID != root.SpanID || s.attr("omni.engine.weight_bytes") != fmt.Sprint(40<<30) ||
			s.attr("omni.engine.accelerator_memory_bytes") != fmt.Sprint(41<<30)) {
			t.Errorf("load span %+v", s)
		}
	}

	// The batch: its own trace, a link to every member's exec, and back.
	bs := fetchTrace(t, j.Query, b.SpanContext().TraceID().String(), 1)
	if len(bs) != 1 || bs[0].Name != plan.BatchSpanName || bs[0].attr("omni.batch.size") != fmt.Sprint(members) {
		t.Fatalf("batch trace %+v", bs)
	}
	if len(bs[0].Links) != members {
		t.Fatalf("the batch links to %d spans, want %d", len(bs[0].Links), members)
	}
	for _, l := range bs[0].Links {
		var exec *jaegerSpan
		for _, s := range fetchTrace(t, j.Query, l.TraceID, 2) {
			if s.SpanID == l.SpanID {
				exec = &s
			}
		}
		if exec == nil || exec.Name != spans.Exec.SpanName() {
			t.Fatalf("the batch's link %s/%s does not point at an exec span in Jaeger", l.TraceID, l.SpanID)
		}
		if exec.attr("omni.batch.id") != "step-42" || exec.attr("omni.batch.size") != fmt.Sprint(members) {
			t.Errorf("exec carries batch %q of %q", exec.attr("omni.batch.id"), exec.attr("omni.batch.size"))
		}
		if len(exec.Links) != 1 || exec.Links[0].SpanID != bs[0].SpanID {
			t.Errorf("exec's links %+v, want one back to the batch %s", exec.Links, bs[0].SpanID)
		}
	}
}

func traceIDOf(ctx context.Context) string {
	return spanContextOf(ctx).TraceID().String()
}

func spanContextOf(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }
