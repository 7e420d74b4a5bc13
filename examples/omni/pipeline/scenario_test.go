// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import "testing"

func TestParseMixRejectsWhatIsNotScenarioEqualsWeight(t *testing.T) {
	for _, s := range []string{"", "normal", "normal=x", "normal=-1", "fast=1", "normal=0", "slow=1001"} {
		if _, err := ParseMix(s); err == nil {
			t.Errorf("ParseMix(%q): no error", s)
		}
	}
}

func TestMixGivesEveryScenarioToBothPipelines(t *testing.T) {
	m, err := ParseMix("normal=2,slow=1,saturated=1,failing=1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Special]map[string]int{}
	for i := range 2 * len(m) {
		pipe, sp := m.Plan(i)
		if sp != Slow && sp != Saturated && sp != Failing {
			sp = Normal
		}
		if seen[sp] == nil {
			seen[sp] = map[string]int{}
		}
		seen[sp][pipe]++
	}
	want := map[Special]int{Normal: 2, Slow: 1, Saturated: 1, Failing: 1}
	for sp, n := range want {
		if seen[sp]["speech"] != n || seen[sp]["image"] != n {
			t.Errorf("%s: %v per pipeline, want %d each", sp, seen[sp], n)
		}
	}
}

func TestFailingRequestExpectsNoWorkAtItsLastStage(t *testing.T) {
	cases := []struct {
		pipeline string
		gone     string
	}{
		{"speech", "omni.output"},
		{"image", "omni.diffusion.exec"},
	}
	for _, c := range cases {
		normal, failing := ExpectScenario(c.pipeline, Normal), ExpectScenario(c.pipeline, Failing)
		if normal[c.gone] == 0 || failing[c.gone] != 0 {
			t.Errorf("%s: %s normal %d, failing %d", c.pipeline, c.gone, normal[c.gone], failing[c.gone])
		}
		if failing["omni.stage"] != normal["omni.stage"] || failing["omni.transfer"] != normal["omni.transfer"] {
			t.Errorf("%s: a failing request still has every stage and hand-over: %v", c.pipeline, failing)
		}
	}
}
