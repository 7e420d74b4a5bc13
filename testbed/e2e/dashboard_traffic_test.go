// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// The dashboard's traffic: requests of every modality, in every scenario,
// rebuilt from timing records with chosen durations (otelomni's record
// path) and exported by otelsetup over OTLP, so that what each panel must
// show is known by construction, whatever the machine's speed.

// dashModalities are the RequestInfo.Modality values sent, and the
// omni.output.modality their measurements carry ("" for none).
var dashModalities = []struct{ sent, metric string }{
	{attrs.ModalityImage, "image"}, {attrs.ModalityVideo, "video"}, {attrs.ModalityAudio, "audio"},
	{attrs.ModalityText, "text"}, {attrs.ModalityLatent, "latent"},
	{"Image", "_OTHER"}, {"vid\u00e9o", "_OTHER"}, {"", ""},
}

// dashScenario is one request's shape: its length, its queue wait, whether
// it had a pre-processor, and how it failed.
type dashScenario struct {
	name     string
	d, queue time.Duration
	pre      bool
	errType  string
}

var dashScenarios = []dashScenario{
	{name: "normal", d: 200 * time.Millisecond, queue: 20 * time.Millisecond, pre: true},
	{name: "no pre-processor, a queue wait measured as 0", d: 300 * time.Millisecond},
	{name: "slow", d: 61 * time.Second, queue: 50 * time.Millisecond, pre: true},
	{name: "failing", d: 250 * time.Millisecond, queue: 30 * time.Millisecond, pre: true, errType: "stage_error"},
	{name: "timed out", d: 400 * time.Millisecond, queue: 40 * time.Millisecond, errType: "timeout"},
	{name: "saturated 1.5 s", d: 1800 * time.Millisecond, queue: 1500 * time.Millisecond, pre: true},
	{name: "saturated 3 s", d: 3300 * time.Millisecond, queue: 3 * time.Second, pre: true},
	{name: "saturated 6 s", d: 6300 * time.Millisecond, queue: 6 * time.Second},
}

// dashErr is a failure with its error.type.
type dashErr string

func (e dashErr) Error() string     { return "failed: " + string(e) }
func (e dashErr) ErrorType() string { return string(e) }

// dashSample is one measurement of omni.phase.duration.
type dashSample struct {
	phase, modality string
	d               time.Duration
}

// dashRequest is what one request measured.
type dashRequest struct {
	traceID, modality, errType string
	samples                    []dashSample
}

// dashTraffic is every request sent.
type dashTraffic struct {
	reqs []dashRequest
}

// samples returns every phase measurement.
func (tr *dashTraffic) samples() []dashSample {
	var out []dashSample
	for _, r := range tr.reqs {
		out = append(out, r.samples...)
	}
	return out
}

// startDashboardEngine sets otelsetup up as an engine of the tier: OTLP to
// endpoint, spans and metrics, with the environment env (the kept
// exemplars and the tier's thresholds).
func startDashboardEngine(t *testing.T, endpoint string, env map[string]string) (*otelsetup.Telemetry, *otelomni.Instrumenter) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for k, v := range map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_SERVICE_NAME": "e2e-dashboard", "OTEL_METRICS_EXPORTER": "otlp",
		"OTEL_METRIC_EXPORT_INTERVAL": "500", "OTEL_BSP_SCHEDULE_DELAY": "200",
	} {
		t.Setenv(k, v)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(tel.MeterProvider()),
		otelomni.WithProviderName("vllm_omni"))
	return tel, in
}

// sendWave sends one request of each modality in each scenario, and for
// audio also as a multi-stage request whose LLM stage is a stage scope of
// its own, whose measurements carry no modality.
func (tr *dashTraffic) sendWave(t *testing.T, in *otelomni.Instrumenter) {
	t.Helper()
	for _, m := range dashModalities {
		llm := m.metric == "audio" || m.metric == "text" || m.metric == "latent"
		for _, sc := range dashScenarios {
			tr.send(t, in, m.sent, m.metric, sc, llm, false)
			if m.metric == "audio" {
				tr.send(t, in, m.sent, m.metric, sc, true, true)
			}
		}
	}
}

const (
	dashPre  = 10 * time.Millisecond
	dashPost = 20 * time.Millisecond
)

func (tr *dashTraffic) send(t *testing.T, in *otelomni.Instrumenter, sent, metric string, sc dashScenario, llm, multiStage bool) {
	t.Helper()
	t0 := time.Now().Add(-sc.d - time.Second)
	end := t0.Add(sc.d)
	info := otelomni.RequestInfo{ID: "dash-" + sc.name, Model: "dash-model", Modality: sent, Start: t0}
	switch {
	case multiStage:
	case llm:
		info.Stage = otelomni.StageInfo{ID: 0, Name: "thinker", Type: attrs.StageLLM}
	default:
		info.Stage = otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion}
	}
	ctx, r := in.Start(context.Background(), info)
	req := dashRequest{traceID: trace.SpanContextFromContext(ctx).TraceID().String(), modality: metric, errType: sc.errType}
	var err error
	if sc.errType != "" {
		err = dashErr(sc.errType)
	}
	check := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatalf("%s: %v", sc.name, e)
		}
	}
	if llm {
		// A stage of this process under the request: its measurements carry
		// the request's modality.
		scope, mod := r, metric
		if multiStage {
			_, scope = in.StartStage(ctx, otelomni.StageInfo{ID: 0, Name: "thinker", Type: attrs.StageLLM, Start: t0})
		}
		scheduled := t0.Add(sc.queue)
		first := scheduled.Add((end.Sub(scheduled)) / 4)
		check(scope.RecordPhase(spans.LLMQueue, spans.Between(t0, scheduled), nil))
		req.samples = append(req.samples, dashSample{"llm.queue", mod, sc.queue})
		if err == nil {
			check(scope.RecordPhase(spans.LLMPrefill, spans.Between(scheduled, first), nil))
			check(scope.RecordPhase(spans.LLMDecode, spans.Between(first, end), nil))
			req.samples = append(req.samples, dashSample{"llm.prefill", mod, first.Sub(scheduled)}, dashSample{"llm.decode", mod, end.Sub(first)})
		}
		if multiStage {
			check(scope.EndAt(end, err))
		}
	} else {
		execStart := t0
		if sc.pre {
			check(r.RecordPhase(spans.Preprocess, spans.Between(t0, t0.Add(dashPre)), nil))
			req.samples = append(req.samples, dashSample{"preprocess", metric, dashPre})
			execStart = t0.Add(dashPre)
		}
		check(r.RecordPhase(spans.QueueWait, spans.Between(execStart, execStart.Add(sc.queue)), nil))
		req.samples = append(req.samples, dashSample{"queue_wait", metric, sc.queue})
		if err == nil {
			check(r.RecordPhase(spans.Exec, spans.Between(execStart, end.Add(-dashPost)), nil))
			check(r.RecordPhase(spans.Postprocess, spans.Between(end.Add(-dashPost), end), nil))
			req.samples = append(req.samples, dashSample{"exec", metric, end.Add(-dashPost).Sub(execStart)},
				dashSample{"postprocess", metric, dashPost})
		}
	}
	check(r.EndAt(end, err))
	tr.reqs = append(tr.reqs, req)
}
