// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

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
