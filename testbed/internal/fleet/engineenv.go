// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// KeptExemplars is what an engine behind the tier sets to keep its
// histograms' exemplars for the traces the tier keeps.
const KeptExemplars = "OTELOMNI_EXEMPLARS=kept"

// policyVar finds the variables a policy condition of the collector's file
// reads.
var policyVar = regexp.MustCompile(`\$\{env:(OMNI_[A-Z0-9_]+):-[^}]*\}`)

// EngineVars returns the variables of the shipped collector file's
// tail-sampling policies, in the file's order: those the engines read too,
// so that their exemplars follow the tier's thresholds.
func EngineVars() ([]string, error) {
	root, err := jaeger.RepoRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, CollectorConfig))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.Index(s, "\n    policies:\n")
	if i < 0 {
		return nil, fmt.Errorf("%s: no tail-sampling policies", CollectorConfig)
	}
	// The policies end where the processor's next key, or the next
	// processor, begins: a line indented less than a policy's.
	rest := s[i+len("\n    policies:\n"):]
	if j := regexp.MustCompile(`\n {0,4}[a-z_]+:`).FindStringIndex(rest); j != nil {
		rest = rest[:j[0]]
	}
	var vars []string
	seen := map[string]bool{}
	for _, m := range policyVar.FindAllStringSubmatch(rest, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			vars = append(vars, m[1])
		}
	}
	if len(vars) == 0 {
		return nil, fmt.Errorf("%s: its policies read no variable", CollectorConfig)
	}
	return vars, nil
}

// EngineEnv returns what an engine behind a tier started with settings
// sets: the kept exemplars, and each setting of a variable the tier's
// policies read, so that both sides read the same values.
func EngineEnv(settings map[string]string) (map[string]string, error) {
	vars, err := EngineVars()
	if err != nil {
		return nil, err
	}
	k, v, _ := strings.Cut(KeptExemplars, "=")
	env := map[string]string{k: v}
	for _, name := range vars {
		if s, ok := settings[name]; ok {
			env[name] = s
		}
	}
	return env, nil
}
