// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/spans"
)

// clock reads the times of one request (or engine, or batch): each
// reading is the base plus the monotonic time elapsed since it. The
// wall-clock times the spans carry then differ by exactly the durations
// the histograms record, whatever the wall clock does meanwhile (an NTP
// step cannot make a span negative or its measurement differ from it).
type clock struct{ base time.Time }

func newClock() clock { return clock{base: time.Now()} }

func (c clock) now() time.Time { return c.base.Add(time.Since(c.base)) }

// place puts t, a time a caller gave, on the clock: a reading of this
// process's clock (it carries a monotonic reading, as time.Now's do)
// becomes the base plus the monotonic time between them, so that it is
// compared and exported alike, as otelomni's own readings are, whatever
// the wall clock did between the two; a time from another clock (no
// monotonic reading: parsed, another host's, rebuilt) is kept as given,
// and is compared and exported by its wall time.
func (c clock) place(t time.Time) time.Time {
	if t.IsZero() || t == t.Round(0) {
		return t
	}
	return c.base.Add(t.Sub(c.base))
}

// interval is iv with both its ends placed on the clock.
func (c clock) interval(iv spans.Interval) spans.Interval {
	if !iv.Measured() {
		return iv
	}
	return spans.Between(c.place(iv.Start()), c.place(iv.End()))
}

// openPhase is a live phase started and not yet ended.
type openPhase struct {
	// span is nil when the request records metrics only; while starting,
	// its span is being started on the goroutine that started it.
	span trace.Span
	// spanCtx holds span: the parent context of the parts started under
	// it. ctx is the caller's context, which the phase's Context derives
	// from.
	spanCtx, ctx context.Context
	// start is the reading the span started at and the measurement
	// starts from.
	start time.Time
	// endAt is set when its parent or request ended while its span was
	// starting: the goroutine that starts it ends it there.
	endAt time.Time
	id    uint32
	// parentLive is the id of the live phase it hangs under (its exec or
	// forward), 0 when it hangs under the request.
	parentLive uint32
	output     int32
	phase      spans.Phase
	starting   bool
}

// openPhases is the set of live phases started and not yet ended, in start
// order (ids grow with it). Most requests have a few open at once: they
// live inline.
type openPhases struct {
	next uint32
	list []openPhase
	buf  [4]openPhase
}

func (o *openPhases) add(p openPhase) uint32 {
	if o.list == nil {
		o.list = o.buf[:0]
	}
	o.next++
	p.id = o.next
	o.list = append(o.list, p)
	return p.id
}

// find returns the open phase id, or nil. The pointer is valid until the
// set changes.
func (o *openPhases) find(id uint32) *openPhase {
	for i := range o.list {
		if o.list[i].id == id {
			return &o.list[i]
		}
	}
	return nil
}

// remove removes the phase id and returns it.
func (o *openPhases) remove(id uint32) (openPhase, bool) {
	for i := range o.list {
		if o.list[i].id == id {
			p := o.list[i]
			o.list = slices.Delete(o.list, i, i+1)
			return p, true
		}
	}
	return openPhase{}, false
}

// takeUnder ends, at at, the phases under the live phase id and those under
// them: it removes and returns, in start order, those whose span has
// started, and marks those still starting to end at at (their starter ends
// them).
func (o *openPhases) takeUnder(id uint32, at time.Time) []openPhase {
	var out []openPhase
	parents := [4]uint32{id}
	under := parents[:1]
	for i := 0; i < len(o.list); {
		p := &o.list[i]
		if !slices.Contains(under, p.parentLive) {
			i++
			continue
		}
		under = append(under, p.id)
		if p.starting {
			if p.endAt.IsZero() {
				p.endAt = at // the first parent to end ends it
			}
			i++
			continue
		}
		out = append(out, *p)
		o.list = slices.Delete(o.list, i, i+1)
	}
	return out
}

// takeAll ends every open phase at at, as takeUnder does.
func (o *openPhases) takeAll(at time.Time) []openPhase {
	var out []openPhase
	for i := 0; i < len(o.list); {
		p := &o.list[i]
		if p.starting {
			if p.endAt.IsZero() {
				p.endAt = at // the first parent to end ends it
			}
			i++
			continue
		}
		out = append(out, *p)
		o.list = slices.Delete(o.list, i, i+1)
	}
	return out
}

// latestStart returns the latest start of an open phase, or the zero time
// when none is open.
func (o *openPhases) latestStart() time.Time {
	var t time.Time
	for i := range o.list {
		t = later(t, o.list[i].start)
	}
	return t
}
