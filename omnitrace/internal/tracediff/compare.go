// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/aclements/go-moremath/mathx"
	"github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Correction names how the p-values of a comparison's tests are
// corrected for their number.
type Correction string

const (
	// Holm is Holm's step-down correction: the chance that any row is
	// flagged when nothing changed (the family-wise error) stays below
	// alpha.
	Holm Correction = "holm"
	// BH is Benjamini and Hochberg's: the expected share of flagged rows
	// that did not change (the false discovery rate) stays below alpha.
	BH Correction = "bh"
)

// Options tune a comparison.
type Options struct {
	// Alpha is the level below which a corrected p-value is significant
	// (0: 0.05).
	Alpha float64
	// Confidence is the level of the confidence intervals (0: 0.95).
	Confidence float64
	// Correction is Holm (the default) or BH.
	Correction Correction
}

func (o Options) withDefaults() Options {
	if o.Alpha <= 0 || o.Alpha >= 1 || math.IsNaN(o.Alpha) {
		o.Alpha = 0.05
	}
	if o.Confidence <= 0 || o.Confidence >= 1 || math.IsNaN(o.Confidence) {
		o.Confidence = 0.95
	}
	if o.Correction == "" {
		o.Correction = Holm
	}
	return o
}

// Report is the comparison of two sides.
type Report struct {
	Options Options
	// Tests is the number of tests the correction is over.
	Tests int
	// Rows are the phases' durations, one a row; Critical, each row's
	// share of the requests' length on their critical path.
	Rows     []Row
	Critical []CriticalRow
	// Base and New count what each side read.
	Base, New Counts
}

// Counts are what one side read.
type Counts struct {
	Requests int `json:"requests"`
	Traces   int `json:"traces"`
	// TracesWithProblems had spans that could not be placed in their
	// tree; NoLength requests ended before they started; Hidden values
	// were of rows beyond the bound.
	TracesWithProblems int `json:"traces_with_problems"`
	NoLength           int `json:"no_length"`
	Hidden             int `json:"hidden"`
}

// Test is one test's outcome.
type Test struct {
	// Done says the test was made: both sides have what it needs.
	Done bool
	// P is the test's p-value, Adjusted the corrected one.
	P, Adjusted float64
	// Significant: Adjusted is below alpha.
	Significant bool
}

// Row is one phase's durations on both sides.
type Row struct {
	Key
	rank      rank
	opts      Options
	Base, New Stats
	// Duration is the Mann–Whitney U test of the two samples; Measured
	// the chi-squared test of the shares of requests that measured the
	// phase.
	Duration, Measured Test
}

// Stats are one side's figures of a row, in ms.
type Stats struct {
	// Requests of the row's modality (and model); Measured of them
	// measured the phase at least once.
	Requests, Measured int
	// Samples is the number of values kept (at most Settings.Samples).
	Samples int
	// P50 and P99 with their confidence intervals (Lo, Hi; infinite
	// where the sample is too small to bound them); NaN with no sample.
	P50, P50Lo, P50Hi float64
	P99, P99Lo, P99Hi float64
	// Values are the kept values, sorted.
	Values []float64
}

// Share is Measured over Requests, or NaN.
func (s Stats) Share() float64 {
	if s.Requests == 0 {
		return math.NaN()
	}
	return float64(s.Measured) / float64(s.Requests)
}

// CriticalRow is one row's part of the critical path on both sides.
type CriticalRow struct {
	Key
	rank rank
	// BaseShare and NewShare are the time the row held the critical
	// path over the requests' length, summed over the requests of the
	// row's modality (and model).
	BaseShare, NewShare float64
	// Base and New are the per-request shares of the requests that
	// measured the row (0 where it was off the path), sorted.
	Base, New []float64
	// Share is the Mann–Whitney U test of the per-request shares.
	Share Test
}

// Significant reports whether any of the row's tests is.
func (r *Row) Significant() bool { return r.Duration.Significant || r.Measured.Significant }

// Change is the relative change of the p50: +Inf from 0 to more, NaN
// when a side has no p50.
func (r *Row) Change() float64 { return change(r.Base.P50, r.New.P50) }

// ChangeP99 is the relative change of the p99, as Change.
func (r *Row) ChangeP99() float64 { return change(r.Base.P99, r.New.P99) }

func change(a, b float64) float64 {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.NaN()
	case a == b:
		return 0
	case a == 0:
		// From nothing (a phase measured as 0) to something: slower by
		// more than any percentage.
		return math.Inf(int(math.Copysign(1, b)))
	}
	return b/a - 1
}

// Compare compares base and new. It sorts their samples, which the
// report then holds: a side added to after it keeps a uniform sample, not
// the one it would have kept unsorted.
func Compare(base, new *Side, o Options) *Report {
	o = o.withDefaults()
	rep := &Report{Options: o, Base: base.counts(), New: new.counts()}
	var tests []*Test
	for _, k := range keys(base, new, 0) {
		b, n := base.row(0, k), new.row(0, k)
		r := Row{Key: k, rank: rankOf(b, n), opts: o}
		r.Base = base.stats(k, b, o.Confidence)
		r.New = new.stats(k, n, o.Confidence)
		if len(r.Base.Values) > 0 && len(r.New.Values) > 0 {
			r.Duration = uTest(r.Base.Values, r.New.Values, o.Alpha)
		}
		r.Measured = shareTest(r.Base.Measured, r.Base.Requests, r.New.Measured, r.New.Requests)
		rep.Rows = append(rep.Rows, r)
	}
	for _, k := range keys(base, new, 1) {
		b, n := base.row(1, k), new.row(1, k)
		r := CriticalRow{Key: k, rank: rankOf(b, n), BaseShare: base.share(k, b), NewShare: new.share(k, n)}
		r.Base, r.New = sorted(b), sorted(n)
		if len(r.Base) > 0 && len(r.New) > 0 {
			r.Share = uTest(r.Base, r.New, o.Alpha)
		}
		rep.Critical = append(rep.Critical, r)
	}
	slices.SortStableFunc(rep.Rows, func(a, b Row) int { return compareRows(a.Key, a.rank, b.Key, b.rank) })
	slices.SortStableFunc(rep.Critical, func(a, b CriticalRow) int { return compareRows(a.Key, a.rank, b.Key, b.rank) })
	for i := range rep.Rows {
		tests = append(tests, &rep.Rows[i].Duration, &rep.Rows[i].Measured)
	}
	for i := range rep.Critical {
		tests = append(tests, &rep.Critical[i].Share)
	}
	rep.Tests = correct(tests, o)
	return rep
}

func (s *Side) counts() Counts {
	return Counts{Requests: s.requests, Traces: s.traces, TracesWithProblems: s.problemTraces, NoLength: s.noLength, Hidden: s.hidden}
}

func (s *Side) stats(k Key, r *row, confidence float64) Stats {
	st := Stats{Requests: s.groupOf(k).requests, P50: math.NaN(), P50Lo: math.NaN(), P50Hi: math.NaN(),
		P99: math.NaN(), P99Lo: math.NaN(), P99Hi: math.NaN()}
	if r == nil {
		return st
	}
	st.Measured = r.measured
	st.Values = sorted(r)
	st.Samples = len(st.Values)
	if st.Samples == 0 {
		return st
	}
	sum := benchmath.AssumeNothing.Summary(&benchmath.Sample{Values: st.Values, Thresholds: &benchmath.DefaultThresholds}, confidence)
	st.P50, st.P50Lo, st.P50Hi = sum.Center, sum.Lo, sum.Hi
	st.P99, st.P99Lo, st.P99Hi = stats.QuantileCI(st.Samples, 0.99, confidence).SampleCI(stats.Sample{Xs: st.Values, Sorted: true})
	return st
}

func (s *Side) groupOf(k Key) groupStat {
	if g := s.groups[group{k.Modality, k.Model}]; g != nil {
		return *g
	}
	return groupStat{}
}

func (s *Side) share(k Key, r *row) float64 {
	g := s.groupOf(k)
	if r == nil || g.length <= 0 {
		return math.NaN()
	}
	return r.onPath / g.length
}

// sorted returns the row's sample, sorted in place: the report reads the
// side's values, never a second copy of them (a sample is a set: its
// order means nothing to the reservoir).
func sorted(r *row) []float64 {
	if r == nil {
		return nil
	}
	slices.Sort(r.res.vals)
	return r.res.vals
}

// uTest is benchmath's Mann–Whitney U test of two sorted samples. All
// values equal are no evidence of a change (p = 1).
//
// The exact distribution it uses for small samples with ties (at most 25
// values a side) gives p = 0 where every value of one sample lies below
// every value of the other ([0.028 1 1] against [0.0058]: 0, where 0.5
// is right): p is held to at least 2/C(n1+n2, n1), the least any
// two-sided test of samples of these sizes can give.
func uTest(a, b []float64, alpha float64) Test {
	th := &benchmath.Thresholds{CompareAlpha: alpha}
	c := benchmath.AssumeNothing.Compare(&benchmath.Sample{Values: a, Thresholds: th}, &benchmath.Sample{Values: b, Thresholds: th})
	// With ties it can also give more than 1 (4/3 for the seed of
	// FuzzCompare in testdata): p is held to at most 1.
	p := min(max(c.P, 2/mathx.Choose(len(a)+len(b), len(a))), 1)
	return Test{Done: true, P: p}
}

// minExpected is the least expected count of a cell of the 2x2 table for
// the chi-squared test to be made: below it, the test's distribution is
// not the chi-squared one, and no p-value is given.
const minExpected = 5

// shareTest is Pearson's chi-squared test (one degree of freedom, no
// continuity correction) of the 2x2 table of requests that measured a
// phase and did not, on each side.
func shareTest(m1, n1, m2, n2 int) Test {
	if n1 <= 0 || n2 <= 0 || m1 > n1 || m2 > n2 {
		return Test{}
	}
	obs := []float64{float64(m1), float64(n1 - m1), float64(m2), float64(n2 - m2)}
	total := float64(n1 + n2)
	measured := float64(m1+m2) / total
	exp := []float64{measured * float64(n1), (1 - measured) * float64(n1), measured * float64(n2), (1 - measured) * float64(n2)}
	if slices.Min(exp) < minExpected {
		return Test{}
	}
	x := stat.ChiSquare(obs, exp)
	return Test{Done: true, P: distuv.ChiSquared{K: 1}.Survival(x)}
}

// correct corrects the p-values of the tests made, and marks those below
// alpha; it returns how many there were.
func correct(tests []*Test, o Options) int {
	done := slices.DeleteFunc(slices.Clone(tests), func(t *Test) bool { return !t.Done })
	for _, t := range done {
		if math.IsNaN(t.P) {
			t.P = 1
		}
	}
	slices.SortStableFunc(done, func(a, b *Test) int { return cmp.Compare(a.P, b.P) })
	m := float64(len(done))
	switch o.Correction {
	case BH:
		// Step-up: the least of (m/i) p_i over i and above.
		run := 1.0
		for i := len(done) - 1; i >= 0; i-- {
			run = math.Min(run, m/float64(i+1)*done[i].P)
			done[i].Adjusted = run
		}
	default:
		// Step-down: the greatest of (m-i+1) p_i over i and below.
		run := 0.0
		for i, t := range done {
			run = math.Max(run, math.Min(1, (m-float64(i))*t.P))
			t.Adjusted = run
		}
	}
	for _, t := range done {
		t.Significant = t.Adjusted < o.Alpha
	}
	return len(done)
}

// keys returns the keys of the rows of a table (0 durations, 1 the
// critical path) on either side.
func keys(a, b *Side, table int) []Key {
	var out []Key
	for i, s := range []*Side{a, b} {
		for _, r := range s.table(table) {
			// The second side adds the rows the first lacks (none when
			// both are one side).
			if r != nil && (i == 0 || a.row(table, r.key) == nil) {
				out = append(out, r.key)
			}
		}
	}
	return out
}

func (s *Side) table(t int) []*row {
	if t == 0 {
		return s.rows
	}
	return s.crit
}

// row returns the row of key k in table t, or nil.
func (s *Side) row(t int, k Key) *row {
	id, ok := s.ids[k]
	if !ok {
		return nil
	}
	return s.table(t)[id]
}

func rankOf(a, b *row) rank {
	if a != nil {
		return a.rank
	}
	return b.rank
}

func compareRows(a Key, ra rank, b Key, rb rank) int {
	return cmp.Or(
		cmp.Compare(a.Modality, b.Modality),
		cmp.Compare(a.Model, b.Model),
		cmp.Compare(ra.stage, rb.stage),
		cmp.Compare(a.Stage, b.Stage),
		cmp.Compare(ra.phase, rb.phase),
		cmp.Compare(a.Phase, b.Phase),
	)
}

// String names the row as the table shows it.
func (k Key) String() string {
	s := fmt.Sprintf("%s %s %s", k.Modality, k.Stage, k.Phase)
	if k.Model != "" {
		s = k.Model + " " + s
	}
	return s
}
