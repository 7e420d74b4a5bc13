package omnirecord

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// idVersion changes the ids of every import when the way they are derived
// changes, so that a new derivation never collides with an old one.
const idVersion = "omnitrace-ids/1"

// Key returns the request's identity, from which its trace and span ids
// are derived: the run it belongs to (as its input tells it, and the
// user's -run name), its id, and a digest of what was read for it. The
// same input gives the same key, so importing a file twice, or resuming a
// followed log, gives every span the ids it had; two runs that reuse a
// request id differ in their run (an arrival time, a log line's time, a
// summary's own figures), and -run names a run explicitly.
func (r *Request) Key() [16]byte {
	h := sha256.New()
	for _, s := range []string{idVersion, r.RunName, r.Run, r.ID} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var d [8]byte
	binary.BigEndian.PutUint64(d[:], r.Digest)
	h.Write(d[:])
	var k [16]byte
	copy(k[:], h.Sum(nil))
	if k == ([16]byte{}) {
		k[15] = 1 // an all-zero trace id is invalid
	}
	return k
}

type idsKey struct{}

// idState hands out the ids of one request's spans, in the order the
// spans start: the order of emission is fixed, so the ids are too.
type idState struct {
	trace trace.TraceID
	seed  uint64
	n     atomic.Uint64
}

func withIDs(ctx context.Context, key [16]byte) context.Context {
	st := &idState{trace: trace.TraceID(key)}
	st.seed = binary.BigEndian.Uint64(key[8:])
	return context.WithValue(ctx, idsKey{}, st)
}

func (s *idState) next() trace.SpanID {
	var id trace.SpanID
	x := splitmix64(s.seed + s.n.Add(1)*0x9e3779b97f4a7c15)
	if x == 0 {
		x = 1
	}
	binary.BigEndian.PutUint64(id[:], x)
	return id
}

// splitmix64 is a bijection on 64 bits: distinct counters give distinct
// span ids within a trace.
func splitmix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// IDGenerator derives trace and span ids from the request being emitted
// (see [Request.Key]); for spans made outside [Request.Emit] it draws
// random ids.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if st, ok := ctx.Value(idsKey{}).(*idState); ok {
		return st.trace, st.next()
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	return tid, sid
}

func (idGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if st, ok := ctx.Value(idsKey{}).(*idState); ok && st.trace == tid {
		return st.next()
	}
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	return sid
}
