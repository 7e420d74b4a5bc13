// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// spanQueue is the exporter's batch processor: the SDK's, with the
// accounting it does not give. The SDK drops a span that does not fit its
// queue without saying so; spanQueue admits a span only while the export
// path holds fewer than the queue's size plus one batch (the queue, and the
// batch being exported), and counts each span it does not admit as
// dropped. The SDK's channel has room for every span admitted and one
// flush marker, so the SDK itself never drops one: the count is exact, and
// so is what the path holds, whatever the collector does.
type spanQueue struct {
	bsp sdktrace.SpanProcessor
	c   *exportCounts
	// maxValue is the value limit, in bytes (see detached).
	maxValue int
	// limit is the number of spans the path may hold; 0 when the
	// processor waits for room (WithBlocking) instead of dropping.
	limit int64
	// flush is held by ForceFlush, so that at most one flush marker is in
	// the SDK's channel at a time, and by lossSince.
	flush sync.Mutex
	// reported are the losses ForceFlush has reported, under flush.
	reported lossCounts
}

// lossCounts are the spans that did not reach the collector, by cause.
type lossCounts struct{ dropped, failed, rejected, refused uint64 }

func (l lossCounts) total() uint64 { return l.dropped + l.failed + l.rejected + l.refused }

// newSpanQueue makes the batch processor over exp, which counts in c
// (the safe exporter, or the journal's wrapper of it).
func newSpanQueue(exp sdktrace.SpanExporter, c *exportCounts, maxValue int, o sdktrace.BatchSpanProcessorOptions) *spanQueue {
	q := &spanQueue{c: c, maxValue: maxValue}
	sdk := o
	if !o.BlockOnQueueFull {
		q.limit = int64(o.MaxQueueSize) + int64(o.MaxExportBatchSize)
		sdk.MaxQueueSize = int(q.limit) + 1
	}
	q.bsp = sdktrace.NewBatchSpanProcessor(exp, func(p *sdktrace.BatchSpanProcessorOptions) { *p = sdk })
	return q
}

func (*spanQueue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (q *spanQueue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	q.c.ended.Add(1)
	if q.limit > 0 && q.c.held.Add(1) > q.limit {
		q.c.held.Add(-1)
		q.c.dropped.Add(1)
		return
	}
	q.bsp.OnEnd(detached(s, q.maxValue, q.c))
}

// detached returns s as the queue may hold it. The SDK cuts an attribute
// value to the value limit without copying it, so a span would keep each
// long original alive while it waits in the queue: a 10 MB value from any
// instrumentation would cost 10 MB per queued span. A span holding such a
// value, or a name, key or status longer than its bound, is held as a
// copy (repaired, see repair) that shares no string at its bound with the
// original. The check costs no allocation: the SDK hands OnEnd its own
// snapshot.
func detached(s sdktrace.ReadOnlySpan, maxValue int, c *exportCounts) sdktrace.ReadOnlySpan {
	if !mayHoldOriginals(s, maxValue) {
		return s
	}
	r := repair(s, maxValue).(*repairedSpan)
	snap := &snapshot{
		name: r.name, sc: s.SpanContext(), parent: s.Parent(), kind: s.SpanKind(),
		start: s.StartTime(), end: r.end, status: r.status, scope: r.scope, res: s.Resource(),
		attrs: ownStrings(r.attrs, maxValue), events: r.events, links: r.links,
		droppedAttrs: s.DroppedAttributes(), droppedLinks: s.DroppedLinks(), droppedEvents: s.DroppedEvents(),
		children: s.ChildSpanCount(),
	}
	for i := range snap.events {
		snap.events[i].Attributes = ownStrings(snap.events[i].Attributes, maxValue)
	}
	for i := range snap.links {
		snap.links[i].Attributes = ownStrings(snap.links[i].Attributes, maxValue)
	}
	h := heldSpan{ReadOnlySpan: snap}
	if !spanOK(s, maxValue) || r.end != s.EndTime() {
		h.counted = true
		c.repaired.Add(1)
	}
	return h
}

// heldSpan is a span detached from its original; counted says it is
// counted in ExportStats.Repaired already.
type heldSpan struct {
	sdktrace.ReadOnlySpan
	counted bool
}

// snapshot is a span's data, held apart from the span: it shares no
// memory with the SDK's record of it but the strings it owns. It defines
// every method of sdktrace.ReadOnlySpan but the unexported one, which no
// package other than the SDK's can define and which nothing calls: the
// embedded interface, nil, only completes the method set
// (TestSnapshotDefinesEveryMethodOfReadOnlySpan).
type snapshot struct {
	sdktrace.ReadOnlySpan

	name                                                string
	sc, parent                                          trace.SpanContext
	kind                                                trace.SpanKind
	start, end                                          time.Time
	attrs                                               []attribute.KeyValue
	events                                              []sdktrace.Event
	links                                               []sdktrace.Link
	status                                              sdktrace.Status
	scope                                               instrumentation.Scope
	res                                                 *resource.Resource
	droppedAttrs, droppedLinks, droppedEvents, children int
}

func (s *snapshot) Name() string                                { return s.name }
func (s *snapshot) SpanContext() trace.SpanContext              { return s.sc }
func (s *snapshot) Parent() trace.SpanContext                   { return s.parent }
func (s *snapshot) SpanKind() trace.SpanKind                    { return s.kind }
func (s *snapshot) StartTime() time.Time                        { return s.start }
func (s *snapshot) EndTime() time.Time                          { return s.end }
func (s *snapshot) Attributes() []attribute.KeyValue            { return s.attrs }
func (s *snapshot) Links() []sdktrace.Link                      { return s.links }
func (s *snapshot) Events() []sdktrace.Event                    { return s.events }
func (s *snapshot) Status() sdktrace.Status                     { return s.status }
func (s *snapshot) InstrumentationScope() instrumentation.Scope { return s.scope }
func (s *snapshot) Resource() *resource.Resource                { return s.res }
func (s *snapshot) DroppedAttributes() int                      { return s.droppedAttrs }
func (s *snapshot) DroppedLinks() int                           { return s.droppedLinks }
func (s *snapshot) DroppedEvents() int                          { return s.droppedEvents }
func (s *snapshot) ChildSpanCount() int                         { return s.children }

//lint:ignore SA1019 the exporters of this SDK version still read it
func (s *snapshot) InstrumentationLibrary() instrumentation.Library { return s.scope }

// mayHoldOriginals reports whether s holds a string the SDK may have cut
// from a longer one, or one longer than otelsetup's bounds.
func mayHoldOriginals(s sdktrace.ReadOnlySpan, maxValue int) bool {
	if len(s.Name()) > maxKeyBytes || len(s.Status().Description) > maxValue || longValue(s.Attributes(), maxValue) {
		return true
	}
	for _, ev := range s.Events() {
		if len(ev.Name) > maxKeyBytes || longValue(ev.Attributes, maxValue) {
			return true
		}
	}
	for _, l := range s.Links() {
		if longValue(l.Attributes, maxValue) {
			return true
		}
	}
	return false
}

// longValue reports whether longKV holds for one of kvs.
func longValue(kvs []attribute.KeyValue, maxValue int) bool {
	for _, kv := range kvs {
		if longKV(kv, maxValue) {
			return true
		}
	}
	return false
}

// ownStrings returns kvs with every string value of maxValue bytes or more
// copied, in a new slice when any is.
func ownStrings(kvs []attribute.KeyValue, maxValue int) []attribute.KeyValue {
	if !longValue(kvs, maxValue) {
		return kvs
	}
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = ownKV(kv, maxValue)
	}
	return out
}

func (q *spanQueue) Shutdown(ctx context.Context) error { return q.bsp.Shutdown(ctx) }

func (q *spanQueue) ForceFlush(ctx context.Context) error {
	q.flush.Lock()
	defer q.flush.Unlock()
	return q.bsp.ForceFlush(ctx)
}

// lossSince returns a *lossError for the spans lost since its previous
// call, or nil when none was.
func (q *spanQueue) lossSince() error {
	q.flush.Lock()
	defer q.flush.Unlock()
	now := lossCounts{dropped: q.c.dropped.Load(), failed: q.c.failed.Load(), rejected: q.c.rejected.Load(), refused: q.c.refused.Load()}
	if now.total() == q.reported.total() {
		return nil
	}
	since := lossCounts{dropped: now.dropped - q.reported.dropped, failed: now.failed - q.reported.failed,
		rejected: now.rejected - q.reported.rejected, refused: now.refused - q.reported.refused}
	q.reported = now
	return &lossError{ExportStats: q.c.stats(), since: &since}
}

// batchOptions are the batch processor's settings: the SDK's defaults,
// then the OTEL_BSP_* variables (read once, by readEnv, each in its
// range), then the options of this package's tests.
func batchOptions(env *environ, opts []sdktrace.BatchSpanProcessorOption) sdktrace.BatchSpanProcessorOptions {
	queue := env.int(defaultSpanQueue, "OTEL_BSP_MAX_QUEUE_SIZE")
	o := sdktrace.BatchSpanProcessorOptions{
		BatchTimeout:       env.duration(defaultSpanDelay, "OTEL_BSP_SCHEDULE_DELAY"),
		ExportTimeout:      env.duration(defaultSpanTimeout, "OTEL_BSP_EXPORT_TIMEOUT"),
		MaxQueueSize:       queue,
		MaxExportBatchSize: env.int(int64(min(defaultSpanBatch, queue)), "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
