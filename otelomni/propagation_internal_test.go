package otelomni

import (
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// ptrProp is an empty propagator held by pointer, as the API's initial
// global one is.
type ptrProp struct{ propagation.TextMapPropagator }

// TestOnlyAPointerIsTakenForTheUnsetGlobal: a global propagator that a
// package set before this one was initialised is kept only when it is a
// pointer, so comparing it with the global later never panics; a
// composite (a slice) set that early is the program's choice.
func TestOnlyAPointerIsTakenForTheUnsetGlobal(t *testing.T) {
	composite := propagation.NewCompositeTextMapPropagator()
	if keptIfPointer(composite) != nil || keptIfPointer(nil) != nil {
		t.Error("a slice-typed or nil propagator was kept")
	}
	p := &ptrProp{composite}
	if keptIfPointer(p) != p {
		t.Error("a pointer was not kept")
	}
	saved, before := unsetGlobal, otel.GetTextMapPropagator()
	t.Cleanup(func() { unsetGlobal = saved; otel.SetTextMapPropagator(before) })
	otel.SetTextMapPropagator(composite) // chosen: carries nothing
	var in Instrumenter
	for _, kept := range []propagation.TextMapPropagator{p, nil} {
		unsetGlobal = kept
		// Comparing the global composite with what was kept never panics,
		// and the composite, chosen, is used as it is: nothing is sent.
		if got := in.propagator(); len(got.Fields()) != 0 {
			t.Errorf("kept %v: the chosen empty global was replaced by %v", kept, got.Fields())
		}
	}
}
