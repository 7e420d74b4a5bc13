package otelomni

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// phaseAttrs holds, for one model and stage type, what every phase's span
// and measurement carry, built once:
//
//   - on spans, omni.phase and gen_ai.request.model. The model is repeated
//     on the phases because span-metrics generators (Tempo's, the
//     collector's spanmetrics connector) see only a span's own attributes,
//     and phase durations by model is what operators chart;
//   - on measurements, the attribute sets of the phase histogram (omni.phase,
//     omni.stage.type, gen_ai.request.model) and of the request and stage
//     histograms. No request id ever reaches a metric: it would make one
//     series per request.
type phaseAttrs struct {
	model, stageType string
	n                int
	kv               [spans.NumPhases][2]attribute.KeyValue
	phaseRec         [spans.NumPhases][]metric.RecordOption
	scopeRec         []metric.RecordOption

	mu        sync.Mutex
	failed    map[string][]metric.RecordOption
	transfers map[string][]metric.RecordOption
}

func newPhaseAttrs(model, stageType string) *phaseAttrs {
	t := &phaseAttrs{model: model, stageType: stageType, n: 1}
	if model != "" {
		t.n = 2
	}
	base := t.base()
	for p := spans.Phase(1); int(p) < spans.NumPhases; p++ {
		t.kv[p][0] = attrs.Phase(p.ID())
		t.kv[p][1] = attrs.RequestModel(model)
		t.phaseRec[p] = recordSet(append(base, attrs.Phase(p.ID()))...)
	}
	t.scopeRec = recordSet(base...)
	return t
}

// base is the model and stage type, each when known.
func (t *phaseAttrs) base() []attribute.KeyValue {
	var kv []attribute.KeyValue
	if t.model != "" {
		kv = append(kv, attrs.RequestModel(t.model))
	}
	if t.stageType != "" {
		kv = append(kv, attrs.StageType(t.stageType))
	}
	return kv
}

// of returns the span attributes of phase p (p must be valid).
func (t *phaseAttrs) of(p spans.Phase) []attribute.KeyValue { return t.kv[p][:t.n] }

// maxVariants bounds the error types and connectors cached per table; the
// rest get a set built per measurement.
const maxVariants = 32

// failedRec returns the attributes of a failed request or stage's
// measurement: the base and error.type.
func (t *phaseAttrs) failedRec(errType string) []metric.RecordOption {
	return t.variant(&t.failed, errType, attrs.ErrorType(errType))
}

// transferRec returns the attributes of a transfer size: the model and the
// connector.
func (t *phaseAttrs) transferRec(connector string) []metric.RecordOption {
	if connector == "" {
		return t.scopeRec
	}
	return t.variant(&t.transfers, connector, attrs.TransferConnector(connector))
}

func (t *phaseAttrs) variant(m *map[string][]metric.RecordOption, key string, extra attribute.KeyValue) []metric.RecordOption {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := (*m)[key]; ok {
		return o
	}
	o := recordSet(append(t.base(), extra)...)
	if len(*m) < maxVariants {
		if *m == nil {
			*m = map[string][]metric.RecordOption{}
		}
		(*m)[key] = o
	}
	return o
}

type tableKey struct{ model, stageType string }

// maxCachedModels bounds the cache: the model name may come from the client,
// and a client that sends many names must not grow the engine's memory.
// Beyond it a table is built per request.
const maxCachedModels = 64

// modelCache maps a model and stage type to their phaseAttrs. An engine
// usually serves one model, so the last one is kept where it costs one
// atomic load to find.
type modelCache struct {
	last atomic.Pointer[phaseAttrs]
	mu   sync.Mutex
	m    map[tableKey]*phaseAttrs
}

func (c *modelCache) get(model, stageType string) *phaseAttrs {
	if t := c.last.Load(); t != nil && t.model == model && t.stageType == stageType {
		return t
	}
	k := tableKey{model, stageType}
	c.mu.Lock()
	t, ok := c.m[k]
	if !ok {
		t = newPhaseAttrs(model, stageType)
		if len(c.m) >= maxCachedModels {
			c.mu.Unlock()
			return t
		}
		if c.m == nil {
			c.m = make(map[tableKey]*phaseAttrs)
		}
		c.m[k] = t
	}
	c.mu.Unlock()
	c.last.Store(t)
	return t
}
