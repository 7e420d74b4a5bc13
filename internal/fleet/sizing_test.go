// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/jaeger"
)

// The sizing rule of docs/fleet.md, its measured costs and the traffic the
// shipped defaults are sized for.
const (
	bytesPerHeldSpan  = 1536 // 1.5 KB
	bytesPerTimerSlot = 40   // per new trace per second of decision_wait
	bytesPerCacheItem = 120
	processMiB        = 50
	designSpans       = 20              // spans per trace
	designRequest     = 5 * time.Second // mean request length
	designBatchDelay  = 5 * time.Second // the engines' OTEL_BSP_SCHEDULE_DELAY
	designLateWindow  = 60 * time.Second
)

// shippedDefaults reads the default of every key of the shipped collector
// file set from an environment variable (key: ${env:NAME:-default}), by key.
func shippedDefaults(t *testing.T) map[string]string {
	t.Helper()
	root, err := jaeger.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, CollectorConfig))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([a-z_]+):\s*\$\{env:OMNI_[A-Z_]+:-([^}]*)\}`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestShippedDefaultsFitTheSizingRule evaluates the sizing rule on the
// shipped defaults at the traffic they are sized for (new traces per second
// = expected_new_traces_per_sec): held spans, decision timer, decision
// caches and the process must fit under the memory limiter's soft limit,
// num_traces must hold the undecided traces twice over, and each decision
// cache must remember a decision past the engines' export retries.
func TestShippedDefaultsFitTheSizingRule(t *testing.T) {
	d := shippedDefaults(t)
	num := func(key string) float64 {
		v, err := strconv.ParseFloat(d[key], 64)
		if err != nil || v <= 0 {
			t.Fatalf("%s: default %q is not a positive number", key, d[key])
		}
		return v
	}
	dur := func(key string) time.Duration {
		v, err := time.ParseDuration(d[key])
		if err != nil || v <= 0 {
			t.Fatalf("%s: default %q is not a positive duration", key, d[key])
		}
		return v
	}
	r := num("expected_new_traces_per_sec")
	waitMax := dur("decision_wait")
	hold := waitMax // without a decision after the root, every trace waits the maximum
	if _, ok := d["decision_wait_after_root_received"]; ok {
		if w := dur("decision_wait_after_root_received"); w >= waitMax {
			t.Errorf("decision_wait_after_root_received %v is not under decision_wait %v", w, waitMax)
		} else {
			hold = min(designRequest+designBatchDelay+w, waitMax)
			if w <= designBatchDelay+time.Second {
				t.Errorf("decision_wait_after_root_received %v does not cover the engines' %v batch delay and the 1 s tick", w, designBatchDelay)
			}
		}
	}
	const mib = 1 << 20
	held := r * designSpans * hold.Seconds() * bytesPerHeldSpan / mib
	timer := waitMax.Seconds() * r * bytesPerTimerSlot / mib
	caches := (num("sampled_cache_size") + num("non_sampled_cache_size")) * bytesPerCacheItem / mib
	sum := held + timer + caches + processMiB
	soft := num("limit_mib") - num("spike_limit_mib")
	t.Logf("held spans %.0f MiB, timer %.0f MiB, caches %.0f MiB, process %d MiB: %.0f MiB; soft limit %.0f MiB",
		held, timer, caches, processMiB, sum, soft)
	if sum > soft {
		t.Errorf("the sizing rule gives %.0f MiB, over the soft limit of %.0f MiB", sum, soft)
	}
	if spike := num("spike_limit_mib"); spike < r*designSpans*bytesPerHeldSpan/mib {
		t.Errorf("spike_limit_mib %.0f is under one second of spans", spike)
	}
	if n := num("num_traces"); n < 2*r*hold.Seconds() {
		t.Errorf("num_traces %.0f is under twice the %.0f undecided traces", n, r*hold.Seconds())
	}
	for _, key := range []string{"sampled_cache_size", "non_sampled_cache_size"} {
		if c := num(key); c < r*designLateWindow.Seconds() {
			t.Errorf("%s %.0f forgets a decision within %v at %.0f new traces/s", key, c, designLateWindow, r)
		}
	}
	if waitMax < 5*time.Minute+designBatchDelay+time.Second {
		t.Errorf("decision_wait %v: a video slower than its 5 min threshold would be decided without its request span", waitMax)
	}
}
