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

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/setupopt"
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

// Producer sends synthetic requests over OTLP, set up by otelsetup from
// the OTEL_* variables the caller set, with trace ids from a seeded
// generator: the same seed gives the same ids, hence the same hash-based
// baseline decisions.
type Producer struct {
	tel *otelsetup.Telemetry
	in  *otelomni.Instrumenter
	rec *tracetest.SpanRecorder
	n   atomic.Int64
}

// NewProducer sets up a producer. With record, it remembers every span (see
// [Producer.Spans]); without, it keeps nothing (for long runs). Settings of
// setupopt on ctx (batch options) apply beside its own.
func NewProducer(ctx context.Context, seed uint64, record bool, opts ...otelsetup.Option) (*Producer, error) {
	p := &Producer{}
	own := setupopt.From(ctx)
	own.NoMetrics, own.IDGenerator = true, newSeededIDs(seed)
	ctx = setupopt.With(ctx, own)
	opts = append([]otelsetup.Option{otelsetup.WithoutGlobal()}, opts...)
	if record {
		p.rec = tracetest.NewSpanRecorder()
		opts = append(opts, otelsetup.WithSpanProcessor(p.rec))
	}
	var err error
	if p.tel, err = otelsetup.Setup(ctx, opts...); err != nil {
		return nil, err
	}
	p.in = otelomni.New(otelomni.WithTracerProvider(p.tel.TracerProvider()))
	return p, nil
}

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
			req.RecordPhase(spans.QueueWait, spans.Lasting(t0, r.Queue), nil),
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
	if err := p.tel.ForceFlush(ctx); err != nil {
		return err
	}
	if st := p.tel.ExportStats(); st.Lost() > 0 {
		return ErrLost
	}
	return nil
}

// Stats returns the export accounting so far.
func (p *Producer) Stats() otelsetup.ExportStats { return p.tel.ExportStats() }

// Shutdown flushes and stops the producer.
func (p *Producer) Shutdown(ctx context.Context) error { return p.tel.Shutdown(ctx) }

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
