// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// hostileNames are model, modality and span names no engine should send.
var hostileNames = []string{
	`=HYPERLINK("http://x","y")`, "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1",
	`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`, "a,\"b\"\nc", "\xff\xfe",
	strings.Repeat("é", 1000), "]]></text><script>x</script>",
}

// hostileReport compares two sides whose requests carry hostileNames as
// their model, modality and a phase's name, the new side slower.
func hostileReport() *Report {
	sides := [2]*Side{NewSide(Settings{ByModel: true}), NewSide(Settings{ByModel: true})}
	for si, s := range sides {
		for i := range 40 {
			m := hostileNames[i%len(hostileNames)]
			tid := fmt.Sprint(i)
			d := 50 + float64(i%7) + 100*float64(si)
			s.Add([]traceview.Span{
				sp(tid, "r", "", "omni.request", 0, 200, attribute.String("gen_ai.request.model", m), attribute.String("omni.output.modality", m)),
				sp(tid, "e", "r", "omni.diffusion.exec", 0, d),
				sp(tid, "x", "r", m, 0, d),
			})
		}
	}
	return Compare(sides[0], sides[1], Options{Correction: BH, Alpha: 0.5})
}

// TestCSVOfHostileNames: the CSV parses, every line has the header's
// cells, and no text cell begins as a spreadsheet formula (=, +, -, @):
// such a cell is written after a ' (the "-" of no value excepted).
func TestCSVOfHostileNames(t *testing.T) {
	var b bytes.Buffer
	if err := hostileReport().WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("not valid CSV: %v", err)
	}
	seen := map[string]bool{}
	for _, rec := range recs[1:] {
		for _, cell := range rec[1:5] {
			if !utf8.ValidString(cell) {
				t.Errorf("cell %q is not valid UTF-8", cell)
			}
			if cell != stageNone && cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("cell %q begins a formula", cell)
			}
			seen[cell] = true
		}
	}
	for _, want := range []string{`'=HYPERLINK("http://x","y")`, "'+1+1", "'-2+3", "'@SUM(A1)"} {
		if !seen[want] {
			t.Errorf("no cell %q", want)
		}
	}
}

// TestJSONOfHostileNames: the JSON is valid, of valid UTF-8, and keeps
// the names as they are (cut, made valid), formulas and all.
func TestJSONOfHostileNames(t *testing.T) {
	var b bytes.Buffer
	if err := hostileReport().WriteJSON(&b, Names{"a\xff", "<b>"}); err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b.Bytes()) {
		t.Error("not valid UTF-8")
	}
	var out struct {
		Rows []struct{ Model string }
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	found := false
	for _, r := range out.Rows {
		found = found || r.Model == `=HYPERLINK("http://x","y")`
	}
	if !found {
		t.Error("the formula-like model is not kept as it is")
	}
}

// TestHTMLOfHostileNames: no name reaches the page as markup (every <
// of them escaped), the page loads nothing, and each chart is an SVG
// that parses.
func TestHTMLOfHostileNames(t *testing.T) {
	rep := hostileReport()
	var b bytes.Buffer
	if err := rep.WriteHTML(&b, Names{"<script>base</script>", `"new"`}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<img src=x", "</text>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	for _, bad := range []string{"http://", "https://", "src=\"//", "@import"} {
		if i := strings.Index(page, bad); i >= 0 && !strings.Contains(page[max(0, i-20):i], "HYPERLINK") {
			t.Errorf("the page refers outside: %q", page[max(0, i-40):min(len(page), i+40)])
		}
	}
	charts, err := rep.Charts()
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) == 0 {
		t.Fatal("no chart drawn: the hostile rows should be significant at alpha 0.5")
	}
	for _, c := range charts {
		if err := xmlWellFormed(c.SVG); err != nil {
			t.Errorf("chart %q: %v", c.Title, err)
		}
	}
}

func xmlWellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// TestChartsDrawEveryValueRange: a side of more values than a chart is
// drawn from gives the chart values spread over all of them, its least
// and greatest included, in order.
func TestChartsDrawEveryValueRange(t *testing.T) {
	vals := make([]float64, 3*maxChartValues+7)
	for i := range vals {
		vals[i] = float64(i)
	}
	got := chartValues(vals)
	if len(got) != maxChartValues || got[0] != 0 || got[len(got)-1] != vals[len(vals)-1] || !slices.IsSorted(got) {
		t.Fatalf("%d values from %v to %v, want %d from 0 to %v", len(got), got[0], got[len(got)-1], maxChartValues, vals[len(vals)-1])
	}
	// Its median is the median of all, within a step.
	if m, want := got[len(got)/2], vals[len(vals)/2]; math.Abs(m-want) > 4 {
		t.Errorf("median %v, of all %v", m, want)
	}
	if short := vals[:10]; len(chartValues(short)) != 10 {
		t.Error("a short side is not drawn whole")
	}
}
