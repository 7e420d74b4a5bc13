// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// memExporter keeps what it is given, or refuses it while failing is set.
type memExporter struct {
	mu      sync.Mutex
	spans   tracetest.SpanStubs
	batches int
	failing bool
}

var errRefused = errors.New("refused")

func (e *memExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failing {
		return errRefused
	}
	e.batches++
	e.spans = append(e.spans, tracetest.SpanStubsFromReadOnlySpans(ss)...)
	return nil
}

func (e *memExporter) Shutdown(context.Context) error { return nil }

func (e *memExporter) setFailing(v bool) {
	e.mu.Lock()
	e.failing = v
	e.mu.Unlock()
}

func (e *memExporter) stubs() tracetest.SpanStubs {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append(tracetest.SpanStubs(nil), e.spans...)
}

// byID indexes spans by span id, failing the test on a repeated id.
func byID(t testing.TB, ss tracetest.SpanStubs) map[[8]byte]tracetest.SpanStub {
	t.Helper()
	m := map[[8]byte]tracetest.SpanStub{}
	for _, s := range ss {
		id := [8]byte(s.SpanContext.SpanID())
		if _, dup := m[id]; dup {
			t.Errorf("span %s (%s) exported twice", s.SpanContext.SpanID(), s.Name)
		}
		m[id] = s
	}
	return m
}

func openT(t testing.TB, dir string, opts ...Option) *Journal {
	t.Helper()
	j, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func recoverT(t testing.TB, dir string) (Report, *memExporter) {
	t.Helper()
	exp := &memExporter{}
	rep, err := Recover(context.Background(), dir, exp)
	if err != nil {
		t.Fatal(err)
	}
	return rep, exp
}

// fakeSpan is a span for calling the processor directly.
type fakeSpan struct {
	trace.Span
	sdktrace.ReadOnlySpan
}

func (f fakeSpan) SpanContext() trace.SpanContext { return f.ReadOnlySpan.SpanContext() }

// newFakeSpan returns a sampled span with span id n, started and ended.
func newFakeSpan(n uint64) fakeSpan {
	return fakeSpanOf(tracetest.SpanStub{
		Name: "fake",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID(binary.BigEndian.AppendUint64(nil, n)), TraceFlags: trace.FlagsSampled,
		}),
		StartTime:  time.Unix(100, 0),
		EndTime:    time.Unix(101, 0),
		Attributes: []attribute.KeyValue{attribute.String("omni.phase", "exec")},
	})
}

func fakeSpanOf(s tracetest.SpanStub) fakeSpan {
	return fakeSpan{Span: noop.Span{}, ReadOnlySpan: s.Snapshot()}
}

// records returns the offsets of the records of the span whose key is k,
// from its shard's table or log.
func (j *Journal) records(k uint64) (start, end int32, ok bool) {
	sh := j.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.t.get(k); e != nil {
		return e.start, e.end, true
	}
	if i := sh.log.find(k); i >= 0 {
		return sh.log.at(i).start, sh.log.at(i).end, true
	}
	return 0, 0, false
}
