// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e holds the end-to-end tests: the example programs run as real
// processes, export over OTLP into a real Jaeger on loopback, and the
// traces are read back through Jaeger's HTTP API.
//
// The code blocks of README.md and docs/ are tests too (docs_test.go): a
// new block needs an entry in docsInventory (docs_inventory_test.go) that
// runs, compiles or checks it, or names the tests that cover it.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/otelomni/otelomni/internal/plan"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// bin holds the example binaries, built once for all tests.
var bin = map[string]string{}

// workDir is a temporary directory for the whole run, removed at its end.
var workDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "otelomni-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := func() int {
		defer os.RemoveAll(dir)
		root, err := jaeger.RepoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for name, pkg := range map[string]string{"diffusion": "./examples/diffusion", "omni": "./examples/omni", "omnitrace": "./omnitrace"} {
			out := filepath.Join(dir, name)
			cmd := exec.Command("go", "build", "-o", out, pkg)
			cmd.Dir = root
			if b, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "building %s: %v\n%s", name, err, b)
				return 1
			}
			bin[name] = out
		}
		return m.Run()
	}()
	os.Exit(code)
}

// cleanEnv is the environment without any OTEL_* variable, so that a
// developer's own settings cannot change what a test sends where, and with
// metrics off (Jaeger takes traces only) unless extra says otherwise: for
// os/exec, a later duplicate wins.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) < 5 || kv[:5] != "OTEL_" {
			env = append(env, kv)
		}
	}
	env = append(env, "OTEL_METRICS_EXPORTER=none")
	return append(env, extra...)
}

// checkTree checks every span of one request's trace against a tree (span
// name -> its parent's name): a known name, the right parent, no negative
// duration, and omni.phase on phase spans. It returns the spans per name.
func checkTree(t *testing.T, id string, tr []traceview.Span, parents map[string]string) map[string]int {
	t.Helper()
	byID := map[string]*traceview.Span{}
	for i := range tr {
		byID[tr[i].SpanID] = &tr[i]
	}
	counts := map[string]int{}
	for i := range tr {
		s := &tr[i]
		counts[s.Name]++
		if s.End.Before(s.Start) {
			t.Errorf("%s: %s has a negative duration %v", id, s.Name, s.Duration())
		}
		want, known := parents[s.Name]
		if !known {
			t.Errorf("%s: unexpected span %s", id, s.Name)
			continue
		}
		parent := ""
		if p := byID[s.ParentID]; p != nil {
			parent = p.Name
		}
		if parent != want {
			t.Errorf("%s: %s hangs under %q, want %q", id, s.Name, parent, want)
		}
		if p, ok := plan.LookupSpanName(s.Name); ok && s.Str(string(attrs.PhaseKey)) != p.String() {
			t.Errorf("%s: %s has omni.phase %q", id, s.Name, s.Str(string(attrs.PhaseKey)))
		}
	}
	return counts
}
