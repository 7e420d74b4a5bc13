// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

// line is one benchmark result line as go test prints it.
func line(name string, ns, bytes, allocs float64) string {
	return fmt.Sprintf("Benchmark%s-2\t1000\t%g ns/op\t%g B/op\t%g allocs/op\n", name, ns, bytes, allocs)
}

var pair = comparison{label: "sampled", ours: "Request/otelomni", theirs: "Request/handwritten", base: "Request/floor"}

func summariseText(t *testing.T, text string, comps ...comparison) ([]row, error) {
	t.Helper()
	res, err := read(strings.NewReader(text), "test")
	if err != nil {
		t.Fatal(err)
	}
	return summarise(res, comps, "sec/op")
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestRatiosArePairedByRound: the median ratio is of each round's two
// sides, not of the sides' sorted values, and the ratio of the minimums
// takes each side's minimum over every round.
func TestRatiosArePairedByRound(t *testing.T) {
	var in strings.Builder
	for i, r := range [][3]float64{{110, 100, 90}, {100, 125, 80}, {130, 100, 95}} {
		fmt.Fprintf(&in, "round: %d\nload1: %d.5\ngoos: linux\ncpu: Test CPU\n", i+1, i+1)
		in.WriteString(line("Request/otelomni", r[0], 1000, 63))
		in.WriteString(line("Request/handwritten", r[1], 900, 60))
		in.WriteString(line("Request/floor", r[2], 800, 30))
		in.WriteString("PASS\nok  \tgithub.com/otelomni/otelomni/otelomni\t1.0s\n")
	}
	rows, err := summariseText(t, in.String(), pair)
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	// The rounds' ratios are 1.1, 0.8 and 1.3: median 1.1. Paired by
	// sorted values they would be 1.0, 1.1 and 1.04: median 1.04.
	if r.rounds != 3 || !near(r.paired.Center, 1.1) {
		t.Errorf("median of %d paired ratios %v, want 1.1 of 3", r.rounds, r.paired.Center)
	}
	if !near(r.ratioOfMins, 1.0) || !near(r.minOurs, 100e-9) || !near(r.minTheirs, 100e-9) || !near(r.minBase, 80e-9) {
		t.Errorf("minimums %v / %v (floor %v), ratio %v; want 100ns / 100ns (floor 80ns), 1.0", r.minOurs, r.minTheirs, r.minBase, r.ratioOfMins)
	}
	if r.allocsOurs != 63 || r.allocsTheirs != 60 || r.bytesOurs != 1000 || r.bytesTheirs != 900 {
		t.Errorf("allocs %v / %v, bytes %v / %v; want 63 / 60, 1000 / 900", r.allocsOurs, r.allocsTheirs, r.bytesOurs, r.bytesTheirs)
	}
	var out bytes.Buffer
	res, _ := read(strings.NewReader(in.String()), "test")
	if err := printSummary(&out, res, [][]row{rows}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"goos: linux", "cpu: Test CPU", "GOMAXPROCS: 2", "3 rounds", "1.50 to 3.50, median 2.50",
		"otelomni / handwritten", "1.000x", "1.100x", "63", "1.25x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary has no %q:\n%s", want, out.String())
		}
	}
}

// TestEachUnitIsSummarisedAlone: the CPU time per operation is
// summarised as the time is, from its own figures; a comparison whose
// sides do not report it has no row of it.
func TestEachUnitIsSummarisedAlone(t *testing.T) {
	in := "round: 1\n" +
		"BenchmarkRequest/otelomni-2\t10\t200 ns/op\t110 cpu-ns/op\n" +
		"BenchmarkRequest/handwritten-2\t10\t100 ns/op\t100 cpu-ns/op\n" +
		"BenchmarkJournal/journal-2\t10\t200 ns/op\n" +
		"BenchmarkJournal/nojournal-2\t10\t100 ns/op\n"
	res, err := read(strings.NewReader(in), "test")
	if err != nil {
		t.Fatal(err)
	}
	comps := []comparison{{label: "a", ours: "Request/otelomni", theirs: "Request/handwritten"}, {label: "b", ours: "Journal/journal", theirs: "Journal/nojournal"}}
	rows, err := summarise(res, comps, "cpu-sec/op")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].label != "a" || !near(rows[0].ratioOfMins, 1.1) || !near(rows[0].paired.Center, 1.1) {
		t.Errorf("CPU rows %+v, want one, a, of 1.1", rows)
	}
	if rows, _ := summarise(res, comps, "sec/op"); len(rows) != 2 || !near(rows[0].ratioOfMins, 2) {
		t.Errorf("time rows %+v, want two, the first of 2", rows)
	}
}

// TestKthResultsPairInOneRun: in the output of one go test -count N run,
// where each sub-benchmark's N results come one after the other, the k-th
// results of the two sides are paired.
func TestKthResultsPairInOneRun(t *testing.T) {
	var in strings.Builder
	for _, ns := range []float64{110, 100, 130} {
		in.WriteString(line("Request/otelomni", ns, 0, 0))
	}
	for _, ns := range []float64{100, 125, 100} {
		in.WriteString(line("Request/handwritten", ns, 0, 0))
	}
	rows, err := summariseText(t, in.String(), comparison{label: "x", ours: "Request/otelomni", theirs: "Request/handwritten"})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].rounds != 3 || !near(rows[0].paired.Center, 1.1) {
		t.Errorf("median of %d paired ratios %v, want 1.1 of 3", rows[0].rounds, rows[0].paired.Center)
	}
}

// TestAMissingSideIsAnError: a sub-benchmark that never reported (a
// skipped one), or a round with one side of a pair only, makes no row.
func TestAMissingSideIsAnError(t *testing.T) {
	for name, in := range map[string]string{
		"never reported": "round: 1\n" + line("Request/otelomni", 100, 0, 0) + line("Request/floor", 100, 0, 0),
		"one side in a round": "round: 1\n" + line("Request/otelomni", 100, 0, 0) + line("Request/handwritten", 100, 0, 0) + line("Request/floor", 100, 0, 0) +
			"round: 2\n" + line("Request/otelomni", 100, 0, 0) + line("Request/floor", 100, 0, 0),
	} {
		if _, err := summariseText(t, in, pair); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "Request/handwritten") {
			t.Errorf("%s: %v does not name the missing sub-benchmark", name, err)
		}
	}
}

// TestAMalformedResultIsAnError: a result line that does not parse is not
// skipped silently.
func TestAMalformedResultIsAnError(t *testing.T) {
	if _, err := read(strings.NewReader("BenchmarkRequest/otelomni-2\t1000\tmany ns/op\n"), "test"); err == nil {
		t.Error("no error")
	}
	if _, err := read(strings.NewReader("BenchmarkRequest/otelomni-2\t1000\t12 widgets/op\n"), "test"); err == nil {
		t.Error("a result with no time per operation: no error")
	}
}

// TestTheDocumentedComparisonRuns runs the command as make bench does,
// with two rounds of one iteration each: every sub-benchmark it compares
// exists, runs, and makes its row. It asserts no time.
func TestTheDocumentedComparisonRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, "", t.TempDir()+"/raw.txt", "go", 2, "1x"); err != nil {
		t.Fatal(err)
	}
	for _, s := range suites {
		for _, c := range s.rows {
			if !strings.Contains(out.String(), c.label+"  ") || !strings.Contains(out.String(), sub(c.ours)+" / "+sub(c.theirs)) {
				t.Errorf("no row %q (%s / %s):\n%s", c.label, c.ours, c.theirs, out.String())
			}
		}
	}
	for _, want := range []string{"2 rounds", "(sec/op)", "(cpu-sec/op)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q:\n%s", want, out.String())
		}
	}
}
