// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package jaegertest starts a real Jaeger for a test. The test is skipped
// when the binary has not been built, unless OTELOMNI_REQUIRE_JAEGER=1
// (which `make test` sets): then it fails, so that CI cannot pass by
// skipping.
package jaegertest

import (
	"context"
	"os"
	"testing"

	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// Start starts Jaeger for t and stops it when t ends.
func Start(t testing.TB) *jaeger.Jaeger {
	t.Helper()
	j, err := jaeger.Start(context.Background(), Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		j.Stop()
		if t.Failed() {
			t.Logf("Jaeger's log:\n%s", j.Logs())
		}
	})
	return j
}

// StartOn starts Jaeger on the given ports for t and stops it when t ends.
func StartOn(t testing.TB, p jaeger.Ports) *jaeger.Jaeger {
	t.Helper()
	bin := Binary(t)
	j, err := jaeger.StartOn(context.Background(), bin, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	return j
}

// Binary returns the Jaeger binary, skipping or failing t as Start does.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := jaeger.Binary()
	if err != nil {
		if os.Getenv("OTELOMNI_REQUIRE_JAEGER") == "1" {
			t.Fatalf("Jaeger is required: %v", err)
		}
		t.Skipf("no Jaeger binary (run `make jaeger-bin`): %v", err)
	}
	return bin
}
