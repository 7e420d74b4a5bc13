// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// countingSink keeps the number of spans of each batch it is given.
type countingSink struct {
	mu      sync.Mutex
	batches []int
}

func (s *countingSink) export(_ context.Context, td ptrace.Traces) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, td.SpanCount())
	return nil
}

func (s *countingSink) shutdown(context.Context) error { return nil }

// heavyRecord is a JSON-lines record of three stages whose request and
// stages carry 64 keys of values of a kilobyte.
func heavyRecord(i int) string {
	keys := func(prefix string) string {
		var b strings.Builder
		for k := range forms.MaxExtras {
			fmt.Fprintf(&b, `, "%s_%d": "%s"`, prefix, k, strings.Repeat("v", 1000))
		}
		return b.String()
	}
	var st []string
	for s := range 3 {
		st = append(st, fmt.Sprintf(`{"stage_id": %d, "submit_time": %d.5, "stage_gen_time_ms": 5%s}`, s, 1796000000+i, keys("stage")))
	}
	return fmt.Sprintf(`{"request_id": "heavy-%d", "arrival_time": %d.5%s, "stages": [%s]}`, i, 1796000000+i, keys("request"), strings.Join(st, ", "))
}

// TestABatchIsBoundedInBytes: spans that carry many of the input's keys
// are handed on in batches of at most maxBatchBytes (and one request
// beyond), not of 2 048 spans: what the queue and the workers hold stays a
// few batches of a few MiB whatever the spans carry. Every span is
// exported.
func TestABatchIsBoundedInBytes(t *testing.T) {
	clearEnv(t)
	set := testSettings(resource.NewSchemaless(attribute.String("service.name", "omnitrace")))
	if set.batch != importBatchSize {
		t.Fatalf("batches of %d spans, want the default %d", set.batch, importBatchSize)
	}
	sink := &countingSink{}
	p := newPipe(set, sink)
	b := p.newBatch()
	em := emit.NewEmitter(spanLimits(), nil)
	// Each request makes four spans: its own and its three stages'.
	const requests, spansOf = 200, 4
	size := 0
	for i := range requests {
		r, err := forms.Parse([]byte(heavyRecord(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.emit(em, r, time.Time{}); err != nil {
			t.Fatal(err)
		}
		size = em.Size()
	}
	l, err := p.shutdown(context.Background())
	if err != nil || l.lost() != 0 || l.ended != int64(requests*spansOf) {
		t.Fatalf("loss %+v, %v: want all %d spans exported", l, err, requests*spansOf)
	}
	most := (maxBatchBytes/size + 1) * spansOf
	total := 0
	for _, n := range sink.batches {
		total += n
		if n > most {
			t.Errorf("a batch of %d spans of %d bytes a request: more than %d bytes and a request", n, size, maxBatchBytes)
		}
	}
	if total != requests*spansOf || len(sink.batches) < 2 {
		t.Errorf("%d spans in %d batches, want %d in several", total, len(sink.batches), requests*spansOf)
	}
}

// TestAShutdownDuringAScheduledFlushLosesNothing: a scheduled flush that
// runs while the pipe shuts down hands its batch on before the queue
// closes; nothing is sent on a closed queue, and every span is exported.
// Run many rounds under -race, with a schedule delay of a microsecond so
// that flushes and shutdowns meet.
func TestAShutdownDuringAScheduledFlushLosesNothing(t *testing.T) {
	clearEnv(t)
	set := testSettings(resource.NewSchemaless(attribute.String("service.name", "omnitrace")))
	set.delay = time.Microsecond
	em := emit.NewEmitter(spanLimits(), nil)
	r, err := forms.Parse([]byte(heavyRecord(0)))
	if err != nil {
		t.Fatal(err)
	}
	const rounds, requests, spansOf = 300, 3, 4
	for round := range rounds {
		sink := &countingSink{}
		p := newPipe(set, sink)
		b := p.newBatch()
		for range requests {
			if err := b.emit(em, r, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := p.shutdown(context.Background())
		total := 0
		for _, n := range sink.batches {
			total += n
		}
		if err != nil || l.lost() != 0 || total != requests*spansOf {
			t.Fatalf("round %d: loss %+v, %v, %d spans exported: want all %d", round, l, err, total, requests*spansOf)
		}
	}
}
