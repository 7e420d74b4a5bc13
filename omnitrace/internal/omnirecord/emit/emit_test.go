// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package emit

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/input"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// testAnchor places the requests whose input has no time.
var testAnchor = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// defaultLimits are the limits of an import without OTEL_* limits set.
var defaultLimits = Limits{Attributes: sdktrace.DefaultAttributeCountLimit, ValueLength: 4096}

// marshalClient is an OTLP client that keeps each request's encoding, as
// the SDK's exporter hands it over.
type marshalClient struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *marshalClient) Start(context.Context) error { return nil }
func (c *marshalClient) Stop(context.Context) error  { return nil }
func (c *marshalClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rss})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodies = append(c.bodies, b)
	return err
}

// sdkLimits are the SDK's span limits for l, as otelsetup sets them.
func sdkLimits(l Limits) sdktrace.SpanLimits {
	lim := sdktrace.NewSpanLimits()
	lim.AttributeCountLimit, lim.AttributeValueLengthLimit = l.Attributes, l.ValueLength
	return lim
}

// viaRecordPath returns what the SDK's OTLP exporter sends for the spans
// otelomni's record path makes of the requests, with the import's ids,
// and what the record path returned for each.
func viaRecordPath(t testing.TB, reqs []*forms.Request, anchor time.Time, l Limits, res *resource.Resource) (*coltracepb.ExportTraceServiceRequest, []string) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(idGenerator{}),
		sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(sdkLimits(l)))
	in := recordInstrumenter(tp)
	var errs []string
	for _, r := range reqs {
		errs = append(errs, errText(recordPath(context.Background(), r, in, anchor)))
	}
	ctx := context.Background()
	c := &marshalClient{}
	exp, err := otlptrace.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if ss := rec.Ended(); len(ss) > 0 {
		if err := exp.ExportSpans(ctx, ss); err != nil {
			t.Fatal(err)
		}
	}
	var req coltracepb.ExportTraceServiceRequest
	if len(c.bodies) > 0 {
		if err := proto.Unmarshal(c.bodies[0], &req); err != nil {
			t.Fatal(err)
		}
	}
	return &req, errs
}

// viaEmitter returns the import's own encoding of the spans an Emitter
// makes of the requests, decoded, and what Emit returned for each.
func viaEmitter(t testing.TB, reqs []*forms.Request, anchor time.Time, l Limits, res *resource.Resource) (*tracepb.TracesData, []string) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	for _, kv := range res.Attributes() {
		rs.Resource().Attributes().PutStr(string(kv.Key), kv.Value.AsString())
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(otelomni.ScopeName)
	ss.Scope().SetVersion(otelomni.Version)
	ss.SetSchemaUrl(semconv.SchemaURL)
	em := NewEmitter(l, nil)
	var errs []string
	spans := ss.Spans()
	for _, r := range reqs {
		errs = append(errs, errText(em.Emit(r, anchor, &spans)))
	}
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	var out tracepb.TracesData
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatalf("the import's encoding does not decode: %v", err)
	}
	return &out, errs
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sameSpans fails unless the two hold the same resource, scope and spans,
// each span field for field (matched by span id), and the two paths said
// the same of each request.
func sameSpans(t *testing.T, what string, sdk *coltracepb.ExportTraceServiceRequest, sdkErrs []string, ours *tracepb.TracesData, ourErrs []string) int {
	t.Helper()
	for i := range sdkErrs {
		if sdkErrs[i] != ourErrs[i] {
			t.Errorf("%s: request %d: the record path says %q, the import %q", what, i, sdkErrs[i], ourErrs[i])
		}
	}
	byID := func(rss []*tracepb.ResourceSpans) (map[string]*tracepb.Span, []*tracepb.ResourceSpans) {
		m := map[string]*tracepb.Span{}
		for _, rs := range rss {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					k := fmt.Sprintf("%x/%x", s.TraceId, s.SpanId)
					if m[k] != nil {
						t.Fatalf("%s: span %s twice", what, k)
					}
					m[k] = s
				}
			}
		}
		return m, rss
	}
	want, wrs := byID(sdk.ResourceSpans)
	got, grs := byID(ours.ResourceSpans)
	if len(want) != len(got) {
		t.Errorf("%s: %d spans through the SDK, %d from the import", what, len(want), len(got))
	}
	if len(want) > 0 {
		if !proto.Equal(wrs[0].Resource, grs[0].Resource) {
			t.Errorf("%s: resource %v, the SDK's %v", what, grs[0].Resource, wrs[0].Resource)
		}
		ws, gs := wrs[0].ScopeSpans[0], grs[0].ScopeSpans[0]
		if !proto.Equal(ws.Scope, gs.Scope) || ws.SchemaUrl != gs.SchemaUrl {
			t.Errorf("%s: scope %v %q, the SDK's %v %q", what, gs.Scope, gs.SchemaUrl, ws.Scope, ws.SchemaUrl)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, g := want[k], got[k]
		if g == nil {
			t.Errorf("%s: the import lacks %s", what, prototext.Format(w))
			continue
		}
		if !proto.Equal(w, g) {
			t.Errorf("%s: span differs from the SDK's:\nsdk:    %s\nimport: %s", what, prototext.Format(w), prototext.Format(g))
		}
	}
	return len(want)
}

// corpus returns the requests of every fixture, each form, read twice:
// once for each path (placing a request fills in its times).
func corpus(t *testing.T) map[string][2][]*forms.Request {
	t.Helper()
	out := map[string][2][]*forms.Request{}
	files, err := filepath.Glob("../testdata/*.*")
	if err != nil {
		t.Fatal(err)
	}
	run, _ := filepath.Glob("../testdata/run/*")
	for _, name := range append(files, run...) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		a, b := readAll(t, data), readAll(t, data)
		out[name] = [2][]*forms.Request{a.reqs, b.reqs}
	}
	lines := []string{
		good,
		// Two stages, a hand-over, an LLM stage, phases of every kind.
		`{"request_id": "m", "model": "Qwen/Qwen3-Omni", "arrival_time": 1796000000.125, "modality": "audio", "num_inference_steps": 4, "guidance_scale": 0, "height": 64, "width": 32, "num_frames": 3,` +
			` "stages": [{"stage_id": 0, "stage_name": "thinker", "stage_type": "llm", "submit_time": 1796000000.127, "stage_gen_time_ms": 100, "vllm_queued_ms": 3, "vllm_prefill_ms": 20, "vllm_decode_ms": 70, "vllm_num_preemptions": 2, "extra": "x"},` +
			` {"stage_id": 1, "stage_name": "dit", "stage_type": "diffusion", "submit_time": 1796000000.26, "rx_transfer_bytes": 4096, "rx_decode_time_ms": 2.5, "rx_in_flight_time_ms": 1, "stage_gen_time_ms": 900, "diffusion_metrics": {"preprocess_time_ms": 0, "diffusion_engine_exec_time_ms": 800, "kv_recv_time_ms": 5, "forward_time_ms": 700, "vae_decode_time_ms": 50, "output_ready_wait_time_ms": 3, "postprocess_time_ms": 20}}]}`,
		// A stage whose submit time lies before its request's arrival: a
		// phase before its scope is refused by both.
		`{"request_id": "early", "arrival_time": 1796000010, "stages": [{"stage_id": 0, "stage_type": "diffusion", "submit_time": 1796000000, "diffusion_engine_exec_time_ms": 5, "postprocess_time_ms": 1}]}`,
		// Hostile strings: invalid UTF-8, a long model, a stage type
		// nobody knows, an unknown key with a long value.
		"{\"request_id\": \"bad-\xff\xfe-\\ud800-id\", \"model\": \"" + strings.Repeat("m", 5000) + "\", \"modality\": \"v\xffideo\", \"arrival_time\": 1796000000, \"stages\": [{\"stage_id\": 7, \"stage_name\": \"n\xc3\", \"stage_type\": \"quantum\", \"submit_time\": 1796000000, \"stage_gen_time_ms\": 1, \"k\xff\": \"" + strings.Repeat("日", 600) + "\"}]}",
	}
	for i := 0; i < 70; i++ {
		// More unknown keys than a span keeps.
		lines[len(lines)-1] = strings.Replace(lines[len(lines)-1], `"stage_gen_time_ms": 1`, fmt.Sprintf(`"stage_gen_time_ms": 1, "x%d": %d`, i, i), 1)
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	a, b := readAll(t, data), readAll(t, data)
	if len(a.reqs) != len(lines) {
		t.Fatalf("%d of %d lines read: %q", len(a.reqs), len(lines), a.problems)
	}
	out["lines"] = [2][]*forms.Request{a.reqs, b.reqs}
	return out
}

// TestTheImportMakesTheRecordPathsSpans: for the requests of every form,
// the spans an import makes are those otelomni's record path makes
// through the SDK (and the SDK's OTLP exporter sends), field for field:
// names, ids and parents, kinds, times, attributes and their dropped
// counts, status, flags, resource and scope; and the two say the same of
// each request. It holds under the default limits, and under limits that
// drop attributes and cut values.
func TestTheImportMakesTheRecordPathsSpans(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"), attribute.String("deployment", "t"))
	for _, l := range []Limits{defaultLimits, {Attributes: 5, ValueLength: 3}, {Attributes: 0, ValueLength: -1}, {Attributes: -1, ValueLength: 0}} {
		total := 0
		for name, reqs := range corpus(t) {
			what := fmt.Sprintf("%s, limits %+v", name, l)
			sdk, sdkErrs := viaRecordPath(t, reqs[0], testAnchor, l, res)
			ours, ourErrs := viaEmitter(t, reqs[1], testAnchor, l, res)
			total += sameSpans(t, what, sdk, sdkErrs, ours, ourErrs)
		}
		if total < 150 {
			t.Errorf("limits %+v: %d spans compared in all: the corpus is not what the test is about", l, total)
		}
	}
}

// FuzzEmitMatchesTheRecordPath: any JSON-lines record the parser accepts
// makes the spans the record path makes of it through the SDK.
func FuzzEmitMatchesTheRecordPath(f *testing.F) {
	f.Add([]byte(good), uint8(0))
	f.Add([]byte(`{"request_id": "r", "arrival_time": 1796000000, "stages": [{"stage_id": 0, "submit_time": 1796000000, "vllm_queued_ms": 1},`+
		` {"stage_id": 2147483647, "stage_name": "\u00e9", "submit_time": 1796000000.5, "rx_transfer_bytes": 1, "rx_decode_time_ms": 0, "forward_time_ms": 1}]}`), uint8(1))
	res := resource.NewSchemaless(attribute.String("service.name", "omnitrace"))
	f.Fuzz(func(t *testing.T, line []byte, lim uint8) {
		a, err := forms.Parse(line)
		if err != nil {
			return
		}
		b, _ := forms.Parse(line)
		l := defaultLimits
		if lim&1 != 0 {
			l = Limits{Attributes: int(lim >> 4), ValueLength: int(lim>>1) & 7}
		}
		sdk, sdkErrs := viaRecordPath(t, []*forms.Request{a}, testAnchor, l, res)
		ours, ourErrs := viaEmitter(t, []*forms.Request{b}, testAnchor, l, res)
		sameSpans(t, "fuzzed", sdk, sdkErrs, ours, ourErrs)
	})
}

// TestCountsAreClamped: a count beyond 32 bits is clamped.
func TestCountsAreClamped(t *testing.T) {
	if clampCount(math.MaxInt) != math.MaxUint32 {
		t.Error("a count beyond 32 bits is not clamped")
	}
}

func TestPlaceFollowsThePhaseOrder(t *testing.T) {
	line := strings.Replace(good, `"postprocess_time_ms": 45.2`,
		`"postprocess_time_ms": 45.2, "preprocess_time_ms": 5, "kv_recv_time_ms": 3, "forward_time_ms": 1900, "vae_decode_time_ms": 100, "output_ready_wait_time_ms": 0`, 1)
	r, err := forms.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	st := r.Stages[0]
	p := place(&st)
	d := p.Diffusion
	ms := func(n float64) time.Time { return st.Submit.Add(time.Duration(n * float64(time.Millisecond))) }
	check := func(name string, iv spans.Interval, from, to float64) {
		t.Helper()
		if !iv.Start().Equal(ms(from)) || !iv.End().Equal(ms(to)) {
			t.Errorf("%s: %v, want %v..%v ms after submit", name, iv, from, to)
		}
	}
	check("preprocess", d.Preprocess, 0, 5)
	check("exec", d.Exec, 5, 2105)
	check("queue wait", d.QueueWait, 5, 17)
	check("kv recv", d.KVRecv, 17, 20)
	check("forward", d.Forward, 20, 1920)
	check("vae decode", d.VAEDecode, 1920, 2020)
	check("output-ready wait", d.OutputReadyWait, 2105, 2105)
	check("postprocess", d.Postprocess, 2105, 2150.2)
	if !d.Reconstructed {
		t.Error("placed phases are reconstructed")
	}
	// stage_gen_time (2310.5 ms) ends the stage after its last phase.
	if !p.End.Equal(ms(2310.5)) {
		t.Errorf("stage end %v", p.End.Sub(st.Submit))
	}
}

// good is a JSON-lines record of one single-stage request.
const good = `{"request_id": "chatcmpl-ac59cea85b422f04", "model": "Qwen/Qwen-Image", "arrival_time": 1796000000.125, "modality": "image", "num_inference_steps": 50, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": 1796000000.127, "stage_gen_time_ms": 2310.5, "diffusion_metrics": {"scheduler_queue_wait_ms": 12.0, "diffusion_engine_exec_time_ms": 2100.0, "postprocess_time_ms": 45.2}}]}`

// collected keeps what an input hands on.
type collected struct {
	reqs     []*forms.Request
	problems []string
}

func (c *collected) Request(r *forms.Request, _ time.Time) { c.reqs = append(c.reqs, r) }
func (c *collected) Problem(line int, err error) {
	c.problems = append(c.problems, fmt.Sprint(line, ": ", err))
}

// readAll reads data as an input of any form, line by line.
func readAll(t *testing.T, data []byte) *collected {
	t.Helper()
	c := &collected{}
	in, err := input.NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), input.Options{}, c)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		in.Line(bytes.TrimRight(l, "\r\n"), off)
		off += int64(len(l))
	}
	in.End()
	return c
}
