// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// gate is a span processor that holds the start of the first span named
// name (in OnStart, between otelomni's reading of its start and its
// registration as started) until release is closed, and closes entered
// when it got there. It orders an interleaving deterministically: no
// sleep, no timing.
type gate struct {
	name    string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(name string) *gate {
	return &gate{name: name, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() != g.name {
		return
	}
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return
	}
	close(g.entered)
	<-g.release
}
func (*gate) OnEnd(sdktrace.ReadOnlySpan)      {}
func (*gate) Shutdown(context.Context) error   { return nil }
func (*gate) ForceFlush(context.Context) error { return nil }

// within runs fn and fails the test if it has not returned by the
// deadline: a guard against a deadlock, not a timing assertion.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: deadlocked (not done after a minute)", what)
	}
}

// logLines captures what otelomni says through the OpenTelemetry error
// handler for the rest of the test.
func logLines(t *testing.T) func() []string {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		lines = append(lines, err.Error())
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}
