package otelomni

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// phaseAttrs holds, for one model, the attributes that every phase span
// carries: omni.phase and gen_ai.request.model. The model is repeated on the
// phases because span-metrics generators (Tempo's, the collector's
// spanmetrics connector) see only a span's own attributes, and phase
// durations by model is what operators chart. Building the table once per
// model saves the per-span work of building attributes.
type phaseAttrs struct {
	model string
	n     int
	kv    [spans.NumPhases][2]attribute.KeyValue
}

func newPhaseAttrs(model string) *phaseAttrs {
	t := &phaseAttrs{model: model, n: 1}
	if model != "" {
		t.n = 2
	}
	for p := spans.Phase(1); int(p) < spans.NumPhases; p++ {
		t.kv[p][0] = attrs.Phase(p.ID())
		t.kv[p][1] = attrs.RequestModel(model)
	}
	return t
}

// of returns the attributes of phase p (p must be valid).
func (t *phaseAttrs) of(p spans.Phase) []attribute.KeyValue { return t.kv[p][:t.n] }

var noModelAttrs = newPhaseAttrs("")

// maxCachedModels bounds the cache: the model name may come from the client,
// and a client that sends many names must not grow the engine's memory.
// Beyond it a table is built per request (one allocation).
const maxCachedModels = 64

// modelCache maps a model to its phaseAttrs. An engine usually serves one
// model, so the last one is kept where it costs one atomic load to find.
type modelCache struct {
	last atomic.Pointer[phaseAttrs]
	mu   sync.Mutex
	m    map[string]*phaseAttrs
}

func (c *modelCache) get(model string) *phaseAttrs {
	if model == "" {
		return noModelAttrs
	}
	if t := c.last.Load(); t != nil && t.model == model {
		return t
	}
	c.mu.Lock()
	t, ok := c.m[model]
	if !ok {
		t = newPhaseAttrs(model)
		if len(c.m) >= maxCachedModels {
			c.mu.Unlock()
			return t
		}
		if c.m == nil {
			c.m = make(map[string]*phaseAttrs)
		}
		c.m[model] = t
	}
	c.mu.Unlock()
	c.last.Store(t)
	return t
}
