// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package keep

import (
	"errors"
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
	b, err := os.ReadFile("../../../deploy/collector.yaml")
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

// named joins the warnings and says whether one of them names the
// variable.
func named(warnings []error, name string) bool {
	return len(warnings) > 0 && strings.Contains(errors.Join(warnings...).Error(), name+"=")
}

func TestFromEnvTakesEachValueAsWrittenAndIgnoresTheRest(t *testing.T) {
	p, warns := FromEnv(env("OMNI_SLOW_VIDEO_MS", "86400000", "OMNI_QUEUE_BUDGET_MS", "0", "OMNI_SAMPLE_PERCENT", "100"))
	if len(warns) != 0 {
		t.Fatal(warns)
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
		if p, warns := FromEnv(env("OMNI_SLOW_IMAGE_MS", bad)); len(warns) != 1 || !named(warns, "OMNI_SLOW_IMAGE_MS") || p.Slow("image", 24*time.Hour) {
			t.Errorf("OMNI_SLOW_IMAGE_MS=%q: %v, want one warning naming it and no image request vouched for", bad, warns)
		}
	}
	for _, bad := range []string{"-0", "100.5", "101", "1e1", ".5", "5.", "05", "NaN", "Inf", " 5"} {
		if _, warns := FromEnv(env("OMNI_SAMPLE_PERCENT", bad)); !named(warns, "OMNI_SAMPLE_PERCENT") {
			t.Errorf("OMNI_SAMPLE_PERCENT=%q accepted", bad)
		}
	}
	for _, bad := range []string{" s", "s ", "\x00", "\xff", "é", strings.Repeat("s", 257), "123", "0x1F", "true", "NULL", "False", "a b", "a:b", "#a", "-a", ".inf", "${x}"} {
		if _, warns := FromEnv(env("OMNI_SAMPLE_SALT", bad)); !named(warns, "OMNI_SAMPLE_SALT") {
			t.Errorf("OMNI_SAMPLE_SALT=%q accepted", bad)
		}
	}
	for _, good := range []string{"s", "default-hash-seed", "fleet.eu-1_a", "yes", "nan2", strings.Repeat("s", 256)} {
		if _, warns := FromEnv(env("OMNI_SAMPLE_SALT", good)); len(warns) != 0 {
			t.Errorf("OMNI_SAMPLE_SALT=%q refused: %v", good, warns)
		}
	}
	// A refused value's rule vouches for no trace; the others hold.
	p, warns = FromEnv(env("OMNI_SLOW_IMAGE_MS", "1", "OMNI_SAMPLE_PERCENT", "x", "OMNI_SLOW_AUDIO_MS", "-1"))
	if len(warns) != 2 || !named(warns, "OMNI_SAMPLE_PERCENT") || !named(warns, "OMNI_SLOW_AUDIO_MS") {
		t.Errorf("two ignored variables gave %v; want a warning naming each", warns)
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
		p, warns := FromEnv(env("OMNI_SAMPLE_PERCENT", pct))
		if len(warns) != 0 {
			t.Fatal(warns)
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

// TestTheRulesAreTheCollectorFiles reads the conditions of
// deploy/collector.yaml's policies: each compares the span names, the
// modality attribute and the variables that Keeps reads, and no other.
func TestTheRulesAreTheCollectorFiles(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conds := map[string]string{}
	re := regexp.MustCompile(`(?s)- name: ([a-z-]+)\n\s+type: ottl_condition.*?span:\n\s+- ([^\n]+)`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		conds[m[1]] = m[2]
	}
	mod := `span.attributes["` + ModalityKey + `"]`
	const d = "span.end_time_unix_nano - span.start_time_unix_nano"
	want := map[string]string{
		"slow-image": `span.name == "` + RequestSpan + `" and ` + mod + ` == "image" and ` + d + ` > ${env:OMNI_SLOW_IMAGE_MS:-20000} * 1000000`,
		"slow-video": `span.name == "` + RequestSpan + `" and ` + mod + ` == "video" and ` + d + ` > ${env:OMNI_SLOW_VIDEO_MS:-300000} * 1000000`,
		"slow-audio": `span.name == "` + RequestSpan + `" and ` + mod + ` == "audio" and ` + d + ` > ${env:OMNI_SLOW_AUDIO_MS:-15000} * 1000000`,
		"slow-other": `span.name == "` + RequestSpan + `" and ` + mod + ` != "image" and ` + mod + ` != "video" and ` + mod +
			` != "audio" and ` + d + ` > ${env:OMNI_SLOW_OTHER_MS:-10000} * 1000000`,
		"saturated": `(span.name == "` + DiffusionQueueSpan + `" or span.name == "` + LLMQueueSpan +
			`") and ` + d + ` > ${env:OMNI_QUEUE_BUDGET_MS:-2000} * 1000000`,
	}
	if len(conds) != len(want) {
		t.Errorf("deploy/collector.yaml has the conditions %q; Keeps reads %d", conds, len(want))
	}
	for name, w := range want {
		if conds[name] != w {
			t.Errorf("policy %s:\n the file: %s\n Keeps:    %s", name, conds[name], w)
		}
	}
	for _, s := range []string{"type: status_code", "status_codes: [ERROR]", "type: probabilistic",
		"sampling_percentage: ${env:OMNI_SAMPLE_PERCENT:-10}", "hash_salt: ${env:OMNI_SAMPLE_SALT:-default-hash-seed}"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("deploy/collector.yaml no longer holds %q", s)
		}
	}
}

func TestKeepsIsTheTiersRuleForOneSpan(t *testing.T) {
	p, warns := FromEnv(env("OMNI_SLOW_OTHER_MS", "30000"))
	if len(warns) != 0 {
		t.Fatal(warns)
	}
	const ms = time.Millisecond
	for _, c := range []struct {
		s    Span
		want bool
	}{
		{Span{Name: "anything", Error: true}, true},
		{Span{Name: RequestSpan, Modality: "image", Duration: 20000 * ms}, false},
		{Span{Name: RequestSpan, Modality: "image", Duration: 20000*ms + 1}, true},
		{Span{Name: RequestSpan, Modality: "imag", Duration: 20000*ms + 1}, false},
		{Span{Name: RequestSpan, Modality: "imag", Duration: 30000*ms + 1}, true},
		{Span{Name: RequestSpan, Modality: "Image", Duration: 30000 * ms}, false},
		{Span{Name: RequestSpan, Modality: "", Duration: 30000*ms + 1}, true},
		{Span{Name: RequestSpan, Modality: "video", Duration: 300000 * ms}, false},
		{Span{Name: RequestSpan, Modality: "audio", Duration: 15000*ms + 1}, true},
		{Span{Name: "omni.stage", Modality: "image", Duration: time.Hour}, false},
		{Span{Name: DiffusionQueueSpan, Duration: 2000 * ms}, false},
		{Span{Name: DiffusionQueueSpan, Duration: 2000*ms + 1}, true},
		{Span{Name: LLMQueueSpan, Duration: 2000*ms + 1}, true},
		{Span{Name: "omni.llm.prefill", Duration: time.Hour}, false},
		{Span{Name: RequestSpan + " ", Modality: "image", Duration: time.Hour}, false},
	} {
		if got := p.Keeps(c.s); got != c.want {
			t.Errorf("Keeps(%+v) = %v, want %v", c.s, got, c.want)
		}
	}
}
