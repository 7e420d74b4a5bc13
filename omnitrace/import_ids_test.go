// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// idForms are inputs of every form an import reads, each as its bytes.
func idForms(t *testing.T) map[string][]byte {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(fixturePath(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	log := string(read("vllm.log"))
	var timing, tables []string
	for _, l := range strings.SplitAfter(log, "\n") {
		switch {
		case strings.Contains(l, "[OmniTiming]"):
			timing = append(timing, l)
		case strings.Contains(l, "[stats.py:"):
			tables = append(tables, l)
		}
	}
	return map[string][]byte{
		"a summary dict":            read("summary.json"),
		"[OmniTiming] lines":        []byte(strings.Join(timing, "")),
		"box tables":                []byte(strings.Join(tables, "")),
		"a vLLM log":                []byte(log),
		"event dicts of a log":      read("events.log"),
		"event dicts of JSON lines": read("run/events.jsonl"),
		"JSON-lines records":        []byte(goodLine + "\n" + twoStages + "\n"),
	}
}

// spanTimes keeps the times each exported span was given, by its trace and
// span id, and where.
type spanTimes map[string]struct {
	start, end time.Time
	where      string
}

// add records the spans of one import, failing on a span id that another
// import (or this one) exported with other times.
func (st spanTimes) add(t *testing.T, where string, ss []traceview.Span) {
	t.Helper()
	for _, s := range ss {
		k := s.TraceID + "/" + s.SpanID
		if prev, ok := st[k]; ok && (!prev.start.Equal(s.Start) || !prev.end.Equal(s.End)) {
			t.Errorf("span %s (%s) is %s..%s in %s and %s..%s in %s", k, s.Name,
				prev.start.Format(time.RFC3339Nano), prev.end.Format(time.RFC3339Nano), prev.where,
				s.Start.Format(time.RFC3339Nano), s.End.Format(time.RFC3339Nano), where)
			continue
		}
		st[k] = struct {
			start, end time.Time
			where      string
		}{s.Start, s.End, where}
	}
}

// importSpans imports stdin (when in is not empty: the input is "-") or
// the files named in args to an OTLP/JSON file, and returns its spans.
func importSpans(t *testing.T, stdin string, args ...string) []traceview.Span {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	code, _, stderr := runCmd(t, stdin, append([]string{"import", "-out", out}, args...)...)
	if code > 1 || !strings.Contains(stderr, "imported ") || strings.Contains(stderr, "imported 0,") {
		t.Fatalf("import %v: exit %d\n%s", args, code, stderr)
	}
	return readTraces(t, out)
}

// writeWithTime writes data to a file of dir whose modification time is mtime.
func writeWithTime(t *testing.T, dir, name string, data []byte, mtime time.Time) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestASpanIDIsNeverExportedWithTwoTimes imports the same bytes of every
// form under every time base an import can take (the file's modification
// time, two copies a year apart, stdin's now, -start, -tz, -follow): no
// span id is ever exported with two different times, and the same bytes
// on the same time base, from a file or from stdin, make the same spans.
func TestASpanIDIsNeverExportedWithTwoTimes(t *testing.T) {
	clearEnv(t)
	lastYear := time.Now().AddDate(-1, 0, 0).UTC().Truncate(time.Second)
	for name, data := range idForms(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			now := writeWithTime(t, dir, "now", data, time.Now())
			old := writeWithTime(t, dir, "old", data, lastYear)
			seen := spanTimes{}
			const start = "2026-03-04T05:06:07.5+09:00"
			variants := []struct {
				what  string
				stdin string
				args  []string
			}{
				{"the file", "", []string{now}},
				{"a copy a year older", "", []string{old}},
				{"stdin", string(data), nil},
				{"the file from -start", "", []string{"-start", start, now}},
				{"stdin from -start", string(data), []string{"-start", start}},
				{"the file from another -start", "", []string{"-start", "2025-01-01T00:00:00Z", now}},
				{"the older copy in Tokyo time", "", []string{"-tz", "Asia/Tokyo", old}},
			}
			got := map[string][]traceview.Span{}
			for _, v := range variants {
				ss := importSpans(t, v.stdin, v.args...)
				got[v.what] = ss
				seen.add(t, v.what, ss)
			}
			follow := filepath.Join(dir, "follow.json")
			// An interrupt reads the followed file to its end and, with no
			// checkpoint, exports every request it holds.
			f := startFollow(t, "-out", follow, now)
			f.stop()
			seen.add(t, "-follow", readTraces(t, follow))
			if a, b := canon(t, got["the file from -start"]), canon(t, got["stdin from -start"]); a != b {
				t.Errorf("the same bytes from the same -start make other spans from a file than from stdin")
			}
			if name == "JSON-lines records" {
				// Their times are their own: every time base gives them
				// the same spans.
				if a, b := canon(t, got["the file"]), canon(t, got["a copy a year older"]); a != b {
					t.Errorf("records with their own times make other spans when the file is older")
				}
			}
		})
	}
}

// TestTwoCopiesOfALogAYearApartAreTwoTraces: the year of a log's lines is
// taken from its modification time, so two copies a year apart place each
// request a year apart: two traces, never one trace at two times.
func TestTwoCopiesOfALogAYearApartAreTwoTraces(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	data, err := os.ReadFile(fixturePath("vllm.log"))
	if err != nil {
		t.Fatal(err)
	}
	a := writeWithTime(t, dir, "a.log", data, time.Date(2025, 12, 5, 0, 0, 0, 0, time.UTC))
	b := writeWithTime(t, dir, "b.log", data, time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	sa, sb := importSpans(t, "", a), importSpans(t, "", b)
	ids := map[string]bool{}
	for _, s := range sa {
		ids[s.TraceID] = true
	}
	for _, s := range sb {
		if ids[s.TraceID] {
			t.Fatalf("trace %s holds a request of the 2025 copy and of the 2026 copy", s.TraceID)
		}
	}
	if fmt.Sprint(requestCounts(sa)) != fmt.Sprint(requestCounts(sb)) {
		t.Errorf("the copies make other requests: %v and %v", requestCounts(sa), requestCounts(sb))
	}
}
