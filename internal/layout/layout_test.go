// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package layout checks the shape of the module: what each package links.
package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goList returns the packages pkgs depend on, themselves included.
func goList(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

func TestInstrumentationLinksTheOpenTelemetryAPIOnly(t *testing.T) {
	heavy := []string{
		"go.opentelemetry.io/otel/sdk", "google.golang.org/grpc", "github.com/prometheus",
		"go.opentelemetry.io/contrib/exporters", "go.opentelemetry.io/otel/exporters",
	}
	deps := goList(t, "github.com/otelomni/otelomni/otelomni")
	if len(deps) < 10 {
		t.Fatalf("go list gave %d packages: the check would be empty", len(deps))
	}
	for _, d := range deps {
		for _, h := range heavy {
			if strings.HasPrefix(d, h) {
				t.Errorf("otelomni links %s", d)
			}
		}
	}
}

// TestExamplesImportNoInternalPackage checks what the examples import
// themselves: a user who copies one can build it outside this module. The
// public packages they import may use internal ones.
func TestExamplesImportNoInternalPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "github.com/otelomni/otelomni/examples/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	found := false
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "github.com/otelomni/otelomni/examples") {
			continue
		}
		found = true
		for _, d := range f[1:] {
			if strings.HasPrefix(d, "github.com/otelomni/otelomni/internal/") {
				t.Errorf("%s imports %s: examples are programs users copy", f[0], d)
			}
		}
	}
	if !found {
		t.Fatal("go list found no example: the check would be empty")
	}
}

// TestProgramImportingOtelomniStaysNearTheAPI builds two programs, one that
// imports the OpenTelemetry API and one that imports otelomni, and compares
// their sizes: importing the instrumentation must not pull in the SDK, an
// exporter or gRPC.
func TestProgramImportingOtelomniStaysNearTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	dir := t.TempDir()
	build := func(name, body string) int64 {
		src := filepath.Join("testdata", name)
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(src) })
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", bin, "./"+src).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
		st, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	api := build("apionly", `package main

import (
	"context"

	"go.opentelemetry.io/otel"
)

func main() {
	_, span := otel.Tracer("x").Start(context.Background(), "op")
	span.End()
}
`)
	omni := build("withotelomni", `package main

import (
	"context"

	"github.com/otelomni/otelomni/otelomni"
)

func main() {
	_, req := otelomni.New().Start(context.Background(), otelomni.RequestInfo{ID: "r"})
	req.End(nil)
}
`)
	ratio := float64(omni) / float64(api)
	t.Logf("API only: %d bytes; with otelomni: %d bytes; %.2fx", api, omni, ratio)
	if ratio > 1.5 {
		t.Errorf("a program importing otelomni is %.2fx the size of one importing the API; the bound is 1.5x", ratio)
	}
}
