// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
	"github.com/otelomni/otelomni/omnitrace/internal/otlpvalue"
	"github.com/otelomni/otelomni/otelomni"
)

// The import's spans are OpenTelemetry Collector data (pdata's ptrace),
// made by emit.Emitter. Each worker fills a batch of its own, one
// ResourceSpans of the import's resource holding one ScopeSpans of
// otelomni's scope; a full batch (-batch spans, or maxBatchBytes of them,
// or one request's beyond) waits in a queue of at most queue/batch batches
// for the one goroutine that exports, in turn, as the SDK's batch span
// processor does; a batch not full is exported after the schedule delay.

// maxBatchBytes bounds what one batch's spans take of memory (as
// emit.Emitter.Size estimates it), beside its count of spans: spans that
// carry many of the input's keys (up to 128 attributes of up to 1 KiB
// each) would otherwise make a queue of 8 192 spans take a gigabyte. What
// the batches hold is then at most (queue/batch + workers + 1) times this,
// each with one request beyond; and an encoded batch stays under the
// 4 MiB a collector's gRPC receiver takes by default.
const maxBatchBytes = 2 << 20

// sink is where batches go: an OTLP client, or a JSON-lines file.
type sink interface {
	export(ctx context.Context, td ptrace.Traces) error
	// shutdown ends the sink within ctx's deadline, cutting an export
	// in flight short.
	shutdown(ctx context.Context) error
}

// pipeSettings are a pipe's bounds and waits, and the resource of its
// spans.
type pipeSettings struct {
	batch, queue         int
	delay, exportTimeout time.Duration
	resource             []attribute.KeyValue
	resourceSchema       string
}

// pipe carries the spans of the workers' batches to a sink.
type pipe struct {
	set  pipeSettings
	sink sink

	queue   chan ptrace.Traces
	batches []*batch
	mu      sync.Mutex // guards batches

	// base is the context of every export; cancelled once the shutdown's
	// deadline passes.
	base   context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	// flushed is closed once flushLoop has returned: no flush sends on
	// the queue after it.
	flushed  chan struct{}
	exported chan struct{}

	// Counts of spans: ended (made and sampled), failed to export, and
	// dropped (still queued when the shutdown's deadline passed).
	ended, failed, dropped atomic.Int64
}

func newPipe(set pipeSettings, s sink) *pipe {
	p := &pipe{set: set, sink: s, stop: make(chan struct{}), flushed: make(chan struct{}), exported: make(chan struct{})}
	p.queue = make(chan ptrace.Traces, max(1, set.queue/max(set.batch, 1)))
	p.base, p.cancel = context.WithCancel(context.Background())
	go p.exportLoop()
	go p.flushLoop()
	return p
}

// batch is one worker's batch being filled.
type batch struct {
	p     *pipe
	mu    sync.Mutex // the worker's, and the flush's
	td    ptrace.Traces
	spans ptrace.SpanSlice
	// bytes is what its spans take, as the emitter estimates it.
	bytes int
}

// newBatch returns a batch for one worker.
func (p *pipe) newBatch() *batch {
	b := &batch{p: p}
	b.reset()
	p.mu.Lock()
	p.batches = append(p.batches, b)
	p.mu.Unlock()
	return b
}

func (b *batch) reset() {
	b.td = ptrace.NewTraces()
	rs := b.td.ResourceSpans().AppendEmpty()
	otlpvalue.PutAll(rs.Resource().Attributes(), b.p.set.resource)
	rs.SetSchemaUrl(b.p.set.resourceSchema)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(otelomni.ScopeName)
	ss.Scope().SetVersion(otelomni.Version)
	ss.SetSchemaUrl(semconv.SchemaURL)
	b.spans = ss.Spans()
	b.spans.EnsureCapacity(b.p.set.batch)
	b.bytes = 0
}

// emit makes r's spans into the batch, and hands the batch on once full.
func (b *batch) emit(em *emit.Emitter, r *forms.Request, anchor time.Time) error {
	b.mu.Lock()
	n := b.spans.Len()
	err := em.Emit(r, anchor, &b.spans)
	b.p.ended.Add(int64(b.spans.Len() - n))
	b.bytes += em.Size()
	var full ptrace.Traces
	if b.spans.Len() >= b.p.set.batch || b.bytes >= maxBatchBytes {
		full = b.td
		b.reset()
	}
	b.mu.Unlock()
	if full != (ptrace.Traces{}) {
		b.p.enqueue(full)
	}
	return err
}

// take returns the batch's spans, if any, and starts a new batch.
func (b *batch) take() (ptrace.Traces, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spans.Len() == 0 {
		return ptrace.Traces{}, false
	}
	td := b.td
	b.reset()
	return td, true
}

// enqueue waits for room in the queue: an import waits for its exporter
// rather than drop spans.
func (p *pipe) enqueue(td ptrace.Traces) {
	p.queue <- td
}

// flushLoop hands on the batches not full after each schedule delay.
func (p *pipe) flushLoop() {
	defer close(p.flushed)
	t := time.NewTicker(p.set.delay)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.flush()
		}
	}
}

func (p *pipe) flush() {
	p.mu.Lock()
	bs := append([]*batch(nil), p.batches...)
	p.mu.Unlock()
	for _, b := range bs {
		if td, ok := b.take(); ok {
			p.enqueue(td)
		}
	}
}

// exportLoop exports the queued batches in turn; once the shutdown's
// deadline passed, what is left is counted as dropped.
func (p *pipe) exportLoop() {
	defer close(p.exported)
	for td := range p.queue {
		n := int64(td.SpanCount())
		if p.base.Err() != nil {
			p.dropped.Add(n)
			continue
		}
		ctx, cancel := context.WithTimeout(p.base, p.set.exportTimeout)
		err := p.sink.export(ctx, td)
		cancel()
		if err != nil {
			p.failed.Add(n)
			otel.Handle(err)
		}
	}
}

// loss is what did not reach the destination.
type loss struct {
	ended, failed, dropped int64
}

func (l loss) lost() int64 { return l.failed + l.dropped }

// shutdown exports what the batches hold and ends the sink, within ctx's
// deadline (an export in flight is cut short then, and what is still
// queued dropped), and returns what did not reach the sink, and the
// sink's own error (a file that cannot be flushed). Every worker has
// stopped emitting.
func (p *pipe) shutdown(ctx context.Context) (loss, error) {
	close(p.stop)
	go func() {
		// A flush in progress ends before the queue closes: it may be
		// waiting for room, which the export loop makes.
		<-p.flushed
		p.mu.Lock()
		bs := p.batches
		p.mu.Unlock()
		for _, b := range bs {
			if td, ok := b.take(); ok {
				p.queue <- td
			}
		}
		close(p.queue)
	}()
	select {
	case <-p.exported:
	case <-ctx.Done():
		p.cancel()
	}
	err := p.sink.shutdown(ctx)
	p.cancel()
	<-p.exported
	return loss{ended: p.ended.Load(), failed: p.failed.Load(), dropped: p.dropped.Load()}, err
}

// otlpSink sends each batch through an OTLP client of OpenTelemetry Go's
// own exporter (see otlpClient): the client's transport, retries,
// headers, TLS, compression and timeout, set by the same OTEL_* variables.
// The batch's protobuf encoding (pdata's) is handed to the client as the
// content of its ResourceSpans messages, which protobuf writes as it is:
// the request on the wire holds the batch's spans as pdata encodes them.
type otlpSink struct {
	client  otlptrace.Client
	stopped atomic.Bool
}

var errExporterStopped = errors.New("the OTLP exporter is shut down")

func newOTLPSink(ctx context.Context, client otlptrace.Client) (*otlpSink, error) {
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the OTLP client: %w", err)
	}
	return &otlpSink{client: client}, nil
}

func (s *otlpSink) export(ctx context.Context, td ptrace.Traces) error {
	if s.stopped.Load() {
		return errExporterStopped
	}
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	rss, err := resourceSpans(b)
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	if err := s.client.UploadTraces(ctx, rss); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// resourceSpans splits the encoding of a TracesData message (whose only
// field, 1, is its ResourceSpans, as in an ExportTraceServiceRequest)
// into one ResourceSpans message each, carrying its encoded content.
func resourceSpans(b []byte) ([]*tracepb.ResourceSpans, error) {
	var out []*tracepb.ResourceSpans
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, errors.New("not an encoding of TracesData")
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		rs := &tracepb.ResourceSpans{}
		rs.ProtoReflect().SetUnknown(protoreflect.RawFields(v))
		out = append(out, rs)
		b = b[n+m:]
	}
	return out, nil
}

func (s *otlpSink) shutdown(ctx context.Context) error {
	if s.stopped.Swap(true) {
		return nil
	}
	return s.client.Stop(ctx)
}

// jsonSink writes each batch as one OTLP/JSON TracesData (pdata's
// encoding) on one line, as the OpenTelemetry Collector's file exporter
// writes it; an OTLP/HTTP receiver takes each line as it is.
type jsonSink struct {
	mu     sync.Mutex
	w      *bufio.Writer
	closer io.Closer
	err    error
}

func newJSONSink(w io.Writer, c io.Closer) *jsonSink {
	return &jsonSink{w: bufio.NewWriterSize(w, 256<<10), closer: c}
}

func (s *jsonSink) export(_ context.Context, td ptrace.Traces) error {
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		s.err = err
	}
	return s.err
}

func (s *jsonSink) shutdown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.w.Flush(); err != nil && s.err == nil {
		s.err = err
	}
	if s.closer != nil {
		if err := s.closer.Close(); err != nil && s.err == nil {
			s.err = err
		}
		s.closer = nil
	}
	return s.err
}
