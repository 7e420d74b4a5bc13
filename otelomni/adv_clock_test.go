// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/otelomni/otelomni/internal/plan"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// stepped returns t as time.Now gives it once the wall clock has been
// stepped by d (an NTP step, an operator's date): its wall reading moved
// by d, its monotonic reading not. The wall clock of a test process cannot
// be stepped; this builds the value it would read. It reports false when
// time.Time's layout is not the one it knows.
func stepped(t time.Time, d time.Duration) (time.Time, bool) {
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	if unsafe.Sizeof(t) != unsafe.Sizeof(layout{}) {
		return time.Time{}, false
	}
	w := t.Add(d) // both readings moved by d
	(*layout)(unsafe.Pointer(&w)).ext = (*layout)(unsafe.Pointer(&t)).ext
	ok := w.Sub(t) == 0 && time.Duration(w.UnixNano()-t.UnixNano()) == d
	return w, ok
}

// A request and its live exec take their times from the request's clock
// (base plus monotonic elapsed), which a step of the wall clock does not
// move. A phase the engine timed itself with time.Now after such a step
// carries the stepped wall time, which is what is exported: otelomni
// compares it with its parent's by the monotonic readings and finds it
// inside, then exports it outside its parent by the step. It must be
// refused, or placed by the clock it was compared by; never exported
// outside its parent. (newRecorded's cleanup does not see it: it compares
// times with Before and After, by their monotonic readings, where an
// exporter sends the wall readings.)
func TestAdvAPartTimedAfterAWallClockStepLiesInsideItsParent(t *testing.T) {
	if _, ok := stepped(time.Now(), time.Hour); !ok {
		t.Skip("time.Time's layout is not the one this test builds")
	}
	for _, c := range []struct {
		name   string
		step   time.Duration
		phase  spans.Phase
		inExec bool
	}{
		{"queue_wait under the request, the clock stepped back", -time.Hour, spans.QueueWait, false},
		{"queue_wait under the request, the clock stepped forward", time.Hour, spans.QueueWait, false},
		{"kv_recv under a live exec, the clock stepped back", -time.Hour, spans.KVRecv, true},
		{"kv_recv under a live exec, the clock stepped forward", time.Hour, spans.KVRecv, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRecorded(t)
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "step"})
			var exec otelomni.ActivePhase
			if c.inExec {
				exec = req.StartPhase(ctx, spans.Exec)
			}
			// The wall clock steps; the engine times its phase with time.Now.
			start, _ := stepped(time.Now(), c.step)
			end, _ := stepped(time.Now(), c.step)
			err := req.RecordPhase(c.phase, spans.Between(start, end), nil)
			exec.End(nil)
			req.End(nil)
			if err != nil {
				return // refused: nothing exported outside its parent
			}
			s := one(t, r.rec.Ended(), c.phase.SpanName())
			p := one(t, r.rec.Ended(), spans.RequestSpanName)
			if c.inExec {
				p = one(t, r.rec.Ended(), spans.Exec.SpanName())
			}
			// What an exporter sends: the wall readings (OTLP's Unix
			// nanoseconds). time.Time's Before and After would compare the
			// monotonic readings, which never leave the process.
			if s.StartTime().UnixNano() < p.StartTime().UnixNano() || s.EndTime().UnixNano() > p.EndTime().UnixNano() {
				t.Errorf("accepted (nil error), and exported %v .. %v, outside its parent %s %v .. %v",
					s.StartTime().Round(0), s.EndTime().Round(0), p.Name(), p.StartTime().Round(0), p.EndTime().Round(0))
			}
		})
	}
}

// An end handed to EndAt that the engine read with time.Now after the
// wall clock was stepped back carries the stepped wall time. otelomni
// checks it against the span's start by the monotonic readings, finds it
// later, and ends the span there: the exported span (wall readings) is
// negative, which the absence rule forbids, and its measurement (by the
// monotonic readings) is not its exported duration.
func TestAdvEndAtReadAfterAWallClockStepIsNeverExportedNegative(t *testing.T) {
	if _, ok := stepped(time.Now(), time.Hour); !ok {
		t.Skip("time.Time's layout is not the one this test builds")
	}
	for _, what := range []string{spans.RequestSpanName, spans.StageSpanName, plan.BatchSpanName} {
		t.Run(what, func(t *testing.T) {
			r := newRecorded(t)
			ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "endat"})
			end, _ := stepped(time.Now(), -time.Hour)
			var err error
			switch what {
			case spans.RequestSpanName:
				err = req.EndAt(end, nil)
			case spans.StageSpanName:
				_, st := r.in.StartStage(ctx, otelomni.StageInfo{ID: 1, Name: "s"})
				end, _ = stepped(time.Now(), -time.Hour)
				err = st.EndAt(end, nil)
			case plan.BatchSpanName:
				b := r.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b"})
				end, _ = stepped(time.Now(), -time.Hour)
				err = b.EndAt(end, nil)
			}
			req.End(nil)
			s := one(t, r.rec.Ended(), what)
			if d := s.EndTime().UnixNano() - s.StartTime().UnixNano(); d < 0 {
				t.Errorf("EndAt(%v) returned %v, and %s was exported %v long", end.Round(0), err, what, time.Duration(d))
			}
		})
	}
}

// A request's arrival time handed over as RequestInfo.Start, read with
// time.Now before the wall clock was stepped (the request arrived, the
// clock stepped, the engine started its span): the request's measurement
// is computed by the monotonic readings, the exported span by the wall
// readings, and they differ by the step. A measurement must equal its
// exported span's duration.
func TestAdvAGivenStartReadBeforeAWallClockStepMeasuresTheExportedSpan(t *testing.T) {
	if _, ok := stepped(time.Now(), time.Hour); !ok {
		t.Skip("time.Time's layout is not the one this test builds")
	}
	m := newMetered(t, true)
	arrived, _ := stepped(time.Now(), -time.Hour) // as read before a step forward of an hour
	_, req := m.in.Start(context.Background(), otelomni.RequestInfo{ID: "given", Model: "m", Start: arrived})
	req.End(nil)
	s := one(t, m.rec.Ended(), spans.RequestSpanName)
	exported := time.Duration(s.EndTime().UnixNano() - s.StartTime().UnixNano())
	dps := m.histograms(t)["gen_ai.server.request.duration"]
	if len(dps) != 1 || dps[0].Count != 1 {
		t.Fatalf("request duration: %+v", dps)
	}
	if dps[0].Sum != exported.Seconds() {
		t.Errorf("the request was measured %v s; its exported span lasts %v s", dps[0].Sum, exported.Seconds())
	}
}
