// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestProductionCodeImportsNoTestPackage: otelsetup's own code imports no
// package made for tests (tracetest, ...), and nothing that carries
// settings to Setup beside its options.
func TestProductionCodeImportsNoTestPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	imports := strings.Fields(string(out))
	if len(imports) < 10 {
		t.Fatalf("go list gave %d imports: the check would be empty", len(imports))
	}
	for _, p := range imports {
		if strings.HasSuffix(p, "test") || strings.Contains(p, "/setupopt") {
			t.Errorf("otelsetup imports %s", p)
		}
	}
}

// TestSnapshotDefinesEveryMethodOfReadOnlySpan: a held span answers every
// method of sdktrace.ReadOnlySpan from its own fields; none reaches the
// nil interface it embeds, which would panic in an exporter.
func TestSnapshotDefinesEveryMethodOfReadOnlySpan(t *testing.T) {
	long := attribute.String("v", strings.Repeat("x", 100))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, s := tp.Tracer("t").Start(context.Background(), "s", trace.WithAttributes(long),
		trace.WithLinks(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})}))
	s.AddEvent("e")
	s.End()
	stubs := exp.GetSpans()
	orig := stubs.Snapshots()[0]
	held := detached(orig, 10, &exportCounts{})
	snap, ok := held.(heldSpan).ReadOnlySpan.(*snapshot)
	if !ok {
		t.Fatalf("a span holding a long value is held as a %T", held.(heldSpan).ReadOnlySpan)
	}
	it := reflect.TypeFor[sdktrace.ReadOnlySpan]()
	v := reflect.ValueOf(snap)
	for i := range it.NumMethod() {
		m := it.Method(i)
		if !m.IsExported() {
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s reaches the embedded interface: %v", m.Name, r)
				}
			}()
			v.MethodByName(m.Name).Call(nil)
		}()
	}
	if snap.Name() != "s" || len(snap.Attributes()) != 1 || len(snap.Attributes()[0].Value.AsString()) != 10 ||
		len(snap.Events()) != 1 || len(snap.Links()) != 1 || !snap.SpanContext().Equal(orig.SpanContext()) ||
		snap.Resource() != orig.Resource() || !snap.EndTime().Equal(orig.EndTime()) {
		t.Errorf("the snapshot differs from its span beyond the value cut: %+v", snap)
	}
}
