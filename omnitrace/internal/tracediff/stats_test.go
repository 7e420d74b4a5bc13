// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/perf/benchmath"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// statsSides are two sides whose phases are built for the statistics:
// exec lognormal, 20 % slower on the new side; forward the same on both;
// vae_decode measured in 90 % of base requests and 60 % of new ones;
// postprocess every value equal; queue_wait in one request a side, and
// preprocess in two.
func statsSides(n int) (base, new *Side) {
	base, new = NewSide(Settings{}), NewSide(Settings{})
	for si, s := range []*Side{base, new} {
		rng := rand.New(rand.NewPCG(uint64(si)+7, 11))
		logn := func(median float64) float64 { return median * math.Exp(0.3*rng.NormFloat64()) }
		for i := range n {
			tid := fmt.Sprint(i)
			ss := []traceview.Span{
				sp(tid, "r", "", "omni.request", 0, 5000),
				sp(tid, "e", "r", "omni.diffusion.exec", 0, logn(1000*(1+0.2*float64(si)))),
				sp(tid, "f", "r", "omni.diffusion.forward", 0, logn(800)),
				sp(tid, "p", "r", "omni.diffusion.postprocess", 0, 40),
			}
			if i%10 < []int{9, 6}[si] {
				ss = append(ss, sp(tid, "v", "r", "omni.diffusion.vae_decode", 0, logn(100)))
			}
			if i == 0 {
				ss = append(ss, sp(tid, "q", "r", "omni.diffusion.queue_wait", 0, 5+float64(si)))
			}
			if i < 2 {
				ss = append(ss, sp(tid, "pre", "r", "omni.diffusion.preprocess", 0, 5+float64(i)+10*float64(si)))
			}
			s.Add(ss)
		}
	}
	return base, new
}

// TestStatisticsAgainstBenchmath: each row's p-value is benchmath's U
// test of its values, computed here independently, and the adjusted ones
// are Holm's over every test of the report (both tables); every p lies
// in [0, 1], every interval is ordered, "~" is shown exactly when a row
// is not significant, and the share measured 90 % against 60 % is
// flagged.
func TestStatisticsAgainstBenchmath(t *testing.T) {
	base, new := statsSides(200)
	rep := Compare(base, new, Options{})
	var ps []float64
	byPhase := map[string]*Row{}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		byPhase[r.Phase] = r
		for _, x := range []Test{r.Duration, r.Measured} {
			if x.Done {
				ps = append(ps, x.P)
			}
		}
		for _, st := range []Stats{r.Base, r.New} {
			if st.Samples == 0 {
				continue
			}
			if !(st.P50Lo <= st.P50 && st.P50 <= st.P50Hi && st.P99Lo <= st.P99 && st.P99 <= st.P99Hi) {
				t.Errorf("%s: intervals out of order: %v [%v, %v], %v [%v, %v]", r.Key, st.P50, st.P50Lo, st.P50Hi, st.P99, st.P99Lo, st.P99Hi)
			}
		}
		if r.Duration.Done {
			th := &benchmath.Thresholds{CompareAlpha: 0.05}
			want := benchmath.AssumeNothing.Compare(&benchmath.Sample{Values: r.Base.Values, Thresholds: th}, &benchmath.Sample{Values: r.New.Values, Thresholds: th}).P
			want = min(max(want, 2/binomial(len(r.Base.Values)+len(r.New.Values), len(r.Base.Values))), 1)
			if math.Abs(r.Duration.P-want) > 1e-12 {
				t.Errorf("%s: p %v, benchmath's %v", r.Key, r.Duration.P, want)
			}
		}
		if got := r.durationChange(); r.Duration.Done && strings.HasPrefix(got, "~") == r.Duration.Significant {
			t.Errorf("%s: %q with significant %v", r.Key, got, r.Duration.Significant)
		}
	}
	for i := range rep.Critical {
		c := &rep.Critical[i]
		if c.Share.Done {
			ps = append(ps, c.Share.P)
		}
		if got := c.change(); c.Share.Done && strings.HasPrefix(got, "~") == c.Share.Significant {
			t.Errorf("critical %s: %q with significant %v", c.Key, got, c.Share.Significant)
		}
	}
	if rep.Tests != len(ps) {
		t.Errorf("corrected over %d tests, the report made %d", rep.Tests, len(ps))
	}
	// Holm's, by hand.
	sorted := slices.Clone(ps)
	slices.Sort(sorted)
	holm := map[float64]float64{}
	run := 0.0
	for i, p := range sorted {
		run = math.Max(run, math.Min(1, float64(len(sorted)-i)*p))
		if _, ok := holm[p]; !ok {
			holm[p] = run
		}
	}
	check := func(what string, x Test) {
		if !x.Done {
			return
		}
		if x.P < 0 || x.P > 1 || x.Adjusted < x.P || x.Adjusted > 1 {
			t.Errorf("%s: p %v, adjusted %v", what, x.P, x.Adjusted)
		}
		if math.Abs(x.Adjusted-holm[x.P]) > 1e-12 {
			t.Errorf("%s: adjusted %v, Holm's %v", what, x.Adjusted, holm[x.P])
		}
		if x.Significant != (x.Adjusted < 0.05) {
			t.Errorf("%s: significant %v at adjusted %v", what, x.Significant, x.Adjusted)
		}
	}
	for _, r := range rep.Rows {
		check(r.Key.String()+" duration", r.Duration)
		check(r.Key.String()+" measured", r.Measured)
	}
	for _, c := range rep.Critical {
		check("critical "+c.Key.String(), c.Share)
	}

	for phase, want := range map[string]bool{"exec": true, "forward": false, "postprocess": false, "queue_wait": false, "preprocess": false} {
		r := byPhase[phase]
		if r == nil {
			t.Fatalf("no row %s", phase)
		}
		if r.Duration.Significant != want {
			t.Errorf("%s: significant %v, want %v (p %v, adjusted %v)", phase, r.Duration.Significant, want, r.Duration.P, r.Duration.Adjusted)
		}
	}
	if r := byPhase["postprocess"]; r.Duration.P != 1 || r.Base.P50Lo != 40 || r.Base.P50Hi != 40 {
		t.Errorf("all equal: p %v, interval [%v, %v]", r.Duration.P, r.Base.P50Lo, r.Base.P50Hi)
	}
	if r := byPhase["queue_wait"]; r.Base.Samples != 1 || r.Duration.P != 1 || !math.IsInf(r.Base.P50Hi, 1) {
		t.Errorf("1 value a side: %d values, p %v, interval to %v", r.Base.Samples, r.Duration.P, r.Base.P50Hi)
	}
	if r := byPhase["preprocess"]; r.Base.Samples != 2 || r.Duration.P < 1.0/3 {
		t.Errorf("2 values a side, apart: %d values, p %v, want at least 2/C(4,2)", r.Base.Samples, r.Duration.P)
	}
	if r := byPhase["vae_decode"]; !r.Measured.Significant || r.Base.Measured != 180 || r.New.Measured != 120 || !strings.Contains(r.measuredChange(), "90% -> 60%") {
		t.Errorf("measured 90%% against 60%%: %+v, %q", r.Measured, r.measuredChange())
	}
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}
