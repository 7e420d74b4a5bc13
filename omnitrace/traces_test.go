// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "traces.json")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSummaryHoldsAWindowNotTheFile: summary gathers a file's spans into
// traces a window at a time, and says the same of it as when it holds the
// whole file in one window.
func TestSummaryHoldsAWindowNotTheFile(t *testing.T) {
	var b bytes.Buffer
	genOTLP(&b, 500)
	path := writeFile(t, b.String())
	code, whole, stderr := runCmd(t, "", "summary", "-max-spans", "100000", "-file", path)
	if code != 0 || !strings.HasPrefix(whole, "500 requests") {
		t.Fatalf("exit %d:\n%s%s", code, whole, stderr)
	}
	for _, window := range []string{"6", "50", "1000"} {
		code, out, stderr := runCmd(t, "", "summary", "-max-spans", window, "-file", path)
		if code != 0 || out != whole || stderr != "" {
			t.Errorf("-max-spans %s: exit %d, stderr %q:\n%s\nwant:\n%s", window, code, stderr, out, whole)
		}
	}
}

// spreadTrace writes a file whose trace "far" has its phase in the first
// document and its request span in the last, with others between.
func spreadTrace(between int) string {
	t0 := int64(1796000000000000000)
	far := otlpSpan(0xfa, 2, 1, "omni.diffusion.postprocess", t0, t0+1e6, `{"key":"omni.phase","value":{"stringValue":"postprocess"}},`)
	root := otlpSpan(0xfa, 1, 0, "omni.request", t0, t0+2e6, `{"key":"omni.request.id","value":{"stringValue":"far"}},`)
	doc := func(ss ...string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.Join(ss, ",") + `]}]}]}` + "\n"
	}
	var b strings.Builder
	b.WriteString(doc(far))
	var mid bytes.Buffer
	genOTLP(&mid, between)
	b.Write(mid.Bytes())
	b.WriteString(doc(root))
	return b.String()
}

// TestSpansFartherApartThanTheWindowAreSaid: a trace whose spans lie
// farther apart than -max-spans is summarised from what was gathered, and
// the spans that came after are counted and said; table, reading a file,
// reads it again for the whole trace, and from stdin says what it left
// out.
func TestSpansFartherApartThanTheWindowAreSaid(t *testing.T) {
	data := spreadTrace(100)
	path := writeFile(t, data)
	code, out, stderr := runCmd(t, "", "summary", "-max-spans", "50", "-file", path)
	if code != 0 || !strings.HasPrefix(out, "100 requests") || !strings.Contains(stderr, "1 spans came after their trace was read") {
		t.Errorf("summary: exit %d, stderr %q:\n%s", code, stderr, out)
	}
	code, out, stderr = runCmd(t, "", "summary", "-file", path)
	if code != 0 || !strings.HasPrefix(out, "101 requests") || stderr != "" {
		t.Errorf("summary with the default window: exit %d, stderr %q:\n%s", code, stderr, out)
	}
	code, out, stderr = runCmd(t, "", "table", "-max-spans", "50", "-file", path, "-request", "far")
	if code != 0 || !strings.Contains(out, "postprocess") || strings.Contains(out, "note:") {
		t.Errorf("table of a file: exit %d, stderr %q:\n%s", code, stderr, out)
	}
	code, out, stderr = runCmd(t, data, "table", "-max-spans", "50", "-file", "-", "-request", "far")
	if code != 1 || !strings.Contains(stderr, "lie farther apart in the input than -max-spans 50") {
		t.Errorf("table of stdin: exit %d, stderr %q:\n%s", code, stderr, out)
	}
}

// TestATraceLargerThanTheWindowKeepsItsFrame: of a trace of more spans
// than -max-spans, its requests, stages and hand-overs are still kept
// (up to as many again), so that its table is shown and its requests
// summarised from what was kept; what was left out is said.
func TestATraceLargerThanTheWindowKeepsItsFrame(t *testing.T) {
	var b bytes.Buffer
	genOneTrace(&b, 3000)
	path := writeFile(t, b.String())
	code, out, stderr := runCmd(t, "", "table", "-max-spans", "1000", "-file", path)
	if code != 0 || !strings.Contains(out, `request "one"`) || !strings.Contains(out, "2000 spans of the trace beyond -max-spans 1000 not read") {
		t.Errorf("table: exit %d, stderr %q:\n%s", code, stderr, lastOf(out))
	}
	code, out, stderr = runCmd(t, "", "summary", "-max-spans", "1000", "-file", path)
	if code != 0 || !strings.HasPrefix(out, "1 request") || !strings.Contains(out, fmt.Sprintf("%6d", 1000)) ||
		!strings.Contains(stderr, "2000 spans of traces of more than -max-spans 1000 spans") {
		t.Errorf("summary: exit %d, stderr %q:\n%s", code, stderr, out)
	}
}

// TestTableCountsTheTracesOfAFile: a file of several traces, none named,
// says how many; more than it counts, that it holds more.
func TestTableCountsTheTracesOfAFile(t *testing.T) {
	var b bytes.Buffer
	genOTLP(&b, 3)
	code, _, stderr := runCmd(t, "", "table", "-file", writeFile(t, b.String()))
	if code != 1 || !strings.Contains(stderr, "3 traces: name one") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, out, stderr := runCmd(t, "", "table", "-file", writeFile(t, b.String()), fmt.Sprintf("%032x", 2))
	if code != 0 || !strings.Contains(out, `request "chatcmpl-0000000000000001"`) {
		t.Errorf("a trace named: exit %d, stderr %q:\n%s", code, stderr, out)
	}
}
