// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// maxPending bounds the traces a collector holds while waiting for their
// root to end, so that a root that never ends cannot grow memory forever.
const maxPending = 10000

// collector gathers each trace's spans and hands them to onTrace when the
// trace's local root ends (in a request's process, the omni.request span).
type collector struct {
	onTrace func([]Span)

	mu      sync.Mutex
	pending map[trace.TraceID][]sdktrace.ReadOnlySpan
	order   []trace.TraceID
}

// onEnd keeps s, and delivers the trace when s is its local root.
func (c *collector) onEnd(s sdktrace.ReadOnlySpan) {
	tid := s.SpanContext().TraceID()
	root := !s.Parent().IsValid() || s.Parent().IsRemote()
	c.mu.Lock()
	if c.pending == nil {
		c.pending = map[trace.TraceID][]sdktrace.ReadOnlySpan{}
	}
	if _, ok := c.pending[tid]; !ok {
		c.order = append(c.order, tid)
		c.evictLocked()
	}
	c.pending[tid] = append(c.pending[tid], s)
	var done []sdktrace.ReadOnlySpan
	if root {
		done = c.pending[tid]
		delete(c.pending, tid)
	}
	c.mu.Unlock()
	if done != nil && c.onTrace != nil {
		c.onTrace(FromSDK(done))
	}
}

// evictLocked drops the oldest pending trace beyond maxPending, and forgets
// the order of traces already delivered.
func (c *collector) evictLocked() {
	for len(c.pending) >= maxPending && len(c.order) > 0 {
		delete(c.pending, c.order[0])
		c.order = c.order[1:]
	}
	if len(c.order) > 2*maxPending {
		kept := c.order[:0]
		for _, t := range c.order {
			if _, ok := c.pending[t]; ok {
				kept = append(kept, t)
			}
		}
		c.order = kept
	}
}
