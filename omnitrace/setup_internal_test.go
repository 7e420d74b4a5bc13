// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelsetup"
)

// TestImportCutsValuesAsOtelsetupDoes: with no limit set, an imported
// span's string values are cut where an engine's are, by otelsetup.
func TestImportCutsValuesAsOtelsetupDoes(t *testing.T) {
	clearEnv(t)
	exp := tracetest.NewInMemoryExporter()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s",
		trace.WithAttributes(attribute.String("v", strings.Repeat("x", 3*valueLengthLimit))))
	s.End()
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := len(exp.GetSpans()[0].Attributes[0].Value.AsString())
	_ = tel.Shutdown(context.Background())
	if got != valueLengthLimit || spanLimits().ValueLength != valueLengthLimit {
		t.Errorf("an engine's value is cut to %d bytes, an import's to %d: want both %d", got, spanLimits().ValueLength, valueLengthLimit)
	}
}
