// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"slices"
	"testing"
)

// TestEngineVarsAreThePolicies: the variables the engines are given are
// exactly those of the collector file's policies.
func TestEngineVarsAreThePolicies(t *testing.T) {
	vars, err := EngineVars()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"OMNI_SLOW_IMAGE_MS", "OMNI_SLOW_VIDEO_MS", "OMNI_SLOW_AUDIO_MS", "OMNI_SLOW_OTHER_MS",
		"OMNI_QUEUE_BUDGET_MS", "OMNI_SAMPLE_PERCENT", "OMNI_SAMPLE_SALT"}
	if !slices.Equal(vars, want) {
		t.Errorf("the policies read %q, want %q", vars, want)
	}
	env, err := EngineEnv(DemoSettings())
	if err != nil {
		t.Fatal(err)
	}
	if env["OTELOMNI_EXEMPLARS"] != "kept" || env["OMNI_SLOW_IMAGE_MS"] != "2500" || env["OMNI_DECISION_WAIT"] != "" {
		t.Errorf("engine env %v", env)
	}
}
