// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// offered is an exemplar reservoir that notes the trace of every
// measurement offered to it: every exemplar the SDK could keep.
type offered struct {
	mu  sync.Mutex
	ids map[trace.TraceID]string
}

func (o *offered) reservoir(string) exemplar.ReservoirProvider {
	return func(attribute.Set) exemplar.Reservoir { return o }
}

func (o *offered) Offer(ctx context.Context, _ time.Time, _ exemplar.Value, _ []attribute.KeyValue) {
	sc := trace.SpanContextFromContext(ctx)
	o.mu.Lock()
	o.ids[sc.TraceID()] = sc.SpanID().String()
	o.mu.Unlock()
}

func (o *offered) Collect(*[]exemplar.Exemplar) {}

// tier keeps a trace by the rules of deploy/collector.yaml at the
// thresholds of the test, from the spans as they end.
type tier struct {
	mu   sync.Mutex
	kept map[trace.TraceID]bool
}

func (k *tier) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (k *tier) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // an exporter sends only sampled spans
	}
	d := s.EndTime().Sub(s.StartTime())
	keep := s.Status().Code == codes.Error
	switch s.Name() {
	case spans.RequestSpanName:
		// OMNI_SLOW_IMAGE_MS=20000, the other modalities 10 s.
		threshold := 10 * time.Second
		for _, kv := range s.Attributes() {
			if kv.Key == attrs.OutputModalityKey && kv.Value.Type() == attribute.STRING && kv.Value.AsString() == "image" {
				threshold = 20 * time.Second
			}
		}
		keep = keep || d > threshold
	case spans.QueueWait.SpanName(), plan.LLMQueue.SpanName():
		keep = keep || d > time.Second // OMNI_QUEUE_BUDGET_MS=1000
	}
	if keep {
		k.mu.Lock()
		k.kept[s.SpanContext().TraceID()] = true
		k.mu.Unlock()
	}
}
func (k *tier) Shutdown(context.Context) error   { return nil }
func (k *tier) ForceFlush(context.Context) error { return nil }

// TestRacingMeasurementsNameOnlyKeptTraces: with no baseline share, phases
// recorded, failed and ended live, a modality set and the request's end
// race on goroutines of their own; every measurement offered as an
// exemplar names a trace the tier's rules keep from the spans that
// ended, and the failed, slow and saturated requests offer some.
func TestRacingMeasurementsNameOnlyKeptTraces(t *testing.T) {
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	t.Setenv("OMNI_QUEUE_BUDGET_MS", "1000")
	rounds := 4000
	if testing.Short() {
		rounds = 400
	}
	off := &offered{ids: map[trace.TraceID]string{}}
	k := &tier{kept: map[trace.TraceID]bool{}}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()),
		sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "*"}, sdkmetric.Stream{
			ExemplarReservoirProviderSelector: func(sdkmetric.Aggregation) exemplar.ReservoirProvider { return off.reservoir("") },
		})))
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k))),
		otelomni.WithMeterProvider(mp))
	boom := errors.New("boom")
	kindOf := map[trace.TraceID]int{}
	for i := 0; i < rounds; i++ {
		kind := i % 5 // normal, failed at its end, failed phase, saturated, slow
		age := time.Second
		if kind == 4 {
			age = 15 * time.Second // past text's 10 s, under image's 20 s
		}
		t0 := time.Now().Add(-age)
		ctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: t0})
		queue := 100 * time.Millisecond
		if kind == 3 {
			queue = 1500 * time.Millisecond
		}
		var wg sync.WaitGroup
		wg.Add(5)
		go func() { defer wg.Done(); _ = r.RecordPhase(spans.QueueWait, spans.Lasting(t0, queue), nil) }()
		go func() {
			defer wg.Done()
			iv := spans.Lasting(t0.Add(queue), 10*time.Millisecond)
			if kind == 2 {
				_ = r.RecordPhase(spans.Preprocess, iv, boom)
			} else {
				_ = r.RecordPhase(spans.Preprocess, iv, nil)
			}
		}()
		go func() {
			defer wg.Done()
			p := r.StartPhase(ctx, spans.Exec)
			p.End(nil)
		}()
		go func() {
			defer wg.Done()
			// image (20 s) to text (10 s): a lower threshold, so that an
			// earlier vouch still holds.
			r.SetAttributes(omniattr.OutputModality("text"))
		}()
		go func() {
			defer wg.Done()
			var err error
			if kind == 1 {
				err = otelomni.ErrStageError
			}
			r.End(err)
		}()
		wg.Wait()
		kindOf[trace.SpanContextFromContext(ctx).TraceID()] = kind
	}
	off.mu.Lock()
	defer off.mu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	bad := 0
	for id, span := range off.ids {
		if !k.kept[id] {
			bad++
			if bad <= 3 {
				t.Errorf("trace %s (span %s, kind %d) was offered as an exemplar; the tier drops it", id, span, kindOf[id])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d traces offered as exemplars are dropped by the tier", bad, len(off.ids))
	}
	// A request failed at its end (1) is always kept, and offers at least
	// its duration; the others are kept when their measurement landed
	// before the end.
	if min := rounds / 5; len(off.ids) < min || len(k.kept) < min {
		t.Errorf("%d traces offered, %d kept; want at least %d each", len(off.ids), len(k.kept), min)
	}
	t.Logf("%d rounds: %d traces kept by the tier's rules, %d offered as exemplars, every one kept", rounds, len(k.kept), len(off.ids))
}

// dropSampler samples every span but those named drop, which it records
// without sampling (recordOnly) or drops.
type dropSampler struct {
	drop       string
	recordOnly bool
}

func (s dropSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Name == s.drop {
		if s.recordOnly {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordOnly}
		}
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}
func (dropSampler) Description() string { return "drop one span name" }

// TestASpanNotExportedVouchesForNothing: a failure, a saturated queue or
// a slow request shown by a span the sampler does not export shows the
// tier nothing, so the request's later measurements carry no exemplar.
func TestASpanNotExportedVouchesForNothing(t *testing.T) {
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	t.Setenv("OMNI_QUEUE_BUDGET_MS", "1000")
	for _, c := range []struct {
		what       string
		drop       string
		recordOnly bool
		age        time.Duration
		first      func(r *otelomni.Request, t0 time.Time) error
	}{
		{"failed preprocess, dropped", spans.Preprocess.SpanName(), false, time.Second, func(r *otelomni.Request, t0 time.Time) error {
			return r.RecordPhase(spans.Preprocess, spans.Lasting(t0, 10*time.Millisecond), errors.New("bad input"))
		}},
		{"failed preprocess, recorded only", spans.Preprocess.SpanName(), true, time.Second, func(r *otelomni.Request, t0 time.Time) error {
			return r.RecordPhase(spans.Preprocess, spans.Lasting(t0, 10*time.Millisecond), errors.New("bad input"))
		}},
		{"saturated queue, dropped", spans.QueueWait.SpanName(), false, 3 * time.Second, func(r *otelomni.Request, t0 time.Time) error {
			return r.RecordPhase(spans.QueueWait, spans.Lasting(t0, 2*time.Second), nil)
		}},
		{"slow request, recorded only", spans.RequestSpanName, true, 30 * time.Second, func(r *otelomni.Request, t0 time.Time) error {
			return r.RecordPhase(spans.Preprocess, spans.Lasting(t0, 10*time.Millisecond), nil)
		}},
	} {
		off := &offered{ids: map[trace.TraceID]string{}}
		k := &tier{kept: map[trace.TraceID]bool{}}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()),
			sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "*"}, sdkmetric.Stream{
				ExemplarReservoirProviderSelector: func(sdkmetric.Aggregation) exemplar.ReservoirProvider { return off.reservoir("") },
			})))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k),
			sdktrace.WithSampler(dropSampler{drop: c.drop, recordOnly: c.recordOnly}))
		in := otelomni.New(otelomni.WithTracerProvider(tp), otelomni.WithMeterProvider(mp))
		t0 := time.Now().Add(-c.age)
		ctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: t0})
		if err := c.first(r, t0); err != nil {
			t.Fatal(err)
		}
		p := r.StartPhase(ctx, spans.Exec)
		p.End(nil)
		r.End(nil)
		// What the tier saw decides what may be offered.
		id := trace.SpanContextFromContext(ctx).TraceID()
		if len(k.kept) != 0 {
			t.Fatalf("%s: the tier keeps a trace; the test needs one it drops", c.what)
		}
		if len(off.ids) != 0 {
			t.Errorf("%s: a span the tier never receives vouched for the trace: an exemplar names it (%v)", c.what, off.ids[id] != "")
		}
	}
}

// TestALaterTransferDoesNotMakeTheRequestSlow: a transfer's parts come
// from two hosts' clocks, and the request span does not wait for them; a
// part that ends past the request's threshold on the sender's clock does
// not make the request slow.
func TestALaterTransferDoesNotMakeTheRequestSlow(t *testing.T) {
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	off := &offered{ids: map[trace.TraceID]string{}}
	k := &tier{kept: map[trace.TraceID]bool{}}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()),
		sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "*"}, sdkmetric.Stream{
			ExemplarReservoirProviderSelector: func(sdkmetric.Aggregation) exemplar.ReservoirProvider { return off.reservoir("") },
		})))
	in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k))), otelomni.WithMeterProvider(mp))
	now := time.Now()
	ctx, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: now.Add(-time.Second)})
	err := r.RecordTransfer(spans.TransferRecord{FromStage: 0, ToStage: 1, Bytes: 100, Connector: "shm",
		Tx: spans.Lasting(now.Add(30*time.Second), time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	p := r.StartPhase(ctx, spans.Exec)
	p.End(nil)
	r.End(nil)
	if len(k.kept) != 0 {
		t.Fatal("the tier keeps the trace; the test needs one it drops")
	}
	if len(off.ids) != 0 {
		t.Errorf("a transfer part ending 30 s ahead made a request of 1 s slow: an exemplar names its trace")
	}
}

// spansOffered is an exemplar reservoir that notes the span of every
// measurement offered to it.
type spansOffered struct {
	mu  sync.Mutex
	ids map[trace.SpanID]bool
}

func (o *spansOffered) Offer(ctx context.Context, _ time.Time, _ exemplar.Value, _ []attribute.KeyValue) {
	o.mu.Lock()
	o.ids[trace.SpanContextFromContext(ctx).SpanID()] = true
	o.mu.Unlock()
}

func (o *spansOffered) Collect(*[]exemplar.Exemplar) {}

// failedSpans notes the spans that ended with status Error.
type failedSpans struct {
	mu  sync.Mutex
	ids map[trace.SpanID]string
}

func (f *failedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (f *failedSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Status().Code == codes.Error {
		f.mu.Lock()
		f.ids[s.SpanContext().SpanID()] = s.Name()
		f.mu.Unlock()
	}
}
func (f *failedSpans) Shutdown(context.Context) error   { return nil }
func (f *failedSpans) ForceFlush(context.Context) error { return nil }

// TestARecordsFailedPhaseOffersItsOwnMeasurement: a diffusion or LLM record
// whose phase failed gives that phase's span status Error before its
// measurement is made, so its own measurement is offered as an exemplar,
// with no baseline share and no other reason to keep the trace.
func TestARecordsFailedPhaseOffersItsOwnMeasurement(t *testing.T) {
	t.Setenv("OMNI_SAMPLE_PERCENT", "0")
	boom := errors.New("boom")
	t0 := time.Now().Add(-time.Second)
	for _, c := range []struct {
		what   string
		record func(r *otelomni.Request) error
	}{
		{"diffusion exec", func(r *otelomni.Request) error {
			return r.Record(&spans.DiffusionRecord{QueueWait: spans.Lasting(t0, time.Millisecond),
				Exec: spans.Lasting(t0.Add(time.Millisecond), 100*time.Millisecond), Err: boom})
		}},
		{"diffusion preprocess", func(r *otelomni.Request) error {
			return r.Record(&spans.DiffusionRecord{Preprocess: spans.Lasting(t0, time.Millisecond),
				Exec: spans.Lasting(t0.Add(time.Millisecond), 100*time.Millisecond), Err: boom, FailedPhase: spans.Preprocess})
		}},
	} {
		off := &spansOffered{ids: map[trace.SpanID]bool{}}
		failed := &failedSpans{ids: map[trace.SpanID]string{}}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()),
			sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "*"}, sdkmetric.Stream{
				ExemplarReservoirProviderSelector: func(sdkmetric.Aggregation) exemplar.ReservoirProvider {
					return func(attribute.Set) exemplar.Reservoir { return off }
				},
			})))
		in := otelomni.New(otelomni.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(failed))), otelomni.WithMeterProvider(mp))
		_, r := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m", Modality: "image", Start: t0})
		if err := c.record(r); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		r.End(nil)
		if len(failed.ids) != 1 {
			t.Fatalf("%s: %d failed spans, want 1", c.what, len(failed.ids))
		}
		for id, name := range failed.ids {
			if !off.ids[id] {
				t.Errorf("%s: the failed %s's own measurement was not offered as an exemplar", c.what, name)
			}
		}
	}
}
