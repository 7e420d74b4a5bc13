// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root: two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// heavyModules are the modules no user of the instrumentation may inherit:
// exporters, gRPC and its gateway, protobuf, pdata and the Collector's,
// Prometheus, contrib, and JSON libraries.
var heavyModules = []string{
	"go.opentelemetry.io/otel/exporters", "google.golang.org/grpc", "github.com/grpc-ecosystem",
	"google.golang.org/protobuf", "google.golang.org/genproto", "go.opentelemetry.io/collector",
	"go.opentelemetry.io/proto", "github.com/prometheus", "go.opentelemetry.io/contrib",
	"github.com/goccy/go-json", "github.com/json-iterator", "github.com/valyala/fastjson",
}

// TestAFreshModuleInheritsTheAPIAlone makes the module a user makes: it
// requires the instrumentation (by a local replace, as it would a release)
// and builds a program that uses otelomni, spans and attrs. Its module
// graph, which the versions of the user's own dependencies are chosen
// over, holds no exporter, gRPC, protobuf, pdata, Collector, Prometheus,
// contrib or JSON-library module; the SDK may stay in the graph as the
// instrumentation's own test dependency, but not in the user's go.mod.
func TestAFreshModuleInheritsTheAPIAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("resolves a module graph")
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/gateway\n\ngo 1.26.0\n\nrequire github.com/otelomni/otelomni v0.0.0\n\nreplace github.com/otelomni/otelomni => "+repoRoot(t)+"\n")
	write("main.go", `package main

import (
	"context"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

func main() {
	ctx, req := otelomni.New().Start(context.Background(), otelomni.RequestInfo{ID: "r", Modality: attrs.ModalityImage})
	exec := req.StartPhase(ctx, spans.Exec)
	req.StartPhase(exec.Context(), spans.Forward).End(nil)
	exec.End(nil)
	req.End(nil)
}
`)
	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("mod", "tidy")
	gocmd("build", "-o", filepath.Join(dir, "gateway"), ".")
	graph := strings.Fields(gocmd("list", "-m", "all"))
	if len(graph) < 3 {
		t.Fatalf("go list -m all gave %v: the check would be empty", graph)
	}
	for _, m := range graph {
		for _, h := range heavyModules {
			if strings.HasPrefix(m, h) {
				t.Errorf("a user of the instrumentation inherits %s", m)
			}
		}
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mod, []byte("go.opentelemetry.io/otel/sdk")) {
		t.Errorf("the user's go.mod requires the SDK:\n%s", mod)
	}
}

// modules are the workspace's modules, lowest layer first: none of their
// packages imports a package of a module after it.
var modules = []string{"", "otelsetup", "omnitrace", "examples", "testbed"}

// TestNoLayerImportsAHigherOne lists every package of every module with
// its imports (tests' too) and checks that the instrumentation imports
// nothing of the setup, the setup nothing of omnitrace, and none of them
// the examples or the test bed.
func TestNoLayerImportsAHigherOne(t *testing.T) {
	const repo = "github.com/otelomni/otelomni"
	layer := func(pkg string) int {
		rest := strings.TrimPrefix(pkg, repo)
		for i := len(modules) - 1; i > 0; i-- {
			if rest == "/"+modules[i] || strings.HasPrefix(rest, "/"+modules[i]+"/") {
				return i
			}
		}
		return 0
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, repo+"/...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := make([]int, len(modules))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], repo) {
			continue
		}
		from := layer(f[0])
		seen[from]++
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, repo+"/") && imp != repo {
				continue
			}
			if to := layer(imp); to > from {
				t.Errorf("%s (%s) imports %s (%s), a higher layer", f[0], name(from), imp, name(to))
			}
		}
	}
	for i, n := range seen {
		if n == 0 {
			t.Errorf("no package of the %s module listed: the check would be empty", name(i))
		}
	}
}

func name(layer int) string {
	if layer == 0 {
		return "instrumentation"
	}
	return modules[layer]
}

// TestTheInstrumentationReadsNoEnvironment: no non-test file of otelomni,
// spans or attrs reads an environment variable; settings belong to the
// setup module.
func TestTheInstrumentationReadsNoEnvironment(t *testing.T) {
	read := regexp.MustCompile(`\bos\.(Getenv|LookupEnv|Environ)\b|\bsyscall\.Getenv\b`)
	n := 0
	for _, dir := range []string{"otelomni", "spans", "attrs"} {
		files, err := filepath.Glob(filepath.Join(repoRoot(t), dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			n++
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if loc := read.FindIndex(b); loc != nil {
				t.Errorf("%s reads the environment: %s", f, b[loc[0]:loc[1]])
			}
		}
	}
	if n < 20 {
		t.Fatalf("read %d files: the check would be empty", n)
	}
}
