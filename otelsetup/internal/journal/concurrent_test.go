// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// 100 000 spans from four goroutines through a small ring, with the
// batcher confirming, compaction running, and Recover and Stats called
// meanwhile: no span is journalled twice, none both exported and
// recovered, and what is lost is no more than what was counted.
func TestConcurrentSpansConfirmationsAndCompaction(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, WithSize(minSize), WithHeartbeat(minInterval))
	live := &memExporter{}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(j.SpanProcessor()),
		sdktrace.WithBatcher(j.WrapExporter(live), sdktrace.WithBatchTimeout(time.Millisecond), sdktrace.WithMaxQueueSize(256)),
	)
	tr := tp.Tracer("t")
	const workers, rounds = 4, 25_000
	var mu sync.Mutex
	open := map[[8]byte]bool{}
	ended := map[[8]byte]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = j.Stats()
			if rep, exp := recoverT(t, dir); rep.Live != 1 || len(exp.stubs()) != 0 {
				t.Errorf("Recover beside a live journal: %+v", rep)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				ctx, s := tr.Start(context.Background(), "omni.request", trace.WithAttributes(attribute.Int("w", w)))
				id := [8]byte(s.SpanContext().SpanID())
				if i%50 == 0 {
					mu.Lock()
					open[id] = true
					mu.Unlock()
					continue
				}
				_, c := tr.Start(ctx, "omni.phase")
				c.End()
				s.SetAttributes(attribute.String("later", "x"))
				s.AddEvent("e")
				s.End()
				mu.Lock()
				ended[id] = true
				ended[[8]byte(c.SpanContext().SpanID())] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := j.Stats()
	j.die()
	rep, exp := recoverT(t, dir)
	recovered := byID(t, exp.stubs())
	exported := byID(t, live.stubs())
	t.Logf("%d open, %d ended, %d exported; stats %+v; report %+v", len(open), len(ended), len(exported), st, rep)
	if rep.Torn != 0 || rep.Corrupt != 0 {
		t.Errorf("report %+v", rep)
	}
	missing := 0
	for id := range ended {
		_, r := recovered[id]
		_, e := exported[id]
		if r && e {
			t.Errorf("span %x exported, confirmed and recovered", id)
		}
		if !r && !e {
			missing++
		}
	}
	for id := range open {
		s, r := recovered[id]
		if !r {
			missing++
		} else if !strings.Contains(s.Status.Description, "died") {
			t.Errorf("open span %x recovered as %+v", id, s.Status)
		}
	}
	if uint64(missing) > st.Dropped+st.Evicted {
		t.Errorf("%d spans neither exported nor recovered, %d records counted lost", missing, st.Dropped+st.Evicted)
	}
}

// Close while spans start and end on other goroutines: nothing panics or
// waits, later spans are counted, the heartbeat goroutine is gone, a
// second Close returns the first's result.
func TestCloseWhileSpansStartAndEnd(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir()
		j := openT(t, dir, WithHeartbeat(minInterval))
		tp, _ := provider(j, &memExporter{})
		tr := tp.Tracer("t")
		var wg sync.WaitGroup
		half := make(chan struct{})
		var once sync.Once
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2000 {
					_, s := tr.Start(context.Background(), "s")
					s.End()
					if i == 1000 {
						once.Do(func() { close(half) })
					}
				}
			}()
		}
		<-half
		err := j.Close()
		wg.Wait()
		if err2 := j.Close(); err2 != err {
			t.Fatalf("round %d: Close twice: %v then %v", round, err, err2)
		}
		select {
		case <-j.done:
		default:
			t.Fatalf("round %d: the heartbeat goroutine runs after Close", round)
		}
		_, s := tr.Start(context.Background(), "after")
		s.End()
		if st := j.Stats(); st.AfterClose == 0 {
			t.Fatalf("round %d: stats %+v: no span counted after Close", round, st)
		}
		_ = tp.Shutdown(context.Background())
	}
}
