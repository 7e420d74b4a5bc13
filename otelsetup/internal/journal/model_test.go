// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// modelSpan returns a sampled span with span id seq<<8|shard (shard picks
// the span's shard, so that a few shards take every span), ending at a
// time of its own.
func modelSpan(seq uint64, shard int, attrs int) fakeSpan {
	kvs := []attribute.KeyValue{attribute.Int64("seq", int64(seq))}
	for i := range attrs {
		kvs = append(kvs, attribute.String("a", strings.Repeat("x", i)))
	}
	return fakeSpanOf(tracetest.SpanStub{
		Name: "model",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{2}, SpanID: trace.SpanID(binary.BigEndian.AppendUint64(nil, seq<<8|uint64(shard))), TraceFlags: trace.FlagsSampled,
		}),
		StartTime:  time.Unix(100, 0),
		EndTime:    time.Unix(101, int64(seq)),
		Attributes: kvs,
	})
}

// waitRoom waits until the ring has as many free segments as compaction
// keeps, so that the next few records are not dropped for want of room
// (the journal never waits for it; the test does, to know what it holds).
func (j *Journal) waitRoom(t testing.TB) {
	t.Helper()
	for i := 0; ; i++ {
		j.mu.Lock()
		free := len(j.free)
		j.mu.Unlock()
		if free >= spare {
			return
		}
		if i == 1e7 {
			t.Fatalf("compaction made no room: %d segments free", free)
		}
		j.poke()
		runtime.Gosched()
	}
}

// The fate of a span in the model.
const (
	fateOpen      = iota // started, never ended: recovered as open
	fateEnded            // ended, never confirmed (a failed batch, a dropped span): recovered as ended
	fateConfirmed        // ended and confirmed, in either order: never recovered
	fateEarly            // confirmed, its end not yet journalled at the death: never recovered
)

// 100 000 rounds of spans whose ends race their own confirmations (a
// journal registered after the batcher sees them in either order), the
// confirmations of earlier spans in any order and batch (failed batches
// and dropped spans never confirmed, confirmations of spans the journal
// never saw among them), the tables' trim and the compaction of a small
// ring, with every span in one of four shards so that the shards' logs
// overflow: a death then leaves exactly the spans a model says, each as it
// was (ended with its own end, or open).
func TestRacesOfEndsConfirmationsCompactionAndTrimMatchAModel(t *testing.T) {
	const rounds = 100_000
	dir := t.TempDir()
	j := openT(t, dir, WithSize(4<<20), WithHeartbeat(minInterval))
	p := j.SpanProcessor()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	fate := make([]int, rounds+1) // by seq
	spans := make([]fakeSpan, rounds+1)
	var backlog []uint64 // ended spans whose confirmation is yet to come
	stop := make(chan struct{})
	trimmed := make(chan struct{})
	go func() {
		defer close(trimmed)
		for {
			select {
			case <-stop:
				return
			default:
			}
			j.trimTables()
			runtime.Gosched()
		}
	}()
	never := uint64(rounds + 1) // seqs of spans the journal never sees
	for seq := uint64(1); seq <= uint64(rounds); seq++ {
		j.waitRoom(t)
		s := modelSpan(seq, rng.IntN(4), rng.IntN(3))
		spans[seq] = s
		p.OnStart(context.Background(), s)
		var batch []sdktrace.ReadOnlySpan
		end := true
		switch r := rng.IntN(1000); {
		case r < 5:
			fate[seq], end = fateOpen, false
		case r < 10:
			fate[seq] = fateEnded // its batch failed, or the batcher dropped it
		case r < 15:
			fate[seq], end = fateEarly, false
			batch = append(batch, s)
		case r < 500:
			fate[seq] = fateConfirmed // its end races its confirmation
			batch = append(batch, s)
		default:
			fate[seq] = fateConfirmed // confirmed later, in some order
			backlog = append(backlog, seq)
		}
		// Some of the backlog, shuffled, and a span never seen.
		if len(backlog) > 0 && rng.IntN(4) == 0 {
			rng.Shuffle(len(backlog), func(a, b int) { backlog[a], backlog[b] = backlog[b], backlog[a] })
			n := 1 + rng.IntN(len(backlog))
			for _, q := range backlog[:n] {
				batch = append(batch, spans[q])
			}
			backlog = backlog[n:]
			batch = append(batch, modelSpan(never, rng.IntN(4), 0))
			never++
		}
		var wg sync.WaitGroup
		release := make(chan struct{})
		if end {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				p.OnEnd(s)
			}()
		}
		if len(batch) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				j.confirm(batch)
			}()
		}
		close(release)
		wg.Wait()
	}
	close(stop)
	<-trimmed
	// The backlog's spans reach the death unconfirmed.
	for _, q := range backlog {
		fate[q] = fateEnded
	}
	st := j.Stats()
	if st.Dropped != 0 || st.Evicted != 0 || st.Carried == 0 {
		t.Fatalf("stats %+v: want compaction to have carried records, and nothing dropped or evicted", st)
	}
	j.die()
	rep, exp := recoverT(t, dir)
	got := byID(t, exp.stubs())
	t.Logf("stats %+v; report %+v", st, rep)
	if rep.Torn != 0 || rep.Corrupt != 0 {
		t.Errorf("report %+v", rep)
	}
	want := 0
	for seq := uint64(1); seq <= uint64(rounds); seq++ {
		id := [8]byte(spans[seq].SpanContext().SpanID())
		r, ok := got[id]
		delete(got, id)
		switch f := fate[seq]; f {
		case fateConfirmed, fateEarly:
			if ok {
				t.Errorf("span %d (fate %d) confirmed and recovered", seq, f)
			}
		case fateEnded:
			want++
			if !ok {
				t.Errorf("span %d ended, not confirmed, not recovered", seq)
			} else if !r.EndTime.Equal(spans[seq].EndTime()) || !sameAttrs(r.Attributes, append(spans[seq].Attributes(), RecoveredKey.Bool(true))) {
				t.Errorf("span %d recovered as %v %v, want it as it ended", seq, r.EndTime, r.Attributes)
			}
		case fateOpen:
			want++
			if !ok {
				t.Errorf("open span %d not recovered", seq)
			} else if !strings.Contains(r.Status.Description, "died") {
				t.Errorf("open span %d recovered as %+v", seq, r.Status)
			}
		}
	}
	for id, s := range got {
		t.Errorf("span %x (%s) recovered, never journalled", id, s.Name)
	}
	if rep.Open+rep.Ended != want {
		t.Errorf("report %+v, want %d spans", rep, want)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left after the recovery: %v", left)
	}
}

// tableSlots is the slots of every shard's table.
func (j *Journal) tableSlots() int {
	n := 0
	for i := range j.shards {
		sh := &j.shards[i]
		sh.mu.Lock()
		n += len(sh.t.slots)
		sh.mu.Unlock()
	}
	return n
}

// A burst of 100 000 open spans grows the tables; once they end and are
// confirmed, the next heartbeats' trims leave the tables as small as
// before the burst. While the collector is down, the ended spans awaiting
// their confirmation keep what they need, no more: each a live record.
func TestABurstOfOpenSpansLeavesNoBigTable(t *testing.T) {
	const burst = 100_000
	for _, confirmed := range []bool{true, false} {
		dir := t.TempDir()
		j := openT(t, dir, WithHeartbeat(maxInterval)) // the test trims
		p := j.SpanProcessor()
		spans := make([]sdktrace.ReadOnlySpan, burst)
		for i := range spans {
			s := modelSpan(uint64(i+1), i%nShards, 0)
			spans[i] = s
			p.OnStart(context.Background(), s)
		}
		grown := j.tableSlots()
		if grown < burst {
			t.Fatalf("%d slots for %d open spans", grown, burst)
		}
		for _, s := range spans {
			p.OnEnd(s)
		}
		if confirmed {
			for i := 0; i < burst; i += 512 {
				j.confirm(spans[i:min(i+512, burst)])
			}
		}
		j.trimTables()
		j.trimTables()
		slots := j.tableSlots()
		awaiting := 0
		if !confirmed {
			awaiting = burst - nShards*logCap // what the logs cannot hold
		}
		// A trimmed table holds at most 8 slots an entry, at least minTable.
		if top := max(nShards*minTable, 8*awaiting+nShards*minTable); slots > top {
			t.Errorf("confirmed %v: %d slots after two trims (%d at the burst), want at most %d", confirmed, slots, grown, top)
		}
		if st := j.Stats(); st.Dropped+st.Evicted != 0 {
			t.Fatalf("stats %+v", st)
		}
		j.die()
		rep, _ := recoverT(t, dir)
		if want := burst - len(spans)*boolInt(confirmed); rep.Ended != want {
			t.Errorf("confirmed %v: report %+v, want %d ended", confirmed, rep, want)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A shard's log at its capacity, one past it and ten times it, confirmed
// in order, in reverse and shuffled, with every fifth span's batch failed
// and confirmations of spans the journal never saw among the others: a
// death leaves exactly the spans not confirmed, whether they waited in
// the log or moved to the table.
func TestALogAtAndPastItsCapacity(t *testing.T) {
	for _, n := range []int{logCap - 1, logCap, logCap + 1, 10 * logCap} {
		for _, order := range []string{"in order", "reversed", "shuffled"} {
			dir := t.TempDir()
			j := openT(t, dir, WithHeartbeat(maxInterval))
			p := j.SpanProcessor()
			rng := rand.New(rand.NewPCG(uint64(n), uint64(len(order))))
			spans := make([]fakeSpan, n)
			for i := range spans {
				spans[i] = modelSpan(uint64(i+1), 5, 0) // one shard
				p.OnStart(context.Background(), spans[i])
				p.OnEnd(spans[i])
			}
			if k := liveKey(spans[0].SpanContext().SpanID()); j.shard(k).log.n != min(n, logCap) {
				t.Fatalf("%d spans: the log holds %d", n, j.shard(k).log.n)
			}
			var confirmed []sdktrace.ReadOnlySpan
			unconfirmed := map[[8]byte]bool{}
			for i, s := range spans {
				if i%5 == 2 {
					unconfirmed[[8]byte(s.SpanContext().SpanID())] = true
					continue
				}
				confirmed = append(confirmed, s)
				if i%9 == 0 {
					confirmed = append(confirmed, modelSpan(uint64(n+1+i), 5, 0)) // never seen
				}
			}
			switch order {
			case "reversed":
				slices.Reverse(confirmed)
			case "shuffled":
				rng.Shuffle(len(confirmed), func(a, b int) { confirmed[a], confirmed[b] = confirmed[b], confirmed[a] })
			}
			for len(confirmed) > 0 {
				size := min(len(confirmed), 1+rng.IntN(2*logCap))
				j.confirm(confirmed[:size])
				confirmed = confirmed[size:]
			}
			j.die()
			rep, exp := recoverT(t, dir)
			got := byID(t, exp.stubs())
			if rep.Ended != len(unconfirmed) || len(got) != len(unconfirmed) {
				t.Errorf("%d spans %s: report %+v, want the %d not confirmed", n, order, rep, len(unconfirmed))
			}
			for id := range got {
				if !unconfirmed[id] {
					t.Errorf("%d spans %s: confirmed span %x recovered", n, order, id)
				}
			}
		}
	}
}
