// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// One confirmed batch whose records lie in several segments leaves every
// segment it empties free and counts no record live that is done, however
// its spans' records fall among the segments and the shards.
func TestAConfirmedBatchFreesEverySegmentItEmpties(t *testing.T) {
	j := openT(t, t.TempDir(), WithSize(minSize), WithHeartbeat(time.Hour))
	defer j.Close()
	var ended []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(j.SpanProcessor()),
		sdktrace.WithSpanProcessor(endedSpans(func(s sdktrace.ReadOnlySpan) { ended = append(ended, s) })))
	tr := tp.Tracer("t")
	_, open := tr.Start(context.Background(), "open") // keeps its segment
	k := liveKey(open.SpanContext().SpanID())
	openSeg := j.geo.segOf(int(j.shard(k).t.get(k).start))
	segsUsed := func() int {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.geo.segCount - len(j.free)
	}
	for segsUsed() < 4 {
		_, s := tr.Start(context.Background(), "omni.diffusion.exec")
		s.End()
	}
	if st := j.Stats(); st != (Stats{}) {
		t.Fatalf("stats %+v", st)
	}
	j.confirm(ended)
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range j.segs {
		s := &j.segs[i]
		want := int64(0)
		switch {
		case i == j.head.cur:
			continue
		case s.state == segFree:
		case s.state == segFull && i == openSeg:
			want = 1
		default:
			t.Errorf("segment %d: state %d, %d live records, want it free", i, s.state, s.live.Load())
			continue
		}
		if got := s.live.Load(); got != want {
			t.Errorf("segment %d (state %d): %d live records, want %d", i, s.state, got, want)
		}
	}
}
