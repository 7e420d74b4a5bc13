// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/otelomni/otelomni/otelomni"
)

// batcher groups requests of one model that reach the denoising loop
// together into one forward pass, as a real engine's scheduler batches
// them: the first to arrive waits a short window for others. A group of two
// or more is an otelomni batch: one omni.batch span, linked to every
// member's exec and back.
type batcher struct {
	in     *otelomni.Instrumenter
	window time.Duration
	max    int

	mu      sync.Mutex
	forming map[string]*group
	seq     int
}

func newBatcher(in *otelomni.Instrumenter, window time.Duration, scale float64, max int) *batcher {
	if window == 0 {
		window = time.Duration(8 * scale * float64(time.Millisecond))
	}
	if window < 0 {
		max = 1
	}
	return &batcher{in: in, window: window, max: max, forming: map[string]*group{}}
}

type group struct {
	id      string
	model   string
	members []*otelomni.Request
	started chan struct{}
	running sync.WaitGroup
	batch   *otelomni.Batch
}

// join adds req to the forming batch of its model and waits until the
// batch starts; leave, once its forward pass is done, lets the batch end
// when its last member leaves.
func (b *batcher) join(req *otelomni.Request, model string) (leave func()) {
	if b.max <= 1 {
		return func() {}
	}
	b.mu.Lock()
	g := b.forming[model]
	if g == nil {
		b.seq++
		g = &group{id: fmt.Sprintf("step-%d", b.seq), model: model, started: make(chan struct{})}
		b.forming[model] = g
		time.AfterFunc(b.window, func() { b.start(g) })
	}
	g.members = append(g.members, req)
	g.running.Add(1)
	full := len(g.members) >= b.max
	b.mu.Unlock()
	if full {
		b.start(g)
	}
	<-g.started
	return g.running.Done
}

// start starts g's batch, once.
func (b *batcher) start(g *group) {
	b.mu.Lock()
	if b.forming[g.model] != g {
		b.mu.Unlock()
		return // already started
	}
	delete(b.forming, g.model)
	members := g.members
	b.mu.Unlock()
	if len(members) > 1 {
		g.batch = b.in.StartBatch(context.Background(), otelomni.BatchInfo{ID: g.id, Model: g.model}, members...)
		go func() {
			g.running.Wait()
			g.batch.End(nil)
		}()
	}
	close(g.started)
}
