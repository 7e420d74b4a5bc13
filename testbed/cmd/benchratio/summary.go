// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchunit"
)

// measure is one sub-benchmark's figures in one round, by unit (as the
// Go benchmark format tidies them: "sec/op", "cpu-sec/op", "B/op",
// "allocs/op").
type measure map[string]float64

// The units compared: the time per operation, and the process's CPU time
// per operation where the benchmark reports it.
var units = []struct{ unit, title string }{
	{"sec/op", "time per request"},
	{"cpu-sec/op", "CPU time of the process per request (every thread's; no time waiting for a core)"},
}

// results are the sub-benchmarks' figures by round.
type results struct {
	// by maps a sub-benchmark's full name, without its GOMAXPROCS
	// suffix, to its figures by round.
	by map[string]map[string]measure
	// rounds are the rounds in the order they were read.
	rounds []string
	// load is the load average at the start of each round that says it.
	load []float64
	// machine is what the output says of the machine (goos, goarch, cpu)
	// and GOMAXPROCS, the first values read.
	machine [][2]string
}

// read reads benchmark output in the Go benchmark format. A result belongs
// to the round its "round" configuration names; within one round (or in
// output with no round at all, such as one go test -count N run), the
// k-th result of a sub-benchmark belongs to the k-th round of it, so the
// k-th results of two sub-benchmarks are paired.
func read(r io.Reader, fileName string) (*results, error) {
	res := &results{by: map[string]map[string]measure{}}
	seenRound := map[string]bool{}
	seenMachine := map[string]bool{}
	nth := map[string]int{} // by round and name: results read so far
	rd := benchfmt.NewReader(r, fileName)
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, rec
		case *benchfmt.Result:
			name, procs := splitProcs(rec.Name)
			for _, k := range []string{"goos", "goarch", "cpu"} {
				if v := rec.GetConfig(k); v != "" && !seenMachine[k] {
					seenMachine[k] = true
					res.machine = append(res.machine, [2]string{k, v})
				}
			}
			if procs != "" && !seenMachine["GOMAXPROCS"] {
				seenMachine["GOMAXPROCS"] = true
				res.machine = append(res.machine, [2]string{"GOMAXPROCS", procs})
			}
			key := rec.GetConfig("round") + "\x00" + name
			round := fmt.Sprintf("%s#%d", rec.GetConfig("round"), nth[key])
			nth[key]++
			if !seenRound[round] {
				seenRound[round] = true
				res.rounds = append(res.rounds, round)
				if v, err := strconv.ParseFloat(rec.GetConfig("load1"), 64); err == nil {
					res.load = append(res.load, v)
				}
			}
			if _, ok := rec.Value("sec/op"); !ok {
				file, line := rec.Pos()
				return nil, fmt.Errorf("%s:%d: %s has no time per operation", file, line, name)
			}
			m := measure{}
			for _, v := range rec.Values {
				m[v.Unit] = v.Value
			}
			if res.by[name] == nil {
				res.by[name] = map[string]measure{}
			}
			res.by[name][round] = m
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// splitProcs returns a benchmark's name without its GOMAXPROCS suffix
// ("-2"), and that GOMAXPROCS.
func splitProcs(n benchfmt.Name) (name, procs string) {
	base, parts := n.Parts()
	var b strings.Builder
	b.Write(base)
	for _, p := range parts {
		if len(p) > 1 && p[0] == '-' {
			procs = string(p[1:])
			continue
		}
		b.Write(p)
	}
	return b.String(), procs
}

// row is one comparison, summarised in one unit.
type row struct {
	comparison
	unit   string
	rounds int
	// min are the minimums of ours, theirs and the base over the rounds
	// (the base's 0 when the comparison has none).
	minOurs, minTheirs, minBase float64
	// ratioOfMins is minOurs/minTheirs; paired the median of the rounds'
	// ratios of ours to theirs, with its confidence interval.
	ratioOfMins float64
	paired      benchmath.Summary
	// allocsOurs, allocsTheirs and bytesOurs, bytesTheirs are medians
	// over the rounds; NaN when not reported.
	allocsOurs, allocsTheirs float64
	bytesOurs, bytesTheirs   float64
}

// confidence is the confidence level of the median's interval.
const confidence = 0.95

// summarise summarises each comparison in unit over the rounds in which
// its sub-benchmarks ran. It fails when a sub-benchmark has no result, or
// a round has one side of a pair and not the other; it returns no row
// where a side does not report unit in some round.
func summarise(res *results, comps []comparison, unit string) ([]row, error) {
	var rows []row
comps:
	for _, c := range comps {
		ours, theirs := res.by[c.ours], res.by[c.theirs]
		for _, n := range []string{c.ours, c.theirs, c.base} {
			if n != "" && len(res.by[n]) == 0 {
				return nil, fmt.Errorf("%s: no result (skipped, or not in the output)", n)
			}
		}
		r := row{comparison: c, unit: unit}
		var ratios, so, st, sb, ao, at, bo, bt []float64
		for _, round := range res.rounds {
			o, okO := ours[round]
			t, okT := theirs[round]
			if okO != okT {
				return nil, fmt.Errorf("round %s has %s without %s", strings.TrimSuffix(round, "#0"), pick(okO, c.ours, c.theirs), pick(okO, c.theirs, c.ours))
			}
			if !okO {
				continue
			}
			vo, okO := o[unit]
			vt, okT := t[unit]
			if !okO || !okT {
				continue comps
			}
			ratios = append(ratios, vo/vt)
			so, st = append(so, vo), append(st, vt)
			if _, ok := o["allocs/op"]; ok {
				ao, at, bo, bt = append(ao, o["allocs/op"]), append(at, t["allocs/op"]), append(bo, o["B/op"]), append(bt, t["B/op"])
			}
			if b, ok := res.by[c.base][round][unit]; ok {
				sb = append(sb, b)
			}
		}
		r.rounds = len(ratios)
		r.minOurs, r.minTheirs = slices.Min(so), slices.Min(st)
		if len(sb) > 0 {
			r.minBase = slices.Min(sb)
		}
		r.ratioOfMins = r.minOurs / r.minTheirs
		r.paired = median(ratios)
		r.allocsOurs, r.allocsTheirs = median(ao).Center, median(at).Center
		r.bytesOurs, r.bytesTheirs = median(bo).Center, median(bt).Center
		rows = append(rows, r)
	}
	return rows, nil
}

func pick(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}

// median summarises xs by their median and its confidence interval, as
// benchstat does; NaN for no values.
func median(xs []float64) benchmath.Summary {
	if len(xs) == 0 {
		return benchmath.Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(slices.Clone(xs), &benchmath.DefaultThresholds), confidence)
}

// printSummary writes the summary: the machine and the rounds' load, then
// a table of the comparisons for each unit that has rows, the first with
// the allocations.
func printSummary(w io.Writer, res *results, tables [][]row) error {
	var head []string
	for _, kv := range res.machine {
		head = append(head, kv[0]+": "+kv[1])
	}
	fmt.Fprintln(w, strings.Join(head, "  "))
	fmt.Fprintf(w, "%d rounds", len(res.rounds))
	if len(res.load) > 0 {
		l := median(res.load)
		fmt.Fprintf(w, "; load average (1 min) at a round's start: %.2f to %.2f, median %.2f",
			slices.Min(res.load), slices.Max(res.load), l.Center)
	}
	fmt.Fprintln(w)
	for i, rows := range tables {
		if len(rows) == 0 {
			continue
		}
		for _, u := range units {
			if u.unit == rows[0].unit {
				fmt.Fprintf(w, "\n%s (%s)\n", u.title, u.unit)
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := "path\tours / theirs\tratio of minimums\tmedian of paired ratios (95% CI)\tmin ours\tmin theirs\tmin floor\tours / floor"
		if i == 0 {
			head += "\tallocs/op ours\ttheirs\tB/op ours\ttheirs"
		}
		fmt.Fprintln(tw, head+"\t")
		for _, r := range rows {
			floor, overFloor := "", ""
			if r.base != "" && r.minBase > 0 {
				floor = seconds(r.minBase)
				overFloor = fmt.Sprintf("%.2fx", r.minOurs/r.minBase)
			}
			fmt.Fprintf(tw, "%s\t%s / %s\t%.3fx\t%.3fx [%.3f, %.3f] n=%d\t%s\t%s\t%s\t%s",
				r.label, sub(r.ours), sub(r.theirs), r.ratioOfMins, r.paired.Center, r.paired.Lo, r.paired.Hi, r.rounds,
				seconds(r.minOurs), seconds(r.minTheirs), floor, overFloor)
			if i == 0 {
				fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", count(r.allocsOurs), count(r.allocsTheirs), count(r.bytesOurs), count(r.bytesTheirs))
			}
			fmt.Fprintln(tw, "\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// sub is a sub-benchmark's name without its benchmark's.
func sub(name string) string {
	if _, s, ok := strings.Cut(name, "/"); ok {
		return s
	}
	return name
}

func seconds(v float64) string { return benchunit.Scale(v, benchunit.Decimal) + "s" }

// count formats a count per operation: whole, or with one decimal when
// the rounds' median is not whole; "-" when not reported.
func count(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
