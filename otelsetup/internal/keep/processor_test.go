// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package keep

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// The processor's rule, written here independently of keep.go: FNV-1a of
// 64 bits (offset basis 14695981039346656037, prime 1099511628211) over
// the salt's bytes then the trace id's 16, kept when at most MaxUint64
// times the share. The threshold is computed exactly with rationals; the
// processor rounds the product to 64 bits of mantissa, which can move it
// by one, a difference a random hash meets with probability 2^-64.
func processorThreshold(ratio float64) uint64 {
	r := new(big.Rat).SetFloat64(ratio)
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).SetUint64(math.MaxUint64)))
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if !q.IsUint64() {
		return math.MaxUint64
	}
	return q.Uint64()
}

func processorHash(salt string, b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range append([]byte(salt), b...) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// TestBaselineIsTheProcessorsDecision compares Baseline with the
// processor's rule over random trace ids, for shares whose product with
// MaxUint64 is not exact and for the ends; a share of 0, where the
// processor would still keep a hash of exactly 0, vouches for none.
func TestBaselineIsTheProcessorsDecision(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 50_000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ pct, salt string }{
		{"33.3", ""}, {"0.001", ""}, {"99.99", "fleet.eu-1"}, {"10", "On"},
		{"100", ""}, {"99.9999999999999999", ""}, {"0.0000000001", ""}, {"50", "x"},
	} {
		p, warns := FromEnv(env("OMNI_SAMPLE_PERCENT", c.pct, "OMNI_SAMPLE_SALT", c.salt))
		if len(warns) != 0 {
			t.Fatal(warns)
		}
		salt := c.salt
		if salt == "" {
			salt = defaultSalt
		}
		// The collector's YAML reads the share as strconv.ParseFloat does.
		f, err := strconv.ParseFloat(c.pct, 64)
		if err != nil {
			t.Fatal(err)
		}
		th := processorThreshold(f / 100)
		diff, kept := 0, 0
		var id trace.TraceID
		for i := 0; i < n; i++ {
			binaryFill(rng, &id)
			want := processorHash(salt, id[:]) <= th
			if got := p.Baseline(id); got != want {
				diff++
			}
			if want {
				kept++
			}
		}
		if diff != 0 {
			t.Errorf("OMNI_SAMPLE_PERCENT=%s OMNI_SAMPLE_SALT=%q: %d of %d decisions differ from the processor's", c.pct, c.salt, diff, n)
		}
		t.Logf("%s%%, salt %q: the processor keeps %d of %d; the engine agrees on every one", c.pct, salt, kept, n)
	}
	// The ends of the threshold.
	if processorThreshold(1) != math.MaxUint64 || threshold(1) != math.MaxUint64 || threshold(0) != 0 {
		t.Error("thresholds at 0 and 1 differ")
	}
}

func binaryFill(rng *rand.Rand, id *trace.TraceID) {
	a, b := rng.Uint64(), rng.Uint64()
	for i := 0; i < 8; i++ {
		id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
}
