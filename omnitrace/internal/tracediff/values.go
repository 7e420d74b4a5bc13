// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// What the rows keep of the values of a request.

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// clip is c's interval within the request's.
func clip(c, req *traceview.Span) interval {
	iv := interval{c.Start, c.End}
	if iv.start.Before(req.Start) {
		iv.start = req.Start
	}
	if iv.end.After(req.End) {
		iv.end = req.End
	}
	if iv.end.Before(iv.start) {
		iv.end = iv.start
	}
	return iv
}

// union is the time the intervals cover, each instant once: overlapping
// phases are never added up. It sorts ivs.
func union(ivs []interval) time.Duration {
	slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
	var total time.Duration
	var cur interval
	for i, iv := range ivs {
		switch {
		case i == 0:
			cur = iv
		case iv.start.After(cur.end):
			total += cur.end.Sub(cur.start)
			cur = iv
		case iv.end.After(cur.end):
			cur.end = iv.end
		}
	}
	if len(ivs) > 0 {
		total += cur.end.Sub(cur.start)
	}
	return total
}

// reservoir keeps a uniform sample of at most max values (Vitter's
// algorithm R), from a generator seeded per row: the same input keeps the
// same sample.
type reservoir struct {
	max, seen int
	seed      uint64
	vals      []float64
	rng       *rand.Rand
}

func (r *reservoir) add(v float64) {
	r.seen++
	if len(r.vals) < r.max {
		r.vals = append(r.vals, v)
		return
	}
	if r.rng == nil {
		r.rng = rand.New(rand.NewPCG(r.seed, 0x6f6d6e69))
	}
	if i := r.rng.IntN(r.seen); i < r.max {
		r.vals[i] = v
	}
}
