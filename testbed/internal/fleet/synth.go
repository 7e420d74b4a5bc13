// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// Synthetic is a request rebuilt from a timing record with chosen durations
// (otelomni's record path), so that which policy it crosses is known by
// construction, whatever the machine's speed. Image and video requests are
// single-stage diffusion requests (request, queue wait, exec: 3 spans); the
// others run one LLM stage (request, stage, queue, prefill, decode: 5).
type Synthetic struct {
	Modality        string
	Duration, Queue time.Duration
	// Err ends the request with status Error when not nil.
	Err error
}

// Producer sends synthetic requests over OTLP, to the exporter the
// OTEL_* variables the caller set name (otelsetup.NewSpanExporter), with
// trace ids from a seeded generator: the same seed gives the same ids,
// hence the same hash-based baseline decisions. Seeded ids are no
// engine's setting, so the producer builds its tracer provider from the
// SDK itself; the SDK's batch processor reads OTEL_BSP_*.
type Producer struct {
	tp  *sdktrace.TracerProvider
	in  *otelomni.Instrumenter
	rec *tracetest.SpanRecorder
	n   atomic.Int64
	// ended, exported and failed count the producer's spans.
	ended, exported, failed atomic.Uint64
}

// NewProducer sets up a producer. With record, it remembers every span (see
// [Producer.Spans]); without, it keeps nothing (for long runs).
func NewProducer(ctx context.Context, seed uint64, record bool) (*Producer, error) {
	exp, err := otelsetup.NewSpanExporter(ctx)
	if err != nil {
		return nil, err
	}
	if exp == nil {
		return nil, errors.New("fleet: OTEL_TRACES_EXPORTER=none leaves the producer nowhere to send")
	}
	p := &Producer{}
	opts := []sdktrace.TracerProviderOption{
		// The environment's resource as it is now (OTEL_SERVICE_NAME):
		// the SDK's default resource is read once per process.
		sdktrace.WithResource(resource.Environment()),
		sdktrace.WithIDGenerator(newSeededIDs(seed)),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(endCounter{&p.ended}),
		sdktrace.WithBatcher(countingExporter{exp, p}),
	}
	if record {
		p.rec = tracetest.NewSpanRecorder()
		opts = append(opts, sdktrace.WithSpanProcessor(p.rec))
	}
	p.tp = sdktrace.NewTracerProvider(opts...)
	p.in = otelomni.New(otelomni.WithTracerProvider(p.tp))
	return p, nil
}

// endCounter counts the spans that end.
type endCounter struct{ n *atomic.Uint64 }

func (endCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c endCounter) OnEnd(sdktrace.ReadOnlySpan)                   { c.n.Add(1) }
func (endCounter) Shutdown(context.Context) error                  { return nil }
func (endCounter) ForceFlush(context.Context) error                { return nil }

// countingExporter counts what its exporter took and what it failed.
type countingExporter struct {
	sdktrace.SpanExporter
	p *Producer
}

func (c countingExporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	if err := c.SpanExporter.ExportSpans(ctx, ss); err != nil {
		c.p.failed.Add(uint64(len(ss)))
		return err
	}
	c.p.exported.Add(uint64(len(ss)))
	return nil
}

// Stats accounts for the spans the producer ended: exported, failed to
// export, and pending, which after a flush or Shutdown were dropped from
// the full queue.
type Stats struct{ Ended, Exported, Failed, Pending uint64 }

// Lost returns the spans that did not reach the collector.
func (s Stats) Lost() uint64 { return s.Failed + s.Pending }

// Send records r as one trace that ended a second ago, and returns its
// trace id.
func (p *Producer) Send(r Synthetic) (string, error) {
	id, end, err := p.Start(r)
	return id, errors.Join(err, end())
}

// Start records every span of r but the request span, which end ends: the
// request span then reaches the collector after the others, as a long
// request's does.
func (p *Producer) Start(r Synthetic) (traceID string, end func() error, err error) {
	n := p.n.Add(1)
	t0 := time.Now().Add(-r.Duration - time.Second)
	t1 := t0.Add(r.Duration)
	info := otelomni.RequestInfo{ID: "synth-" + strconv.FormatInt(n, 10), Model: "synthetic", Modality: r.Modality, Start: t0}
	diffusion := r.Modality == attrs.ModalityImage || r.Modality == attrs.ModalityVideo
	if diffusion {
		info.Stage = otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion}
	}
	ctx, req := p.in.Start(context.Background(), info)
	var errs []error
	if diffusion {
		errs = append(errs,
			req.RecordPhase(spans.QueueWait, spans.Between(t0, t0.Add(r.Queue)), nil),
			req.RecordPhase(spans.Exec, spans.Between(t0, t1), nil))
	} else {
		_, st := p.in.StartStage(ctx, otelomni.StageInfo{ID: 0, Name: "thinker", Type: attrs.StageLLM, Start: t0})
		prefill := t0.Add(r.Queue)
		decode := prefill.Add(t1.Sub(prefill) / 4)
		errs = append(errs,
			st.RecordPhase(spans.LLMQueue, spans.Between(t0, prefill), nil),
			st.RecordPhase(spans.LLMPrefill, spans.Between(prefill, decode), nil),
			st.RecordPhase(spans.LLMDecode, spans.Between(decode, t1), nil),
			st.EndAt(t1, nil))
	}
	id := trace.SpanContextFromContext(ctx).TraceID().String()
	return id, func() error { return req.EndAt(t1, r.Err) }, errors.Join(errs...)
}

// ErrLost is returned by Flush when spans did not reach the collector.
var ErrLost = errors.New("spans lost on the way to the collector")

// Flush exports every span so far. After a flush nothing is queued, so a
// span neither exported nor failed was dropped from the full queue: that
// is an error too.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.tp.ForceFlush(ctx); err != nil {
		return err
	}
	if p.Stats().Lost() > 0 {
		return ErrLost
	}
	return nil
}

// Stats returns the accounting so far.
func (p *Producer) Stats() Stats {
	// The outcomes first: a span counted done is counted ended.
	s := Stats{Exported: p.exported.Load(), Failed: p.failed.Load()}
	s.Ended = p.ended.Load()
	if done := s.Exported + s.Failed; s.Ended > done {
		s.Pending = s.Ended - done
	}
	return s
}

// Shutdown flushes and stops the producer.
func (p *Producer) Shutdown(ctx context.Context) error { return p.tp.Shutdown(ctx) }

// Spans returns how many spans each trace made (a producer made with
// record only).
func (p *Producer) Spans() map[string]int {
	out := map[string]int{}
	if p.rec == nil {
		return out
	}
	for _, s := range p.rec.Ended() {
		out[s.SpanContext().TraceID().String()]++
	}
	return out
}

// seededIDs draws trace and span ids from a seeded generator.
type seededIDs struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newSeededIDs(seed uint64) *seededIDs {
	return &seededIDs{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *seededIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[:8], g.rng.Uint64())
	binary.BigEndian.PutUint64(tid[8:], g.rng.Uint64())
	return tid, g.spanIDLocked()
}

func (g *seededIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spanIDLocked()
}

func (g *seededIDs) spanIDLocked() trace.SpanID {
	var sid trace.SpanID
	for sid == (trace.SpanID{}) {
		binary.BigEndian.PutUint64(sid[:], g.rng.Uint64())
	}
	return sid
}

var _ sdktrace.IDGenerator = (*seededIDs)(nil)
