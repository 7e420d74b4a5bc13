// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/testbed/internal/jaeger"
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
	num, dur := defaultNum(t, d), defaultDur(t, d)
	r := num("expected_new_traces_per_sec")
	waitMax := dur("decision_wait")
	if _, ok := d["decision_wait_after_root_received"]; ok {
		if w := dur("decision_wait_after_root_received"); w >= waitMax {
			t.Errorf("decision_wait_after_root_received %v is not under decision_wait %v", w, waitMax)
		} else if w <= designBatchDelay+time.Second {
			t.Errorf("decision_wait_after_root_received %v does not cover the engines' %v batch delay and the 1 s tick", w, designBatchDelay)
		}
	}
	terms := sizingTerms(t, d)
	hold := terms.hold
	sum, soft := terms.sum(), terms.soft
	t.Logf("held spans %.0f MiB, timer %.0f MiB, caches %.0f MiB, process %d MiB: %.0f MiB; soft limit %.0f MiB",
		terms.held, terms.timer, terms.caches, processMiB, sum, soft)
	if sum > soft {
		t.Errorf("the sizing rule gives %.0f MiB, over the soft limit of %.0f MiB", sum, soft)
	}
	const mib = 1 << 20
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

// defaultNum reads a default that must be a positive number.
func defaultNum(t *testing.T, d map[string]string) func(key string) float64 {
	return func(key string) float64 {
		v, err := strconv.ParseFloat(d[key], 64)
		if err != nil || v <= 0 {
			t.Fatalf("%s: default %q is not a positive number", key, d[key])
		}
		return v
	}
}

// defaultDur reads a default that must be a positive duration.
func defaultDur(t *testing.T, d map[string]string) func(key string) time.Duration {
	return func(key string) time.Duration {
		v, err := time.ParseDuration(d[key])
		if err != nil || v <= 0 {
			t.Fatalf("%s: default %q is not a positive duration", key, d[key])
		}
		return v
	}
}

// sizing holds the sizing rule's terms for a file's defaults, in MiB, and
// the mean time a trace is held.
type sizing struct {
	held, timer, caches, soft float64
	hold                      time.Duration
}

func (z sizing) sum() float64 { return z.held + z.timer + z.caches + processMiB }

// sizingTerms evaluates the rule on the defaults d at the traffic they are
// sized for.
func sizingTerms(t *testing.T, d map[string]string) sizing {
	t.Helper()
	num, dur := defaultNum(t, d), defaultDur(t, d)
	r := num("expected_new_traces_per_sec")
	waitMax := dur("decision_wait")
	hold := waitMax // without a decision after the root, every trace waits the maximum
	if _, ok := d["decision_wait_after_root_received"]; ok {
		if w := dur("decision_wait_after_root_received"); w < waitMax {
			hold = min(designRequest+designBatchDelay+w, waitMax)
		}
	}
	const mib = 1 << 20
	return sizing{
		held:   r * designSpans * hold.Seconds() * bytesPerHeldSpan / mib,
		timer:  waitMax.Seconds() * r * bytesPerTimerSlot / mib,
		caches: (num("sampled_cache_size") + num("non_sampled_cache_size")) * bytesPerCacheItem / mib,
		soft:   num("limit_mib") - num("spike_limit_mib"),
		hold:   hold,
	}
}

// TestTheSizingRuleIsThePages: the rule docs/fleet.md states, its
// coefficients and its table of the shipped defaults are the ones
// TestShippedDefaultsFitTheSizingRule evaluates; the engines' batch delay
// it assumes is the SDK's default.
func TestTheSizingRuleIsThePages(t *testing.T) {
	root, err := jaeger.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		fmt.Sprintf("r × n × h × %s KB", strconv.FormatFloat(bytesPerHeldSpan/1024.0, 'f', -1, 64)),
		fmt.Sprintf("W × max(r, E) × %d B", bytesPerTimerSlot),
		fmt.Sprintf("2 × C × %d B", bytesPerCacheItem),
		fmt.Sprintf("the process      %d MiB", processMiB),
		fmt.Sprintf("OTEL_BSP_SCHEDULE_DELAY of the engines (%d s by default)", int(designBatchDelay.Seconds())),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("docs/fleet.md does not state %q", want)
		}
	}
	if sdk := time.Duration(sdktrace.DefaultScheduleDelay) * time.Millisecond; sdk != designBatchDelay {
		t.Errorf("the SDK's default batch delay is %v; the rule assumes %v", sdk, designBatchDelay)
	}
	z := sizingTerms(t, shippedDefaults(t))
	rows := map[string]float64{"held spans": z.held, "decision timer": z.timer, "decision caches": z.caches, "the process": processMiB}
	for name, mibs := range rows {
		m := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(name) + ` \|[^|]*\| (\d+) \|$`).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("docs/fleet.md: no row %q in the table of the defaults", name)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != int(math.Round(mibs)) {
			t.Errorf("docs/fleet.md: %s %d MiB; the defaults give %.0f", name, got, mibs)
		}
	}
	want := fmt.Sprintf("| sum | | %.0f, within the soft limit", z.sum())
	if !strings.Contains(page, want) || !strings.Contains(page, fmt.Sprintf("= %.0f |", z.soft)) {
		t.Errorf("docs/fleet.md: no %q with the soft limit %.0f", want, z.soft)
	}
}
