// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"runtime"
	"slices"
	"sync"
	"testing"
)

// bases are the base sides of the 200 pairs, drawn once for the tests
// that compare them: base i from seed 2i+1.
var bases = sync.OnceValue(func() []*Side {
	out := make([]*Side, pairs)
	onCores(func(i int) { out[i] = newSynth(uint64(2*i+1), run{}).side(perSide) })
	return out
})

// onCores calls f for each pair, on every core.
func onCores(f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range pairs {
		next <- i
	}
	close(next)
	wg.Wait()
}

// recorrected is a copy of rep's tests corrected another way.
func recorrected(rep *Report, c Correction) *Report {
	out := &Report{Options: rep.Options, Rows: slices.Clone(rep.Rows), Critical: slices.Clone(rep.Critical)}
	out.Options.Correction = c
	var tests []*Test
	for i := range out.Rows {
		tests = append(tests, &out.Rows[i].Duration, &out.Rows[i].Measured)
	}
	for i := range out.Critical {
		tests = append(tests, &out.Critical[i].Share)
	}
	out.Tests = correct(tests, out.Options)
	return out
}

// eachPair compares the 200 pairs, a base side drawn alike from seed 2i+1
// and a new side drawn by newRun from seed 2i+2, and hands each report to
// check in pair order: Holm's, and Benjamini and Hochberg's.
func eachPair(newRun run, check func(i int, holm, bh *Report)) {
	reps := make([][2]*Report, pairs)
	base := bases()
	onCores(func(i int) {
		rep := Compare(base[i], newSynth(uint64(2*i+2), newRun).side(perSide), Options{})
		reps[i] = [2]*Report{rep, recorrected(rep, BH)}
	})
	for i, rep := range reps {
		check(i, rep[0], rep[1])
	}
}

const (
	pairs = 200
	// perSide is the requests of each modality on each side. With 200
	// requests of all three together, a phase of one modality would have
	// about 57 values a side (67 requests, 85 % measured), and a U test at
	// even an uncorrected 5 % finds a 20 % shift of spread 0.3 in about
	// 89 % of pairs: no test could meet the 95 %. 200 of each modality
	// (170 values) give it about 97 % after Holm's correction over a
	// hundred tests.
	perSide     = 200
	maxFlagged  = 15 // the 5 % family-wise rate of 200 pairs, and its noise
	minDetected = 190
)

// flagged returns the rows of a report that are significant, by name.
func flagged(rep *Report) []string {
	var out []string
	for _, r := range rep.Rows {
		if r.Duration.Significant {
			out = append(out, "duration "+r.Key.String())
		}
		if r.Measured.Significant {
			out = append(out, "measured "+r.Key.String())
		}
	}
	for _, r := range rep.Critical {
		if r.Share.Significant {
			out = append(out, "critical "+r.Key.String())
		}
	}
	return out
}

// TestNoFalseAlarms: 200 pairs of runs drawn from the same distributions
// (three modalities, lognormal phases of log-space spread 0.3, phases
// absent at fixed rates, 200 requests of each modality a side): at most 15 pairs show any
// significant row.
func TestNoFalseAlarms(t *testing.T) {
	alarms, alarmsBH := 0, 0
	tests := 0
	eachPair(run{}, func(i int, rep, bh *Report) {
		tests = rep.Tests
		if f := flagged(rep); len(f) > 0 {
			alarms++
			t.Logf("pair %d: %v", i, f)
		}
		if len(flagged(bh)) > 0 {
			alarmsBH++
		}
	})
	t.Logf("%d of %d pairs with a significant row (%d tests each, Holm); %d with Benjamini–Hochberg", alarms, pairs, tests, alarmsBH)
	if alarms > maxFlagged {
		t.Errorf("%d of %d pairs drawn alike show a significant row, want at most %d", alarms, pairs, maxFlagged)
	}
	// Where nothing changed, a false discovery rate is the family-wise
	// error: Benjamini–Hochberg's holds the same bound.
	if alarmsBH > maxFlagged {
		t.Errorf("Benjamini–Hochberg: %d of %d pairs drawn alike show a significant row, want at most %d", alarmsBH, pairs, maxFlagged)
	}
	if tests < 50 {
		t.Errorf("only %d tests a pair: the synthetic runs do not make the rows they should", tests)
	}
}

// TestPowerToSeeAChangedPhase: the same pairs with image's forward 20 %
// slower and audio's thinker queue measured in 60 % of requests instead of
// 90 % on the new side. Image's forward row is significant in at least
// 95 % of the pairs, the thinker queue's share measured too; the rows
// those changes leave as they were (the other phases' durations and
// shares, every row of video, and every duration row of audio) show
// significant in no more pairs than the false-alarm bound. Image's
// request, exec and critical-path rows, and audio's queue-wait and
// critical-path rows, do change, and are not counted.
func TestPowerToSeeAChangedPhase(t *testing.T) {
	changed := run{
		scale:    map[string]float64{"image forward": 1.2},
		presence: map[string]float64{"audio thinker llm.queue": 0.6},
	}
	forward := Key{Modality: "image", Stage: "diffusion", Phase: "forward"}
	queue := Key{Modality: "audio", Stage: "llm 0 thinker", Phase: "llm.queue"}
	follows := func(k Key, critical bool) bool {
		switch {
		case k.Modality == "image":
			return critical || k.Phase == "request" || k.Phase == "exec" || k == forward
		case k.Modality == "audio":
			return critical || k == queue || k.Phase == "request" || k.Phase == "unattributed" ||
				k.Stage == "llm 0 thinker" && k.Phase == "stage"
		}
		return false
	}
	seenForward, seenQueue, others := 0, 0, 0
	eachPair(changed, func(i int, rep, _ *Report) {
		var other []string
		for _, r := range rep.Rows {
			switch {
			case r.Key == forward && r.Duration.Significant && r.Change() > 0:
				seenForward++
			case r.Key == queue && r.Measured.Significant && r.New.Share() < r.Base.Share():
				seenQueue++
			}
			if !follows(r.Key, false) && r.Significant() {
				other = append(other, r.Key.String())
			}
		}
		for _, r := range rep.Critical {
			if !follows(r.Key, true) && r.Share.Significant {
				other = append(other, "critical "+r.Key.String())
			}
		}
		if len(other) > 0 {
			others++
			t.Logf("pair %d: unchanged rows flagged: %v", i, other)
		}
	})
	t.Logf("forward +20%%: %d/%d; thinker queue 90%%->60%% measured: %d/%d; unchanged rows flagged in %d pairs", seenForward, pairs, seenQueue, pairs, others)
	if seenForward < minDetected {
		t.Errorf("image forward +20%% found significant in %d of %d pairs, want at least %d", seenForward, pairs, minDetected)
	}
	if seenQueue < minDetected {
		t.Errorf("the thinker's queue measured in 60%% of requests instead of 90%% found in %d of %d pairs, want at least %d", seenQueue, pairs, minDetected)
	}
	if others > maxFlagged {
		t.Errorf("rows that did not change flagged in %d of %d pairs, want at most %d", others, pairs, maxFlagged)
	}
}
