// Package e2e holds the end-to-end tests: the example programs run as real
// processes, export over OTLP into a real Jaeger on loopback, and the
// traces are read back through Jaeger's HTTP API.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/otelomni/otelomni/internal/jaeger"
)

// bin holds the example binaries, built once for all tests.
var bin = map[string]string{}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "otelomni-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		root, err := jaeger.RepoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for name, pkg := range map[string]string{"diffusion": "./examples/diffusion", "omni": "./examples/omni", "omnitrace": "./cmd/omnitrace"} {
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
