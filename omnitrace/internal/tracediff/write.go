// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchmath"
)

// Names are what the two sides were read from, for the header.
type Names struct{ Base, New string }

// Method says which tests and correction the report used, in words.
func (r *Report) Method() string {
	corr := "Holm's correction (family-wise error)"
	if r.Options.Correction == BH {
		corr = "Benjamini–Hochberg's correction (false discovery rate)"
	}
	return fmt.Sprintf("Mann–Whitney U for durations and critical-path shares, Pearson's chi-squared for shares measured; %s over %d tests; alpha %g; intervals at %g%%",
		corr, r.Tests, r.Options.Alpha, 100*r.Options.Confidence)
}

// WriteText writes the report as tables a person reads: benchstat's
// columns, "~" where a change is not significant.
func (r *Report) WriteText(w io.Writer, names Names) error {
	var b bytes.Buffer
	r.writeText(&b, names)
	for line := range strings.Lines(b.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func (r *Report) writeText(w io.Writer, names Names) {
	fmt.Fprintf(w, "base: %s: %s\n", names.Base, r.Base.describe())
	fmt.Fprintf(w, "new:  %s: %s\n", names.New, r.New.describe())
	fmt.Fprintf(w, "tests: %s\n\n", r.Method())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	model := r.byModel()
	head := "modality\t"
	if model {
		head = "model\t" + head
	}
	fmt.Fprintf(tw, "%sstage\tphase\t│ base measured\tp50 ms\tp99 ms\t│ new measured\tp50 ms\tp99 ms\t│ p50 vs base\tmeasured vs base\n", head)
	for i := range r.Rows {
		row := &r.Rows[i]
		lead := row.Modality + "\t"
		if model {
			lead = row.Model + "\t" + lead
		}
		fmt.Fprintf(tw, "%s%s\t%s\t│ %s\t%s\t%s\t│ %s\t%s\t%s\t│ %s\t%s\n", lead, row.Stage, row.Phase,
			measured(row.Base), center(row.Base.P50, row.Base.P50Lo, row.Base.P50Hi), center(row.Base.P99, row.Base.P99Lo, row.Base.P99Hi),
			measured(row.New), center(row.New.P50, row.New.P50Lo, row.New.P50Hi), center(row.New.P99, row.New.P99Lo, row.New.P99Hi),
			row.durationChange(), row.measuredChange())
	}
	tw.Flush()
	fmt.Fprintf(w, "\ncritical path: each row's share of the requests' length on it (self: a stage's own time, in none of its phases)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%sstage\tphase\t│ base\t│ new\t│ vs base\n", head)
	for i := range r.Critical {
		c := &r.Critical[i]
		lead := c.Modality + "\t"
		if model {
			lead = c.Model + "\t" + lead
		}
		fmt.Fprintf(tw, "%s%s\t%s\t│ %s\t│ %s\t│ %s\n", lead, c.Stage, c.Phase, pct(c.BaseShare), pct(c.NewShare), c.change())
	}
	tw.Flush()
}

func (c Counts) describe() string {
	s := plural(c.Requests, "request") + " in " + plural(c.Traces, "trace")
	var notes []string
	if c.NoLength > 0 {
		notes = append(notes, fmt.Sprintf("%d ending before they start, not measured", c.NoLength))
	}
	if c.TracesWithProblems > 0 {
		notes = append(notes, fmt.Sprintf("%d traces with spans that could not be placed in their tree", c.TracesWithProblems))
	}
	if c.Hidden > 0 {
		notes = append(notes, fmt.Sprintf("%d values of rows beyond the bound not kept", c.Hidden))
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func (r *Report) byModel() bool {
	for _, row := range r.Rows {
		if row.Model != "" {
			return true
		}
	}
	return false
}

func measured(s Stats) string {
	if s.Requests == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d %s", s.Measured, s.Requests, pct(s.Share()))
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// num writes a duration in ms with four significant digits at most.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 0):
		return "∞"
	case a >= 1e4:
		return strconv.FormatFloat(v, 'g', 4, 64)
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// center is a value with its confidence interval as benchstat prints
// it: ± the larger distance to a bound, in percent of the value.
func center(v, lo, hi float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return num(v) + " ± " + benchmath.Summary{Center: v, Lo: lo, Hi: hi}.PctRangeString()
}

func (r *Row) durationChange() string {
	nb, nn := r.Base.Samples, r.New.Samples
	switch {
	case nb == 0 && nn == 0:
		return "-"
	case nb == 0:
		return "new"
	case nn == 0:
		return "gone"
	}
	c := benchmath.Comparison{P: r.Duration.Adjusted, N1: nb, N2: nn, Alpha: r.Options().Alpha}
	if !r.Duration.Significant {
		return "~ (" + c.String() + ")"
	}
	return fmt.Sprintf("%s (%s)", signedPct(r.Change()), c.String())
}

// Options is a row's own copy of its report's alpha, set by Compare.
func (r *Row) Options() Options { return r.opts }

func signedPct(v float64) string {
	switch {
	case math.IsNaN(v):
		return "?"
	case math.IsInf(v, 1):
		return "+∞%"
	case math.IsInf(v, -1):
		return "-∞%"
	}
	return fmt.Sprintf("%+.2f%%", 100*v)
}

func (r *Row) measuredChange() string {
	if !r.Measured.Done {
		if r.Base.Share() == r.New.Share() {
			return ""
		}
		return "? (too few to test)"
	}
	if !r.Measured.Significant {
		return fmt.Sprintf("~ (p=%.3f)", r.Measured.Adjusted)
	}
	return fmt.Sprintf("%s -> %s (p=%.3f)", pct(r.Base.Share()), pct(r.New.Share()), r.Measured.Adjusted)
}

func (c *CriticalRow) change() string {
	switch {
	case len(c.Base) == 0 && len(c.New) == 0:
		return "-"
	case len(c.Base) == 0:
		return "new"
	case len(c.New) == 0:
		return "gone"
	}
	cmp := benchmath.Comparison{P: c.Share.Adjusted, N1: len(c.Base), N2: len(c.New)}
	if !c.Share.Significant {
		return "~ (" + cmp.String() + ")"
	}
	return fmt.Sprintf("%+.1f points (%s)", 100*(c.NewShare-c.BaseShare), cmp.String())
}

// jnum is a number for JSON: null when not finite.
type jnum float64

func (n jnum) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'g', -1, 64), nil
}

type jsonTest struct {
	Done        bool `json:"done"`
	P           jnum `json:"p"`
	Adjusted    jnum `json:"p_adjusted"`
	Significant bool `json:"significant"`
}

func (t Test) json() jsonTest {
	if !t.Done {
		return jsonTest{P: jnum(math.NaN()), Adjusted: jnum(math.NaN())}
	}
	return jsonTest{true, jnum(t.P), jnum(t.Adjusted), t.Significant}
}

type jsonStats struct {
	Requests int  `json:"requests"`
	Measured int  `json:"measured"`
	Samples  int  `json:"samples"`
	P50      jnum `json:"p50_ms"`
	P50Lo    jnum `json:"p50_lo_ms"`
	P50Hi    jnum `json:"p50_hi_ms"`
	P99      jnum `json:"p99_ms"`
	P99Lo    jnum `json:"p99_lo_ms"`
	P99Hi    jnum `json:"p99_hi_ms"`
}

func (s Stats) json() jsonStats {
	return jsonStats{s.Requests, s.Measured, s.Samples, jnum(s.P50), jnum(s.P50Lo), jnum(s.P50Hi), jnum(s.P99), jnum(s.P99Lo), jnum(s.P99Hi)}
}

// WriteJSON writes the report as one JSON object (numbers not finite,
// such as an interval's unbounded end, are null).
func (r *Report) WriteJSON(w io.Writer, names Names) error {
	type jrow struct {
		Key
		Base      jsonStats `json:"base"`
		New       jsonStats `json:"new"`
		Change    jnum      `json:"p50_change"`
		ChangeP99 jnum      `json:"p99_change"`
		Duration  jsonTest  `json:"duration_test"`
		Measured  jsonTest  `json:"measured_test"`
	}
	type jcrit struct {
		Key
		BaseShare   jnum     `json:"base_share"`
		NewShare    jnum     `json:"new_share"`
		BaseSamples int      `json:"base_samples"`
		NewSamples  int      `json:"new_samples"`
		Share       jsonTest `json:"share_test"`
	}
	out := struct {
		Base       string  `json:"base"`
		New        string  `json:"new"`
		BaseCounts Counts  `json:"base_counts"`
		NewCounts  Counts  `json:"new_counts"`
		Method     string  `json:"method"`
		Correction string  `json:"correction"`
		Alpha      float64 `json:"alpha"`
		Confidence float64 `json:"confidence"`
		Tests      int     `json:"tests"`
		Rows       []jrow  `json:"rows"`
		Critical   []jcrit `json:"critical_path"`
	}{Base: names.Base, New: names.New, BaseCounts: r.Base, NewCounts: r.New, Method: r.Method(),
		Correction: string(r.Options.Correction), Alpha: r.Options.Alpha, Confidence: r.Options.Confidence, Tests: r.Tests,
		Rows: []jrow{}, Critical: []jcrit{}}
	for _, row := range r.Rows {
		out.Rows = append(out.Rows, jrow{row.Key, row.Base.json(), row.New.json(), jnum(row.Change()), jnum(row.ChangeP99()), row.Duration.json(), row.Measured.json()})
	}
	for _, c := range r.Critical {
		out.Critical = append(out.Critical, jcrit{c.Key, jnum(c.BaseShare), jnum(c.NewShare), len(c.Base), len(c.New), c.Share.json()})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// textCell is a row's name (modality, model, stage, phase) for a CSV
// cell: one that a spreadsheet would read as a formula (it begins with
// =, +, - or @) is written after a ', which spreadsheets show as text;
// the "-" of no value stays as it is.
func textCell(s string) string {
	if s != stageNone && s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// WriteCSV writes one line a row, durations then the critical path, with
// a header; cells that do not apply are empty. Names that begin as a
// spreadsheet formula are written after a ' (see textCell).
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	t := func(x Test) []string {
		if !x.Done {
			return []string{"", "", ""}
		}
		return []string{f(x.P), f(x.Adjusted), strconv.FormatBool(x.Significant)}
	}
	side := func(s Stats) []string {
		return []string{strconv.Itoa(s.Requests), strconv.Itoa(s.Measured), f(s.P50), f(s.P50Lo), f(s.P50Hi), f(s.P99), f(s.P99Lo), f(s.P99Hi)}
	}
	head := []string{"table", "modality", "model", "stage", "phase"}
	for _, p := range []string{"base", "new"} {
		for _, c := range []string{"requests", "measured", "p50_ms", "p50_lo_ms", "p50_hi_ms", "p99_ms", "p99_lo_ms", "p99_hi_ms"} {
			head = append(head, p+"_"+c)
		}
	}
	head = append(head, "p50_change", "p", "p_adjusted", "significant", "measured_p", "measured_p_adjusted", "measured_significant", "base_share", "new_share")
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, row := range r.Rows {
		rec := []string{"duration", textCell(row.Modality), textCell(row.Model), textCell(row.Stage), textCell(row.Phase)}
		rec = append(rec, side(row.Base)...)
		rec = append(rec, side(row.New)...)
		rec = append(rec, f(row.Change()))
		rec = append(rec, t(row.Duration)...)
		rec = append(rec, t(row.Measured)...)
		rec = append(rec, "", "")
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	for _, c := range r.Critical {
		rec := []string{"critical", textCell(c.Modality), textCell(c.Model), textCell(c.Stage), textCell(c.Phase)}
		rec = append(rec, make([]string, 16)...)
		rec = append(rec, "")
		rec = append(rec, t(c.Share)...)
		rec = append(rec, "", "", "", f(c.BaseShare), f(c.NewShare))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
