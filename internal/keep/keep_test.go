// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package keep

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// TestDefaultsAreTheCollectorFilesDefaults reads deploy/collector.yaml:
// each variable of the policy is read there with the default the engine
// takes, so that an engine and a collector left at their defaults agree.
func TestDefaultsAreTheCollectorFilesDefaults(t *testing.T) {
	b, err := os.ReadFile("../../deploy/collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars {
		m := regexp.MustCompile(`\$\{env:`+v.Name+`:-([^}]*)\}`).FindAllStringSubmatch(string(b), -1)
		if len(m) == 0 {
			t.Errorf("deploy/collector.yaml does not read %s", v.Name)
		}
		for _, d := range m {
			if d[1] != v.Default {
				t.Errorf("deploy/collector.yaml reads %s with default %q; the engine's is %q", v.Name, d[1], v.Default)
			}
		}
	}
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestFromEnvTakesEachValueAsWrittenAndRefusesTheRest(t *testing.T) {
	p, err := FromEnv(env("OMNI_SLOW_VIDEO_MS", "86400000", "OMNI_QUEUE_BUDGET_MS", "0", "OMNI_SAMPLE_PERCENT", "100"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Slow("video", 24*time.Hour) || !p.Slow("video", 24*time.Hour+1) || !p.Saturated(1) || p.Saturated(0) {
		t.Errorf("thresholds not as written: %+v", p)
	}
	if !p.Slow("text", 10*time.Second+1) || p.Slow("text", 10*time.Second) || !p.Slow("", 10*time.Second+1) {
		t.Errorf("the other modalities' threshold is not the default 10 s")
	}
	for i := 0; i < 1000; i++ {
		if !p.Baseline(trace.TraceID{byte(i), byte(i >> 8), 0xff}) {
			t.Fatal("a share of 100 left a trace out")
		}
	}
	for _, bad := range []string{"-1", "+5", "05", " 5", "5 ", "5.0", "1e3", "86400001", "99999999999999999999", "５", "0x10"} {
		if _, err := FromEnv(env("OMNI_SLOW_IMAGE_MS", bad)); err == nil || !strings.Contains(err.Error(), "OMNI_SLOW_IMAGE_MS") {
			t.Errorf("OMNI_SLOW_IMAGE_MS=%q: %v, want an error naming it", bad, err)
		}
	}
	for _, bad := range []string{"-0", "100.5", "101", "1e1", ".5", "5.", "05", "NaN", "Inf", " 5"} {
		if _, err := FromEnv(env("OMNI_SAMPLE_PERCENT", bad)); err == nil {
			t.Errorf("OMNI_SAMPLE_PERCENT=%q accepted", bad)
		}
	}
	for _, bad := range []string{" s", "s ", "\x00", "\xff", "é", strings.Repeat("s", 257), "123", "0x1F", "true", "NULL", "False", "a b", "a:b", "#a", "-a", ".inf", "${x}"} {
		if _, err := FromEnv(env("OMNI_SAMPLE_SALT", bad)); err == nil {
			t.Errorf("OMNI_SAMPLE_SALT=%q accepted", bad)
		}
	}
	for _, good := range []string{"s", "default-hash-seed", "fleet.eu-1_a", "yes", "nan2", strings.Repeat("s", 256)} {
		if _, err := FromEnv(env("OMNI_SAMPLE_SALT", good)); err != nil {
			t.Errorf("OMNI_SAMPLE_SALT=%q refused: %v", good, err)
		}
	}
	// A refused value's rule vouches for no trace; the others hold.
	p, err = FromEnv(env("OMNI_SLOW_IMAGE_MS", "1", "OMNI_SAMPLE_PERCENT", "x", "OMNI_SLOW_AUDIO_MS", "-1"))
	if err == nil || !strings.Contains(err.Error(), "OMNI_SAMPLE_PERCENT") || !strings.Contains(err.Error(), "OMNI_SLOW_AUDIO_MS") {
		t.Errorf("two refused variables gave %v; want an error naming both", err)
	}
	if !p.Slow("image", 2*time.Millisecond) || p.Slow("audio", 24*time.Hour) || !p.Slow("text", 11*time.Second) {
		t.Errorf("the thresholds of %+v: want image 1 ms, no audio, text 10 s", p)
	}
	for i := 0; i < 1000; i++ {
		if p.Baseline(trace.TraceID{byte(i), byte(i >> 8), 0xff}) {
			t.Fatal("a refused share vouched for a trace")
		}
	}
	p, _ = FromEnv(env("OMNI_SAMPLE_PERCENT", "100", "OMNI_SAMPLE_SALT", "true"))
	if p.Baseline(trace.TraceID{1}) {
		t.Error("a refused salt vouched for a trace")
	}
}

// TestTheBaselineShareIsItsShare: over many trace ids, the share kept is
// the percentage, and a share of 0 keeps none.
func TestTheBaselineShareIsItsShare(t *testing.T) {
	for _, pct := range []string{"0", "10", "33.5"} {
		p, err := FromEnv(env("OMNI_SAMPLE_PERCENT", pct))
		if err != nil {
			t.Fatal(err)
		}
		const n = 200000
		kept := 0
		var id trace.TraceID
		for i := 0; i < n; i++ {
			id[0], id[1], id[2], id[15] = byte(i), byte(i>>8), byte(i>>16), 0x5a
			if p.Baseline(id) {
				kept++
			}
		}
		want := map[string]float64{"0": 0, "10": 0.10, "33.5": 0.335}[pct]
		if got := float64(kept) / n; got < want-0.01 || got > want+0.01 {
			t.Errorf("OMNI_SAMPLE_PERCENT=%s kept %.4f of the traces", pct, got)
		}
	}
}
