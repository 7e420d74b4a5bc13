package otelomni

import (
	"context"
	"time"

	"github.com/otelomni/otelomni/spans"
	"go.opentelemetry.io/otel/trace"
)

// openPhase is a live phase started and not yet ended.
type openPhase struct {
	id     uint64
	phase  spans.Phase
	output int
	// under is the id of the live phase it hangs under (its exec or
	// forward), 0 when it hangs under the request or a recorded phase.
	under uint64
	span  trace.Span // nil when the request records metrics only
	ctx   context.Context
	start time.Time // set when there is no SDK span to ask
}

// openPhases is the set of live phases started and not yet ended, in start
// order. Most requests have a few open at once, so they live inline.
type openPhases struct {
	next  uint64
	n     int
	small [4]openPhase
	more  []openPhase
}

func (o *openPhases) add(p openPhase) uint64 {
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

// remove removes the phase with id, keeping the start order, and returns it.
func (o *openPhases) remove(id uint64) (openPhase, bool) {
	for i := 0; i < o.n; i++ {
		if o.small[i].id == id {
			p := o.small[i]
			copy(o.small[i:o.n], o.small[i+1:o.n])
			if len(o.more) > 0 {
				o.small[len(o.small)-1] = o.more[0]
				o.more = o.more[1:]
			} else {
				o.n--
				o.small[o.n] = openPhase{}
			}
			return p, true
		}
	}
	for i, m := range o.more {
		if m.id == id {
			o.more = append(o.more[:i], o.more[i+1:]...)
			return m, true
		}
	}
	return openPhase{}, false
}

// all returns the open phases in start order.
func (o *openPhases) all() []openPhase {
	out := make([]openPhase, 0, o.n+len(o.more))
	out = append(out, o.small[:o.n]...)
	return append(out, o.more...)
}

// removeUnder removes and returns, in start order, the phases that hang
// under the live phase id, and those under them.
func (o *openPhases) removeUnder(id uint64) []openPhase {
	if o.n == 0 {
		return nil
	}
	var out []openPhase
	parents := []uint64{id}
	for _, p := range o.all() {
		for _, q := range parents {
			if p.under == q {
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
