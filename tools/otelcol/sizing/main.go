// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command sizing measures the memory of the two tail-sampling structures
// whose size deploy/collector.yaml chooses and that the held spans do not
// account for: the decision caches (the processor's own LRU cache, filled
// to its size) and the decision timer's per-second sets of trace ids (one
// set for each second of decision_wait, each grown to the traces that
// arrived in its second). It prints bytes per entry for the sizing rule of
// docs/fleet.md:
//
//	cd tools/otelcol && go run ./sizing
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"runtime"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor/cache"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func main() {
	entries := flag.Int("cache", 2_000_000, "decision cache size (sampled_cache_size or non_sampled_cache_size), filled")
	rate := flag.Int("rate", 10_000, "new traces per second: ids inserted into one second's set")
	seconds := flag.Int("seconds", 300, "seconds of decision_wait: how many such sets")
	flag.Parse()
	if *entries < 1 || *rate < 1 || *seconds < 1 || *entries > 1<<30 || *rate > 1<<24 || *seconds > 1<<20 {
		log.Fatal("sizing: -cache, -rate and -seconds must be positive (at most 2^30, 2^24 and 2^20)")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	id := func() pcommon.TraceID {
		var t pcommon.TraceID
		binary.LittleEndian.PutUint64(t[:8], rng.Uint64())
		binary.LittleEndian.PutUint64(t[8:], rng.Uint64())
		return t
	}

	before := heap()
	c, err := cache.NewLRUDecisionCache(*entries)
	if err != nil {
		log.Fatal(err)
	}
	for range *entries {
		c.Put(id(), cache.DecisionMetadata{PolicyName: "baseline"})
	}
	cacheBytes := heap() - before
	runtime.KeepAlive(c)
	fmt.Printf("decision cache: %d entries hold %.1f MiB: %.0f bytes per entry\n",
		*entries, mib(cacheBytes), float64(cacheBytes)/float64(*entries))

	// The timer's sets are maps of trace ids; a trace is added to the set of
	// the second it arrived in, and moved out when its root span comes. A
	// map keeps the room it grew to, so each second's set costs what that
	// second's traffic made it, for decision_wait seconds.
	before = heap()
	sets := make([]map[pcommon.TraceID]struct{}, *seconds)
	for i := range sets {
		sets[i] = make(map[pcommon.TraceID]struct{})
		ids := make([]pcommon.TraceID, *rate)
		for j := range ids {
			ids[j] = id()
			sets[i][ids[j]] = struct{}{}
		}
		for _, k := range ids {
			delete(sets[i], k)
		}
	}
	setBytes := heap() - before
	runtime.KeepAlive(sets)
	fmt.Printf("decision timer: %d seconds of %d new traces/s hold %.1f MiB: %.1f bytes per trace per second of decision_wait\n",
		*seconds, *rate, mib(setBytes), float64(setBytes)/float64(*seconds)/float64(*rate))
}

// heap is the live heap after a collection.
func heap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
