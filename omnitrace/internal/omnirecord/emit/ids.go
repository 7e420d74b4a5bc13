// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package emit

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// idVersion changes every id an import makes when the way they are
// derived changes, so that a new derivation never collides with an old
// one.
const idVersion = "omnitrace-ids/3"

// traceKey returns the key the trace and span ids of r are derived from:
// its identity ([forms.Request.Key]: -run, its id and its run), the digest
// of what was read of it, and every time its spans are placed at. Two
// imports that give any span of r other times (another -start, another
// year or zone of its log, a summary without the log whose times it
// takes) therefore give r other ids, and the same input placed the same
// way gives it the same ids, whichever way it was read.
func traceKey(r *forms.Request, placed []placedStage, end time.Time) [16]byte {
	var buf [512]byte // a request of a few stages is keyed without a heap allocation
	b := append(buf[:0], idVersion...)
	k := r.Key()
	b = append(b, k[:]...)
	at := func(t time.Time) { b = binary.BigEndian.AppendUint64(b, uint64(t.UnixNano())) }
	iv := func(i spans.Interval) {
		if !i.Measured() {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		at(i.Start())
		at(i.End())
	}
	b = binary.BigEndian.AppendUint64(b, r.Digest)
	at(r.Arrival)
	at(end)
	b = binary.BigEndian.AppendUint64(b, uint64(len(placed)))
	for i := range placed {
		ps := &placed[i]
		b = binary.BigEndian.AppendUint64(b, uint64(int64(ps.st.ID)))
		at(ps.st.Submit)
		at(ps.p.End)
		for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
			for _, ph := range order {
				iv(intervalOf(&ps.p, ph))
			}
		}
		for _, x := range [...]spans.Interval{ps.p.Transfer.Tx, ps.p.Transfer.InFlight, ps.p.Transfer.RxDecode} {
			iv(x)
		}
	}
	sum := sha256.Sum256(b)
	var key [16]byte
	copy(key[:], sum[:])
	if key == ([16]byte{}) {
		key[15] = 1 // an all-zero trace id is invalid
	}
	return key
}

// idState hands out the ids of one request's spans. A span's id is derived
// from what the span is, never from the order spans are made in: the
// request's key, its parent's id, its name and, for a stage's span, the
// stage's id. A span that one form of a request has and another lacks
// (a phase measured as 0 in a summary, hidden in the log's table) changes
// no other span's id.
type idState struct {
	trace trace.TraceID
	seed  uint64
	// stage is the stage being emitted, -1 outside a stage.
	stage int64
	// used holds the ids handed out, so that two spans never share one.
	used map[trace.SpanID]struct{}
	few  [16]trace.SpanID
	n    int
}

// reset makes s the state of the request whose key is key.
func (s *idState) reset(key [16]byte) {
	*s = idState{trace: trace.TraceID(key), stage: -1}
	s.seed = binary.BigEndian.Uint64(key[8:])
}

// next returns the id of the span named name being started under parent.
func (s *idState) next(name string, parent trace.SpanID) trace.SpanID {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	x := splitmix64(s.seed ^ h)
	x = splitmix64(x ^ binary.BigEndian.Uint64(parent[:]))
	x = splitmix64(x ^ uint64(s.stage+1))
	for {
		if x == 0 {
			x = 1
		}
		var id trace.SpanID
		binary.BigEndian.PutUint64(id[:], x)
		if !s.taken(id) {
			return id
		}
		x = splitmix64(x + 0x9e3779b97f4a7c15)
	}
}

// taken reports whether id was handed out already, and keeps it.
func (s *idState) taken(id trace.SpanID) bool {
	if s.used == nil {
		for _, u := range s.few[:s.n] {
			if u == id {
				return true
			}
		}
		if s.n < len(s.few) {
			s.few[s.n] = id
			s.n++
			return false
		}
		s.used = make(map[trace.SpanID]struct{}, 2*len(s.few))
		for _, u := range s.few {
			s.used[u] = struct{}{}
		}
	}
	if _, ok := s.used[id]; ok {
		return true
	}
	s.used[id] = struct{}{}
	return false
}

// splitmix64 is a bijection on 64 bits, mixing every bit of its input.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
