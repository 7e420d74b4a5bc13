// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// The tier's rules, written here from deploy/collector.yaml's policies
// independently of exemplar.go and package keep: they are read from the
// spans as the exporter received them.
type tierRules struct {
	image, video, audio, other, queue int64 // ms
	percent                           float64
	salt                              string
}

// keptBy says the tier keeps the trace of span s, by one span's rules.
func (r tierRules) keptBy(s sdktrace.ReadOnlySpan) bool {
	if s.Status().Code == codes.Error {
		return true
	}
	d := s.EndTime().UnixNano() - s.StartTime().UnixNano()
	switch s.Name() {
	case "omni.request":
		var mod any // absent
		for _, kv := range s.Attributes() {
			if kv.Key == "omni.output.modality" {
				mod = kv.Value.AsInterface()
			}
		}
		th := r.other
		switch mod {
		case "image":
			th = r.image
		case "video":
			th = r.video
		case "audio":
			th = r.audio
		}
		return d > th*1e6
	case "omni.diffusion.queue_wait", "omni.llm.queue":
		return d > r.queue*1e6
	}
	return false
}

// baseline is the probabilistic policy: FNV-1a of the salt then the trace
// id, kept when at most MaxUint64 times the share (computed exactly).
func (r tierRules) baseline(id trace.TraceID) bool {
	h := fnv.New64a()
	h.Write([]byte(r.salt))
	h.Write(id[:])
	q := new(big.Rat).SetFloat64(r.percent / 100)
	q.Mul(q, new(big.Rat).SetInt(new(big.Int).SetUint64(math.MaxUint64)))
	th := new(big.Int).Quo(q.Num(), q.Denom())
	return r.percent > 0 && th.IsUint64() && h.Sum64() <= th.Uint64()
}

// captureWarnings collects what is handed to the OpenTelemetry error
// handler until the test ends.
func captureWarnings(t *testing.T) func() []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); got = append(got, err.Error()); mu.Unlock() }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func (r tierRules) env(t testing.TB) {
	t.Helper()
	for k, v := range map[string]string{
		"OMNI_SLOW_IMAGE_MS": strconv.FormatInt(r.image, 10), "OMNI_SLOW_VIDEO_MS": strconv.FormatInt(r.video, 10),
		"OMNI_SLOW_AUDIO_MS": strconv.FormatInt(r.audio, 10), "OMNI_SLOW_OTHER_MS": strconv.FormatInt(r.other, 10),
		"OMNI_QUEUE_BUDGET_MS": strconv.FormatInt(r.queue, 10), "OMNI_SAMPLE_PERCENT": strconv.FormatFloat(r.percent, 'f', -1, 64),
		"OMNI_SAMPLE_SALT": r.salt,
	} {
		t.Setenv(k, v)
	}
}

// withExporter exports through exp, as the environment's exporter would.
func withExporter(exp sdktrace.SpanExporter) Option {
	return optionFunc(func(c *config) { c.exporter = exp })
}

// exemplarBed is a Setup with kept exemplars, an in-memory exporter behind
// otelsetup's export path, a delta manual reader (each collection holds
// the exemplars of the measurements since the last), and otelomni on them.
type exemplarBed struct {
	tel    *Telemetry
	exp    *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	in     *otelomni.Instrumenter
}

// newExemplarBed sets up the bed; the caller has unset the OTEL_*
// variables (unsetOTel) before setting its own.
func newExemplarBed(t testing.TB, opts ...Option) *exemplarBed {
	t.Helper()
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	b := &exemplarBed{exp: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader(
		sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality }))}
	tel, err := Setup(context.Background(), append([]Option{WithoutGlobal(), withExporter(b.exp), WithMetricReader(b.reader)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	b.tel = tel
	b.in = otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(tel.MeterProvider()))
	return b
}

// exemplars collects and returns, per instrument, the trace ids of the
// exemplars the last measurements left.
func (b *exemplarBed) exemplars(t testing.TB) map[string][]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
				for _, dp := range h.DataPoints {
					for _, ex := range dp.Exemplars {
						out[m.Name] = append(out[m.Name], trace.TraceID(ex.TraceID).String())
					}
				}
			}
		}
	}
	return out
}

// exported flushes and returns the spans exported since the last call.
func (b *exemplarBed) exported(t *testing.T) []tracetest.SpanStub {
	t.Helper()
	if err := b.tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ss := b.exp.GetSpans()
	b.exp.Reset()
	return ss
}

// The modalities a client may send: the ones the tier tells apart, the
// others, and values that one of the limits cuts into one the tier tells
// apart (on the SDK's count of characters or on the exporter's of bytes).
var clientModalities = []string{"image", "video", "audio", "text", "latent", "", "Image", "imagery", "image\xff",
	"image\u00e9", "image\u4e00", "image\U0001F600", "videos", "audio\u00e9\u00e9", "imag"}

// TestKeptExemplarsLeadToTracesTheTierKeepsWhateverTheLimits runs
// requests of every modality, lasting around every threshold, failed or
// not, with a queue wait around the budget, under span attribute value
// limits of 1 to 8 characters and count limits of 0 to 8, and checks each
// exemplar against the tier's rules applied to the spans as they were
// exported: every exemplar names a trace the tier keeps, and every
// request the tier keeps by its request span or queue wait has its
// exemplar there.
func TestKeptExemplarsLeadToTracesTheTierKeepsWhateverTheLimits(t *testing.T) {
	// The other modalities' threshold below the three the tier tells
	// apart, and above them.
	for _, rules := range []tierRules{
		{image: 3000, video: 5000, audio: 4000, other: 1000, queue: 2000, salt: "s"},
		{image: 1000, video: 1500, audio: 1200, other: 3000, queue: 2000, salt: "s"},
	} {
		t.Run(fmt.Sprintf("other=%dms", rules.other), func(t *testing.T) { keptExemplarsUnderLimits(t, rules) })
	}
}

func keptExemplarsUnderLimits(t *testing.T, rules tierRules) {
	type limits struct{ name, value string }
	var cases []limits
	cases = append(cases, limits{})
	for n := 1; n <= 8; n++ {
		cases = append(cases, limits{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", strconv.Itoa(n)})
	}
	for _, n := range []int{0, 1, 2, 3, 4, 5, 8} {
		cases = append(cases, limits{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", strconv.Itoa(n)})
	}
	cases = append(cases, limits{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "5"})
	const ms = time.Millisecond
	durations := []time.Duration{500 * ms, 1000 * ms, 1000*ms + 1, 1300 * ms, 2500 * ms, 3000 * ms, 3000*ms + 1, 4500 * ms, 6000 * ms}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	total, kept := 0, 0
	for _, lim := range cases {
		t.Run(lim.name+"="+lim.value, func(t *testing.T) {
			var b *exemplarBed
			unsetOTel(t)
			rules.env(t)
			t.Setenv(envExemplars, "kept")
			if lim.name != "" {
				t.Setenv(lim.name, lim.value)
			}
			b = newExemplarBed(t)
			for _, mod := range clientModalities {
				for i, d := range durations {
					var failed error
					if i%3 == 2 {
						failed = errors.New("stage failed")
					}
					q := d / 2 // waits of 250 ms to 3 s, around the budget
					ctx, r := b.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: mod, Start: start,
						Stage: otelomni.StageInfo{Type: "diffusion"}})
					id := trace.SpanContextFromContext(ctx).TraceID().String()
					if err := r.RecordPhase(spans.QueueWait, spans.Between(start, start.Add(q)), nil); err != nil {
						t.Fatal(err)
					}
					if err := r.EndAt(start.Add(d), failed); err != nil {
						t.Fatal(err)
					}
					exs := b.exemplars(t)
					keptBy := map[string]bool{}
					for _, s := range b.exported(t) {
						if s.SpanContext.TraceID().String() != id {
							t.Fatalf("a span of another trace: %v", s.Name)
						}
						if rules.keptBy(s.Snapshot()) {
							keptBy[s.Name] = true
						}
					}
					tierKeeps := len(keptBy) > 0
					total++
					if tierKeeps {
						kept++
					}
					for inst, ids := range exs {
						for _, got := range ids {
							if got != id || !tierKeeps {
								t.Errorf("modality %q, %v, queue %v, failed %v: an exemplar of %s names a trace the tier drops",
									mod, d, q, failed != nil, inst)
							}
						}
					}
					// Each measurement's own span decides its exemplar.
					if keptBy["omni.request"] && len(exs["gen_ai.server.request.duration"]) != 1 {
						t.Errorf("modality %q, %v, failed %v: the tier keeps the request span; its duration has %d exemplars, want 1",
							mod, d, failed != nil, len(exs["gen_ai.server.request.duration"]))
					}
					if keptBy["omni.diffusion.queue_wait"] && len(exs["omni.phase.duration"]) != 1 {
						t.Errorf("modality %q, queue %v: the tier keeps the queue wait; the phase has %d exemplars, want 1",
							mod, q, len(exs["omni.phase.duration"]))
					}
				}
			}
		})
	}
	t.Logf("%d requests, %d of them kept by the tier's rules on the exported spans", total, kept)
}

// TestKeptExemplarsReadTheSpanAsExportedNotAsMeasured: a modality set on
// the request span by the span's own API (the histogram still carries the
// one given at start) is the one the tier reads, and so the one the
// choice reads.
func TestKeptExemplarsReadTheSpanAsExportedNotAsMeasured(t *testing.T) {
	rules := tierRules{image: 3000, video: 60000, audio: 4000, other: 1000, queue: 2000, salt: "s"}
	unsetOTel(t)
	rules.env(t)
	t.Setenv(envExemplars, "kept")
	b := newExemplarBed(t)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		set       attribute.KeyValue
		exemplars int
	}{
		{attribute.String("omni.output.modality", "video"), 0},                // 4 s: no video is that slow
		{attribute.String("omni.output.modality", "text"), 1},                 // other: 1 s
		{attribute.Int("omni.output.modality", 1), 1},                         // not a string: other
		{attribute.StringSlice("omni.output.modality", []string{"image"}), 1}, // nor a slice
	} {
		ctx, r := b.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: start})
		trace.SpanFromContext(ctx).SetAttributes(c.set)
		if err := r.EndAt(start.Add(2500*time.Millisecond), nil); err != nil {
			t.Fatal(err)
		}
		exs := b.exemplars(t)
		kept := false
		for _, s := range b.exported(t) {
			kept = kept || rules.keptBy(s.Snapshot())
		}
		if got := len(exs["gen_ai.server.request.duration"]); got != c.exemplars || kept != (c.exemplars == 1) {
			t.Errorf("modality set to %v: %d exemplars, the tier keeps the trace: %v; want %d", c.set.Value.String(), got, kept, c.exemplars)
		}
	}
}

// TestKeptExemplarsOfTheBaselineShareAreTheTiersHash: with a share of
// 30 %, a request that no other rule keeps has an exemplar exactly when the
// processor's hash keeps its trace id, whatever the salt.
func TestKeptExemplarsOfTheBaselineShareAreTheTiersHash(t *testing.T) {
	for _, salt := range []string{"default-hash-seed", "fleet.eu-1_a"} {
		rules := tierRules{image: 86400000, video: 86400000, audio: 86400000, other: 86400000, queue: 86400000, percent: 30, salt: salt}
		unsetOTel(t)
		rules.env(t)
		t.Setenv(envExemplars, " KEPT ")
		b := newExemplarBed(t)
		in, both := 0, 0
		for i := 0; i < 400; i++ {
			ctx, r := b.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image"})
			id := trace.SpanContextFromContext(ctx).TraceID()
			r.End(nil)
			got := len(b.exemplars(t)["gen_ai.server.request.duration"]) == 1
			want := rules.baseline(id)
			if got != want {
				t.Fatalf("salt %q, trace %s: exemplar %v, the tier's hash keeps it: %v", salt, id, got, want)
			}
			if want {
				in++
			}
			both++
		}
		if in < 80 || in > 160 {
			t.Errorf("salt %q: %d of %d traces in a share of 30 %%", salt, in, both)
		}
		_ = b.exported(t)
	}
}

// TestKeptExemplarsNeedASampledExportedSpan: no exemplar for a measurement
// under an unsampled span (OTEL_METRICS_EXEMPLAR_FILTER=always_on offers
// it), under a span context that is not a span of this SDK, or when Setup
// exports no span; the SDK's own choice is the default, and
// OTELOMNI_EXEMPLARS unset or sdk, in any case, leaves the choice to the
// SDK.
func TestKeptExemplarsNeedASampledExportedSpan(t *testing.T) {
	rules := tierRules{image: 0, video: 0, audio: 0, other: 0, queue: 0, percent: 100, salt: "s"}
	measure := func(t *testing.T, b *exemplarBed, ctx context.Context) int {
		t.Helper()
		_, r := b.in.Start(ctx, otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image"})
		r.End(errors.New("failed"))
		return len(b.exemplars(t)["gen_ai.server.request.duration"])
	}
	t.Run("unsampled", func(t *testing.T) {
		unsetOTel(t)
		rules.env(t)
		t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "always_on")
		t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
		t.Setenv(envExemplars, "kept")
		b := newExemplarBed(t)
		if n := measure(t, b, context.Background()); n != 0 {
			t.Errorf("%d exemplars under an unsampled span", n)
		}
	})
	t.Run("remote", func(t *testing.T) {
		unsetOTel(t)
		rules.env(t)
		t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "always_on")
		t.Setenv(envExemplars, "kept")
		b := newExemplarBed(t)
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true})
		h, err := b.tel.MeterProvider().Meter("t").Float64Histogram("h")
		if err != nil {
			t.Fatal(err)
		}
		h.Record(trace.ContextWithRemoteSpanContext(context.Background(), sc), 1)
		if n := len(b.exemplars(t)["h"]); n != 0 {
			t.Errorf("%d exemplars under a remote span context", n)
		}
	})
	t.Run("another provider", func(t *testing.T) {
		unsetOTel(t)
		rules.env(t)
		t.Setenv(envExemplars, "kept")
		b := newExemplarBed(t)
		other := sdktrace.NewTracerProvider()
		defer other.Shutdown(context.Background())
		in := otelomni.New(otelomni.WithTracerProvider(other), otelomni.WithMeterProvider(b.tel.MeterProvider()))
		_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image"})
		r.End(errors.New("failed"))
		if n := len(b.exemplars(t)["gen_ai.server.request.duration"]); n != 0 {
			t.Errorf("%d exemplars under a span of a tracer provider that Setup did not build", n)
		}
		if n := measure(t, b, context.Background()); n != 1 {
			t.Errorf("%d exemplars under a failed span of Setup's provider, want 1", n)
		}
	})
	t.Run("not exported", func(t *testing.T) {
		rules.env(t)
		warned := captureWarnings(t)
		unsetOTel(t)
		t.Setenv("OTEL_TRACES_EXPORTER", "none")
		t.Setenv("OTEL_METRICS_EXPORTER", "none")
		reader := sdkmetric.NewManualReader()
		rec := tracetest.NewSpanRecorder()
		t.Setenv(envExemplars, "kept")
		tel, err := Setup(context.Background(), WithoutGlobal(), WithMetricReader(reader), WithSpanProcessor(rec))
		if err != nil {
			t.Fatal(err)
		}
		defer tel.Shutdown(context.Background())
		in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(tel.MeterProvider()))
		_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image"})
		r.End(errors.New("failed"))
		b := &exemplarBed{reader: reader}
		if n := len(b.exemplars(t)["gen_ai.server.request.duration"]); n != 0 || len(rec.Ended()) == 0 {
			t.Errorf("%d exemplars when no span is exported (%d spans recorded)", n, len(rec.Ended()))
		}
		if w := warned(); len(w) != 1 || !strings.Contains(w[0], "OTELOMNI_EXEMPLARS=kept: no span is exported") {
			t.Errorf("warnings %q, want one saying no exemplar is kept", w)
		}
	})
	t.Run("sdk", func(t *testing.T) {
		rules := tierRules{image: 86400000, video: 86400000, audio: 86400000, other: 86400000, queue: 86400000, salt: "s"}
		unsetOTel(t)
		rules.env(t)
		for _, v := range []string{"", "sdk", " SDK "} {
			t.Setenv(envExemplars, v)
			b := newExemplarBed(t)
			_, r := b.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image"})
			r.End(nil)
			if n := len(b.exemplars(t)["gen_ai.server.request.duration"]); n != 1 {
				t.Errorf("OTELOMNI_EXEMPLARS=%q: %d exemplars of a sampled request that no rule keeps, want the SDK's 1", v, n)
			}
		}
	})
}

// TestExemplarVariablesAreWarnedAboutAndIgnored: each value that is not
// valid gives one warning naming the variable, the value and what is used,
// Setup succeeds with tracing on, and the rule the variable sets vouches
// for nothing, while the others hold.
func TestExemplarVariablesAreWarnedAboutAndIgnored(t *testing.T) {
	rules := tierRules{image: 1000, video: 1000, audio: 1000, other: 1000, queue: 1000, salt: "s"}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	bad := []string{"-1", " 5", "5 ", "5.0", "1e3", "05", "+5", "86400001", "99999999999999999999", "NaN", "Inf",
		"\u0665", "0x10", "5ms", "\xff", strings.Repeat("9", 4096)}
	for _, name := range []string{"OMNI_SLOW_IMAGE_MS", "OMNI_SLOW_OTHER_MS", "OMNI_QUEUE_BUDGET_MS", "OMNI_SAMPLE_PERCENT", "OMNI_SAMPLE_SALT", envExemplars} {
		values := bad
		switch name {
		case "OMNI_SAMPLE_PERCENT":
			values = []string{"-1", " 5", "5 ", "1e3", "05", "+5", "NaN", "Inf", "\u0665", "0x10", "\xff", "100.5", "101", "-0", ".5", "5.", "1e1", strings.Repeat("9", 4096)}
		case "OMNI_SAMPLE_SALT":
			values = []string{" s", "true", "NULL", "123", "a b", "\xff", strings.Repeat("s", 257), "${x}"}
		case envExemplars:
			values = []string{"kept2", "sampled", "on", "true", "\xff"}
		}
		for _, v := range values {
			t.Run(name+"="+strconv.QuoteToASCII(v)[:min(20, len(strconv.QuoteToASCII(v)))], func(t *testing.T) {
				warned := captureWarnings(t)
				unsetOTel(t)
				rules.env(t)
				if name == "OMNI_SAMPLE_PERCENT" || name == "OMNI_SAMPLE_SALT" {
					rules := rules
					rules.image, rules.video, rules.audio, rules.other, rules.queue, rules.percent = 86400000, 86400000, 86400000, 86400000, 86400000, 100
					rules.env(t)
				}
				if name != envExemplars {
					t.Setenv(envExemplars, "kept")
				}
				t.Setenv(name, v)
				b := newExemplarBed(t)
				if !b.tel.Enabled() {
					t.Fatal("tracing is off")
				}
				got := warned()
				if len(got) != 1 || !strings.Contains(got[0], name+"=") || !strings.Contains(got[0], "ignored") {
					t.Fatalf("warnings %q, want one naming %s", got, name)
				}
				shown := strings.TrimSpace(v[:min(8, len(v))])
				if len(got[0]) > 512 || strings.ContainsAny(got[0], "\n\r") || isASCII(shown) && !strings.Contains(got[0], shown) {
					t.Errorf("the warning %q does not show the value on one short line", got[0])
				}
				// The rule the variable sets vouches for nothing; another
				// one still holds.
				// measure returns the exemplars of the request's duration,
				// or of its queue wait when q > 0.
				measure := func(mod string, d, q time.Duration) int {
					_, r := b.in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: mod, Start: start,
						Stage: otelomni.StageInfo{Type: "diffusion"}})
					if q > 0 {
						_ = r.RecordPhase(spans.QueueWait, spans.Between(start, start.Add(q)), nil)
					}
					_ = r.EndAt(start.Add(d), nil)
					exs := b.exemplars(t)
					if q > 0 {
						return len(exs["omni.phase.duration"])
					}
					return len(exs["gen_ai.server.request.duration"])
				}
				var ignored, held int
				switch name {
				case "OMNI_SLOW_IMAGE_MS":
					ignored, held = measure("image", time.Hour, 0), measure("video", 2*time.Second, 0)
				case "OMNI_SLOW_OTHER_MS":
					ignored, held = measure("text", time.Hour, 0), measure("image", 2*time.Second, 0)
				case "OMNI_QUEUE_BUDGET_MS":
					ignored, held = measure("image", time.Hour, time.Hour), measure("image", 2*time.Second, 0)
				case "OMNI_SAMPLE_PERCENT", "OMNI_SAMPLE_SALT":
					ignored, held = measure("image", time.Second, 0), 1
				case envExemplars:
					// The SDK's choice stands: a request no rule keeps has
					// its exemplar too.
					ignored, held = 1-measure("image", 500*time.Millisecond, 0), measure("image", 2*time.Second, 0)
				}
				if ignored != 0 || held != 1 {
					t.Errorf("%d exemplars by the ignored rule, want 0; %d by another, want 1", ignored, held)
				}
			})
		}
	}
}

// TestKeptExemplarsUnderRacingEnds: measurements of one series made while
// other goroutines end their spans and set their status never keep an
// exemplar of a trace the tier drops.
func TestKeptExemplarsUnderRacingEnds(t *testing.T) {
	rounds := 100_000
	if testing.Short() {
		rounds = 5_000
	}
	rules := tierRules{image: 86400000, video: 86400000, audio: 86400000, other: 86400000, queue: 86400000, salt: "s"}
	unsetOTel(t)
	rules.env(t)
	t.Setenv(envExemplars, "kept")
	b := newExemplarBed(t)
	tr := b.tel.TracerProvider().Tracer("race")
	h, err := b.tel.MeterProvider().Meter("race").Float64Histogram("h")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failed := map[string]bool{}
	const workers = 4
	var wg sync.WaitGroup
	seen := map[string]bool{}
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		// Collects while the workers run: each collection holds the
		// exemplars kept since the last.
		defer close(collected)
		for {
			for _, id := range b.exemplars(t)["h"] {
				seen[id] = true
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < rounds; i += workers {
				ctx, span := tr.Start(context.Background(), "omni.stage")
				fail := i%2 == 0
				if fail {
					mu.Lock()
					failed[span.SpanContext().TraceID().String()] = true
					mu.Unlock()
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					if fail {
						span.SetStatus(codes.Error, "x")
					} else {
						// Set, then cleared before the end: an open span's
						// status is not final.
						span.SetStatus(codes.Error, "x")
						span.SetStatus(codes.Ok, "")
					}
					span.End()
				}()
				h.Record(ctx, 1)
				<-done
				h.Record(ctx, 2)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-collected
	for _, id := range b.exemplars(t)["h"] {
		seen[id] = true
	}
	if len(seen) == 0 {
		t.Fatal("no exemplar at all")
	}
	for id := range seen {
		if !failed[id] {
			t.Errorf("an exemplar names trace %s, which failed nowhere", id)
		}
	}
	t.Logf("%d rounds, exemplars of %d traces collected, each of a failed span", rounds, len(seen))
}

// TestKeptExemplarsOnlyForSpansTheExporterSends: a failed span whose end
// OTLP cannot carry is refused on export, and a request span that ends
// before it starts is sent ending where it starts: neither vouches for
// its trace.
func TestKeptExemplarsOnlyForSpansTheExporterSends(t *testing.T) {
	unsetOTel(t)
	(tierRules{image: 0, video: 0, audio: 0, other: 0, queue: 0, salt: "s"}).env(t)
	t.Setenv(envExemplars, "kept")
	b := newExemplarBed(t)
	tr := b.tel.TracerProvider().Tracer("t")
	h, err := b.tel.MeterProvider().Meter("t").Float64Histogram("h")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, c := range []struct {
		name       string
		end        time.Time
		failed     bool
		exemplars  int
		exportedAs int
	}{
		{"omni.stage", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), true, 0, 0},
		{"omni.request", now.Add(-time.Hour), false, 0, 1},
		{"omni.request", now.Add(time.Millisecond), false, 1, 1},
		{"omni.stage", now.Add(time.Millisecond), true, 1, 1},
	} {
		ctx, span := tr.Start(context.Background(), c.name, trace.WithTimestamp(now),
			trace.WithAttributes(attribute.String("omni.output.modality", "text")))
		if c.failed {
			span.SetStatus(codes.Error, "failed")
		}
		span.End(trace.WithTimestamp(c.end))
		h.Record(ctx, 1)
		got := len(b.exemplars(t)["h"])
		_ = b.tel.ForceFlush(context.Background()) // reports the refused span
		exported := len(b.exp.GetSpans())
		b.exp.Reset()
		if got != c.exemplars || exported != c.exportedAs {
			t.Errorf("%s ending %v, failed %v: %d exemplars, %d spans exported; want %d, %d",
				c.name, c.end.Sub(now), c.failed, got, exported, c.exemplars, c.exportedAs)
		}
	}
}
