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

// openPhase is a live phase started and not yet ended.
type openPhase struct {
	span trace.Span // nil when the request records metrics only
	ctx  context.Context
	// start is set when there is no SDK span to ask.
	start time.Time
	id    uint32
	// parentLive is the id of the live phase it hangs under (its exec or
	// forward), 0 when it hangs under the request or a recorded phase.
	parentLive uint32
	output     int32
	phase      spans.Phase
}

// openPhases is the set of live phases started and not yet ended. Most
// requests have a few open at once, so they live inline; ids grow with the
// start order, which drain restores.
type openPhases struct {
	next  uint32
	n     int
	small [3]openPhase
	more  []openPhase
}

func (o *openPhases) add(p openPhase) uint32 {
	o.next++
	p.id = o.next
	if o.n < len(o.small) {
		o.small[o.n] = p
		o.n++
	} else {
		o.more = append(o.more, p)
	}
	return p.id
}

// remove removes the phase with id and returns it. It moves the last phase
// into the hole: order is by id, restored by all.
func (o *openPhases) remove(id uint32) (openPhase, bool) {
	for i := 0; i < o.n; i++ {
		if o.small[i].id == id {
			p := o.small[i]
			if k := len(o.more); k > 0 {
				o.small[i] = o.more[k-1]
				o.more = o.more[:k-1]
			} else {
				o.n--
				o.small[i] = o.small[o.n]
				o.small[o.n] = openPhase{}
			}
			return p, true
		}
	}
	for i, m := range o.more {
		if m.id == id {
			o.more = slices.Delete(o.more, i, i+1)
			return m, true
		}
	}
	return openPhase{}, false
}

// all returns the open phases in start order.
func (o *openPhases) all() []openPhase {
	out := make([]openPhase, 0, o.n+len(o.more))
	out = append(out, o.small[:o.n]...)
	out = append(out, o.more...)
	slices.SortFunc(out, func(a, b openPhase) int { return int(a.id) - int(b.id) })
	return out
}

// removeUnder removes and returns, in start order, the phases that hang
// under the live phase id, and those under them.
func (o *openPhases) removeUnder(id uint32) []openPhase {
	if o.n == 0 {
		return nil
	}
	var out []openPhase
	parents := []uint32{id}
	for _, p := range o.all() {
		for _, q := range parents {
			if p.parentLive == q {
				out = append(out, p)
				parents = append(parents, p.id)
				break
			}
		}
	}
	for _, p := range out {
		o.remove(p.id)
	}
	return out
}

// drain empties the set and returns its phases in start order.
func (o *openPhases) drain() []openPhase {
	if o.n == 0 && len(o.more) == 0 {
		return nil
	}
	out := o.all()
	*o = openPhases{next: o.next}
	return out
}
