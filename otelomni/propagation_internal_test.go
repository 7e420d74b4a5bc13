package otelomni

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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

// TestAnOutputIndexNeverOverflows: past the last output index (2^31-1)
// MarkOutput makes no span, returns an error matching ErrInvalidPhase and
// counts the misuse.
func TestAnOutputIndexNeverOverflows(t *testing.T) {
	in := New(WithTracerProvider(sdktrace.NewTracerProvider()))
	_, req := in.Start(context.Background(), RequestInfo{ID: "o"})
	req.mu.Lock()
	req.outputs = maxIndex
	req.mu.Unlock()
	if err := req.MarkOutput(false, time.Now()); err != nil {
		t.Fatalf("the last index: %v", err)
	}
	before := in.Stats().Misuse
	if err := req.MarkOutput(true, time.Now()); !errors.Is(err, ErrInvalidPhase) {
		t.Errorf("the output past 2^31-1: %v, want an error matching ErrInvalidPhase", err)
	}
	if in.Stats().Misuse != before+1 {
		t.Error("an output past the last index must be counted")
	}
	req.End(nil)
}
