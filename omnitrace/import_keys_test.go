// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

// unknownKeys writes n keys the import does not map, named prefix0 ...,
// as JSON members (or, python, as a dict's) after a comma.
func unknownKeys(prefix string, n int, python bool) string {
	var b strings.Builder
	for i := range n {
		if python {
			fmt.Fprintf(&b, ", '%s%d': %d", prefix, i, i)
		} else {
			fmt.Fprintf(&b, `, "%s%d": %d`, prefix, i, i)
		}
	}
	return b.String()
}

// tableRows writes n rows of a box table of keys the import does not map.
func tableRows(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "INFO 11-30 05:10:44 [stats.py:512] | %s%d | %d |\n", prefix, i, i)
	}
	return b.String()
}

// e2eTable writes a RequestE2EStats table of request id, with rows.
func e2eTable(id, rows string) string {
	const p = "INFO 11-30 05:10:44 [stats.py:512] "
	return p + "[RequestE2EStats [request_id=" + id + "]]\n" + p + "+-----+-----+\n" + p + "| Field | Value |\n" + p + "+-----+-----+\n" +
		p + "| e2e_total_ms | 20.000 |\n" + rows + p + "+-----+-----+\n"
}

// keptAndDropped returns, of a span, how many of its attributes are input
// keys named with prefix, and what it counts as dropped.
func keptAndDropped(s *traceview.Span, prefix string) (int, int64) {
	kept := 0
	for k := range s.Attrs {
		if strings.HasPrefix(k, omnikeys.RecordPrefix+prefix) || strings.HasPrefix(k, omnikeys.RecordPrefix+"transfer."+prefix) {
			kept++
		}
	}
	return kept, s.Attrs[string(forms.DroppedKeysKey)].AsInt64()
}

// TestKeysBeyondTheCapAreCountedAndReported: of every form, the keys of a
// request or stage beyond the 64 it keeps (an input key named dropped_keys
// too, which would be taken for the count) are counted on the span that
// would carry them, in omni.record.dropped_keys, and in all on stderr;
// forms of one request merged keep 64 of their keys together.
func TestKeysBeyondTheCapAreCountedAndReported(t *testing.T) {
	clearEnv(t)
	summary := `{"stage_table": [{"request_id": "k", "stages": [` +
		`{"stage_id": 0, "stage": "0:a", "stage_gen_time_ms": 5` + unknownKeys("k_", 100, false) + `}, ` +
		`{"stage_id": 1, "stage": "1:b", "stage_gen_time_ms": 5` + unknownKeys("k_", 10, false) + `}]}], ` +
		`"trans_table": [{"request_id": "k", "transfers": [{"edge": "0->1", "tx_time_ms": 1` + unknownKeys("k_t", 100, false) + `}]}], ` +
		`"e2e_table": [{"request_id": "k", "e2e_total_ms": 20, "dropped_keys": 5` + unknownKeys("k_", 100, false) + `}]}`
	events := "INFO 11-30 05:10:44 [log_utils.py:31] {'type': 'request_level_metrics', 'request_id': 'ev', 'e2e_time_ms': 5" + unknownKeys("k_", 100, true) + "}\n"
	record := `{"request_id": "jl", "arrival_time": 1796000000.5` + unknownKeys("k_", 100, false) +
		`, "stages": [{"stage_id": 0, "submit_time": 1796000000.5, "stage_gen_time_ms": 5}, {"stage_id": 1, "submit_time": 1796000000.6, "stage_gen_time_ms": 5` + unknownKeys("k_", 70, false) + `}]}` + "\n"
	type want struct {
		span          string // the request span, or a stage's ("omni.stage[1]")
		kept, dropped int
	}
	cases := []struct {
		name, stdin string
		files       map[string]string
		id          string
		want        []want
		total       int
	}{
		{"a summary's rows and entries", summary, nil, "k", []want{{"request", 64, 37}, {"stage 0", 64, 36}, {"stage 1", 64, 46}}, 119},
		{"a box table", e2eTable("tb", tableRows("k_", 100)), nil, "tb", []want{{"request", 64, 36}}, 36},
		{"an event dict", events, nil, "ev", []want{{"request", 64, 36}}, 36},
		{"a JSON-lines record", record, nil, "jl", []want{{"request", 64, 36}, {"stage 1", 64, 6}}, 42},
		{"a summary and a log of one request", "", map[string]string{
			"summary.json": `{"e2e_table": [{"request_id": "m", "e2e_total_ms": 20` + unknownKeys("k_a", 60, false) + `}]}`,
			"vllm.log":     e2eTable("m", tableRows("k_b", 60)),
		}, "m", []want{{"request", 64, 56}}, 56},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.json")
			args := []string{"import", "-out", out}
			if c.files != nil {
				dir := t.TempDir()
				for name, data := range c.files {
					args = append(args, writeWithTime(t, dir, name, []byte(data), time.Now()))
				}
			}
			code, _, stderr := runCmd(t, c.stdin, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if want := fmt.Sprintf("%d keys of the input were not kept", c.total); !strings.Contains(stderr, want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr)
			}
			tr := requestTrace(t, readTraces(t, out), c.id)
			for _, w := range c.want {
				var s *traceview.Span
				for i := range tr {
					switch x := &tr[i]; {
					case w.span == "request" && x.Name == spans.RequestSpanName,
						x.Name == spans.StageSpanName && w.span == "stage "+x.Attrs[string(attrs.StageIDKey)].String():
						s = x
					}
				}
				if s == nil {
					t.Fatalf("no %s span", w.span)
				}
				if kept, dropped := keptAndDropped(s, "k_"); kept != w.kept || dropped != int64(w.dropped) {
					t.Errorf("%s span: %d input keys kept, %d counted dropped; want %d and %d", w.span, kept, dropped, w.kept, w.dropped)
				}
			}
		})
	}
}
