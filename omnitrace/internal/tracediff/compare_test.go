// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// TestUTestOfTinyTiedSamplesIsNotZero: the exact U distribution with
// ties gives 0 for samples of 3 and 1 that do not overlap; the least p a
// two-sided test of them can give is 2/C(4,3) = 0.5.
func TestUTestOfTinyTiedSamplesIsNotZero(t *testing.T) {
	got := uTest([]float64{0.028, 1, 1}, []float64{0.0058}, 0.05)
	if got.P < 0.5 {
		t.Errorf("p = %v for [0.028 1 1] against [0.0058], want at least 0.5", got.P)
	}
	if got := uTest([]float64{1, 1, 1}, []float64{1, 1}, 0.05); got.P != 1 {
		t.Errorf("p = %v for samples all equal, want 1", got.P)
	}
}

// TestCorrections: Holm's and Benjamini–Hochberg's adjusted p-values of
// a known family.
func TestCorrections(t *testing.T) {
	ps := []float64{0.01, 0.04, 0.03, 0.005}
	for _, tc := range []struct {
		c    Correction
		want []float64
	}{
		// Holm: sorted 0.005 0.01 0.03 0.04 times 4 3 2 1, running max.
		{Holm, []float64{0.03, 0.06, 0.06, 0.02}},
		// BH: sorted times 4/1 4/2 4/3 4/4, running min from the top.
		{BH, []float64{0.02, 0.04, 0.04, 0.02}},
	} {
		tests := make([]*Test, len(ps))
		for i, p := range ps {
			tests[i] = &Test{Done: true, P: p}
		}
		tests = append(tests, &Test{}) // not made: not counted
		if n := correct(tests, Options{Alpha: 0.05, Correction: tc.c}.withDefaults()); n != len(ps) {
			t.Errorf("%s: %d tests counted, want %d", tc.c, n, len(ps))
		}
		for i, want := range tc.want {
			if math.Abs(tests[i].Adjusted-want) > 1e-12 {
				t.Errorf("%s: p %v adjusted to %v, want %v", tc.c, ps[i], tests[i].Adjusted, want)
			}
			if tests[i].Significant != (want < 0.05) {
				t.Errorf("%s: p %v significant %v", tc.c, ps[i], tests[i].Significant)
			}
		}
	}
}

// TestShareTest: 90 % against 60 % of 200 is a change; 50 % against 50 %
// is none; too few to expect 5 in a cell is no test.
func TestShareTest(t *testing.T) {
	if r := shareTest(180, 200, 120, 200); !r.Done || r.P > 1e-6 {
		t.Errorf("90%% against 60%% of 200: %+v", r)
	}
	if r := shareTest(100, 200, 100, 200); !r.Done || r.P < 0.99 {
		t.Errorf("50%% against 50%%: %+v", r)
	}
	if r := shareTest(2, 3, 1, 3); r.Done {
		t.Errorf("3 requests a side: tested %+v", r)
	}
	if r := shareTest(5, 3, 1, 3); r.Done {
		t.Errorf("more measured than requests: tested %+v", r)
	}
}

// TestAChangeFromZeroIsInfinitelySlower: a phase measured as 0 on every
// base request and as 50 to 99 ms on every new one is significantly
// slower, by more than any percentage: its change is +Inf (so -fail-on
// catches it), and the table says so rather than "?".
func TestAChangeFromZeroIsInfinitelySlower(t *testing.T) {
	b, n := NewSide(Settings{}), NewSide(Settings{})
	for i := range 50 {
		tid := fmt.Sprint(i)
		b.Add([]traceview.Span{sp(tid, "r", "", "omni.request", 0, 200), sp(tid, "q", "r", "omni.diffusion.queue_wait", 0, 0)})
		n.Add([]traceview.Span{sp(tid, "r", "", "omni.request", 0, 200), sp(tid, "q", "r", "omni.diffusion.queue_wait", 0, 50+float64(i))})
	}
	rep := Compare(b, n, Options{})
	var row *Row
	for i := range rep.Rows {
		if rep.Rows[i].Phase == "queue_wait" {
			row = &rep.Rows[i]
		}
	}
	if row == nil || !row.Duration.Significant || !math.IsInf(row.Change(), 1) || !math.IsInf(row.ChangeP99(), 1) {
		t.Fatalf("queue_wait: %+v, change %v, p99 change %v; want significant and +Inf", row, row.Change(), row.ChangeP99())
	}
	if got := row.durationChange(); !strings.HasPrefix(got, "+∞% (p=") {
		t.Errorf("the table says %q", got)
	}
	// The reverse is -100 %, and nothing to nothing is no change.
	if c := change(74.5, 0); c != -1 {
		t.Errorf("74.5 to 0: %v, want -1", c)
	}
	if c := change(0, 0); c != 0 {
		t.Errorf("0 to 0: %v, want 0", c)
	}
}

// TestASideAgainstItselfHasEachRowOnce: Compare(s, s) is one row a key,
// every test p = 1, nothing significant.
func TestASideAgainstItselfHasEachRowOnce(t *testing.T) {
	s := NewSide(Settings{})
	for i := range 30 {
		tid := fmt.Sprint(i)
		s.Add([]traceview.Span{sp(tid, "r", "", "omni.request", 0, 200), sp(tid, "e", "r", "omni.diffusion.exec", 0, 50+float64(i))})
	}
	rep := Compare(s, s, Options{})
	seen := map[Key]bool{}
	for _, r := range rep.Rows {
		if seen[r.Key] {
			t.Errorf("row %s twice", r.Key)
		}
		seen[r.Key] = true
		if r.Significant() {
			t.Errorf("row %s significant against itself", r.Key)
		}
	}
	clear(seen)
	for _, r := range rep.Critical {
		if seen[r.Key] {
			t.Errorf("critical row %s twice", r.Key)
		}
		seen[r.Key] = true
	}
	if len(rep.Rows) != 3 || len(rep.Critical) != 2 {
		t.Errorf("%d rows and %d critical rows, want 3 (request, unattributed, exec) and 2", len(rep.Rows), len(rep.Critical))
	}
}

// TestCompareKeepsNoSecondCopyOfTheSamples: the report of two sides of
// full samples holds far less than the samples themselves (it reads them
// in place): memory stays the documented formula, not twice it.
func TestCompareKeepsNoSecondCopyOfTheSamples(t *testing.T) {
	set := Settings{Samples: 20000}
	sides := [2]*Side{NewSide(set), NewSide(set)}
	for si, s := range sides {
		for i := range 3 * set.Samples {
			tid := fmt.Sprint(i)
			d := float64(i%997) + float64(si)
			s.Add([]traceview.Span{sp(tid, "r", "", "omni.request", 0, 1000), sp(tid, "e", "r", "omni.diffusion.exec", 0, 100+d), sp(tid, "f", "r", "omni.diffusion.forward", 0, 50+d)})
		}
	}
	kept := 0
	for _, s := range sides {
		for t := range 2 {
			for _, r := range s.table(t) {
				if r != nil {
					kept += 8 * len(r.res.vals)
				}
			}
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep := Compare(sides[0], sides[1], Options{})
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := int64(after.HeapAlloc) - int64(before.HeapAlloc); got > int64(kept)/4 {
		t.Errorf("the report holds %d bytes more, for samples of %d bytes", got, kept)
	}
	for _, r := range rep.Rows {
		if !slices.IsSorted(r.Base.Values) || !slices.IsSorted(r.New.Values) {
			t.Errorf("%s: values not sorted", r.Key)
		}
	}
	runtime.KeepAlive(sides)
}
