// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/omnitrace.md, omnitrace diff: the commands run in the clone with
// the omnitrace its first block built; the example's runs write the
// OTLP/JSON files the later commands read, and the harness copies the
// logs of the importer's test data to before/ and after/.

const (
	diffOmniKey    = "docs/omnitrace.md#omnitrace-diff/1"
	diffLogsKey    = "docs/omnitrace.md#omnitrace-diff/2"
	diffSampleKey  = "docs/omnitrace.md#omnitrace-diff/3"
	diffCritKey    = "docs/omnitrace.md#omnitrace-diff/4"
	diffFormatsKey = "docs/omnitrace.md#omnitrace-diff/5"
)

// runDiffExample: go run ./examples/omni ... -out FILE writes FILE, an
// OTLP/JSON file of its requests.
func runDiffExample(t *testing.T, s *docSession, c string) {
	otRun(t, s, c)
	name := flagIn(c, "-out")
	b, err := os.ReadFile(filepath.Join(s.ws.clone, name))
	if err != nil || !strings.Contains(string(b), `"resourceSpans"`) {
		t.Fatalf("%s: %s is not OTLP/JSON (%v)", c, name, err)
	}
}

// decodeSlower matches a row of both first stages' llm.decode found
// significantly slower; stageSlower and requestSlower, the rows of those
// stages and of their requests.
var (
	decodeSlower  = regexp.MustCompile(`(?m)^(audio|image) +llm 0 (thinker|ar) +llm\.decode .*│ \+\d+\.\d+% \(`)
	stageSlower   = regexp.MustCompile(`(?m)^(audio|image) +llm 0 (thinker|ar) +stage .*│ \+\d+\.\d+% \(`)
	requestSlower = regexp.MustCompile(`(?m)^(audio|image) +- +request .*│ \+\d+\.\d+% \(`)
)

// runDiffOmni: both first stages' decode found slower, and their stages
// and requests with them, on 40 requests a side, as the page says.
func runDiffOmni(t *testing.T, s *docSession, c string) {
	out, _ := otRun(t, s, c)
	for _, want := range []string{"base: base.json: 40 requests in 40 traces\n", "new:  new.json: 40 requests in 40 traces\n", "Holm's correction"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: no %q:\n%s", c, want, out)
		}
	}
	for what, re := range map[string]*regexp.Regexp{"llm.decode": decodeSlower, "stage": stageSlower, "request": requestSlower} {
		if got := re.FindAllString(out, -1); len(got) != 2 {
			t.Errorf("%s: the first stages' %s found slower in %d rows, want 2 (audio and image):\n%s", c, what, len(got), out)
		}
	}
}

// runDiffFailOn: exit status 3, and the rows said.
func runDiffFailOn(t *testing.T, s *docSession, c string) {
	out, errOut := otRun(t, s, c)
	if !strings.HasSuffix(out, "\n3\n") {
		t.Errorf("%s: `echo $?` printed %q, want 3", c, tail(out))
	}
	if !strings.Contains(errOut, "regression beyond -fail-on 50%: audio llm 0 thinker llm.decode p50 +") {
		t.Errorf("%s: stderr\n%s", c, errOut)
	}
}

// runDiffLogs: the logs of the importer's test data, one run's summary
// and log merged on the new side; the output is the page's.
func runDiffLogs(t *testing.T, s *docSession, c string) {
	data := filepath.Join(s.ws.clone, "omnitrace", "internal", "omnirecord", "testdata")
	for from, to := range map[string]string{"vllm.log": "before/vllm.log", "run/summary.json": "after/summary.json", "run/vllm.log": "after/vllm.log"} {
		b, err := os.ReadFile(filepath.Join(data, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(s.ws.clone, filepath.Dir(to)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(s.ws.clone, to, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut := otRun(t, s, c)
	if want := blockOf(t, diffSampleKey).text; strings.TrimRight(out, "\n") != strings.TrimRight(want, "\n") {
		t.Errorf("%s printed\n%s\nthe page shows\n%s", c, out, want)
	}
	if !strings.Contains(errOut, "before/vllm.log:48: [OmniTiming]: total=1.2 is not seconds; skipped") {
		t.Errorf("%s: the log's bad line not said:\n%s", c, errOut)
	}
}

// runTableCritical: the request's table with its path marked.
func runTableCritical(t *testing.T, s *docSession, c string) {
	out, _ := otRun(t, s, c)
	if !strings.HasPrefix(out, `request "chatcmpl-speech-00010000"`) || !regexp.MustCompile(`(?m)^  llm\.decode .*\d\*`).MatchString(out) ||
		!strings.Contains(out, "* on the critical path") {
		t.Errorf("%s:\n%s", c, out)
	}
}

// runDiffJSON: one object, 40 requests a side, the decode rows
// significant.
func runDiffJSON(t *testing.T, s *docSession, c string) {
	otRun(t, s, c)
	b, err := os.ReadFile(filepath.Join(s.ws.clone, "diff.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := readDiffJSON(t, string(b))
	sig := d.significant()
	for _, row := range []string{"audio llm 0 thinker llm.decode", "image llm 0 ar llm.decode"} {
		if !strings.Contains(strings.Join(sig, "\n"), row) {
			t.Errorf("%s: %s not significant: %v", c, row, sig)
		}
	}
	s.state["diff.significant"] = sig
	s.state["diff.rows"] = len(d.Rows) + len(d.Critical)
}

// runDiffCSV: a header and a line a row.
func runDiffCSV(t *testing.T, s *docSession, c string) {
	otRun(t, s, c)
	f, err := os.Open(filepath.Join(s.ws.clone, "diff.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 10 || recs[0][0] != "table" {
		t.Fatalf("%s: %v %v", c, err, recs)
	}
	for _, r := range recs[1:] {
		if r[0] != "duration" && r[0] != "critical" {
			t.Errorf("%s: a line of table %q", c, r[0])
		}
	}
	// A line a row of either table: as many as the JSON report's rows.
	if rows, _ := s.state["diff.rows"].(int); len(recs)-1 != rows {
		t.Errorf("%s: %d lines of rows, the JSON report has %d rows", c, len(recs)-1, rows)
	}
}

// runDiffHTML: one chart per significant row of the JSON report (drawn
// in a browser by TestDiffHTMLReportDrawsOneChartPerSignificantRow).
func runDiffHTML(t *testing.T, s *docSession, c string) {
	otRun(t, s, c)
	b, err := os.ReadFile(filepath.Join(s.ws.clone, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := s.state["diff.significant"].([]string)
	if n := strings.Count(string(b), `<figure class="chart">`); n != len(sig) || n == 0 {
		t.Errorf("%s: %d charts, %d significant rows", c, n, len(sig))
	}
}
