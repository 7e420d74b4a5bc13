// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"sync"
	"sync/atomic"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// otherValue stands for a value beyond a cardinality cap, as the
// OpenTelemetry conventions write it.
const otherValue = "_OTHER"

// modelTable holds, for one model, stage type and modality, what every
// phase's span and measurement carry, built once:
//
//   - on spans, omni.phase and gen_ai.request.model, as a ready start
//     option. The model is repeated on the phases because span-metrics
//     generators (Tempo's, the collector's spanmetrics connector) see only
//     a span's own attributes, and phase durations by model is what
//     operators chart;
//   - on measurements, the attribute sets of each histogram, with the
//     request's omni.output.modality when it has one (one of the
//     modalities attrs defines, else "_OTHER"). No request id ever reaches
//     a metric: it would make one series per request. The model is
//     "_OTHER" beyond the cap on distinct models.
type modelTable struct {
	key      tableKey
	model    string
	hasModel bool
	phaseKV  [plan.NumPhases][2]attribute.KeyValue
	phaseOpt [plan.NumPhases][]trace.SpanStartOption
	rec      *recordSets
}

// recordSets are the metric attribute sets of one metric model, stage type
// and modality.
type recordSets struct {
	provider, model, stageType, modality string
	phase                                [plan.NumPhases][]metric.RecordOption
	// scope: gen_ai.request.model and omni.stage.type.
	scope []metric.RecordOption
	// request: the GenAI request attributes (operation, provider, model).
	request []metric.RecordOption

	mu                   sync.Mutex
	failedReq, failedStg map[string][]metric.RecordOption
	transfers            map[string][]metric.RecordOption
}

// maxVariants bounds the error types and connectors kept per set; beyond
// it, a value is recorded as "_OTHER".
const maxVariants = 32

func newRecordSets(provider string, k tableKey) *recordSets {
	s := &recordSets{provider: provider, model: k.model, stageType: k.stageType, modality: k.modality}
	base := s.base()
	for p := spans.Phase(1); int(p) < plan.NumPhases; p++ {
		s.phase[p] = recordSet(append(base, omniattr.Phase(p.String()))...)
	}
	s.scope = recordSet(base...)
	s.request = recordSet(s.requestBase()...)
	return s
}

// base is the model, stage type and modality, each when known.
func (s *recordSets) base() []attribute.KeyValue {
	var kv []attribute.KeyValue
	if s.model != "" {
		kv = append(kv, omniattr.RequestModel(s.model))
	}
	if s.stageType != "" {
		kv = append(kv, omniattr.StageType(s.stageType))
	}
	if s.modality != "" {
		kv = append(kv, omniattr.OutputModality(s.modality))
	}
	return kv
}

// requestBase is what the GenAI conventions put on a server request
// measurement.
func (s *recordSets) requestBase() []attribute.KeyValue {
	kv := []attribute.KeyValue{
		omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()),
		omniattr.ProviderName(s.provider),
	}
	if s.model != "" {
		kv = append(kv, omniattr.RequestModel(s.model))
	}
	if s.modality != "" {
		kv = append(kv, omniattr.OutputModality(s.modality))
	}
	return kv
}

// metricModality returns the omni.output.modality a request's measurements
// carry: a modality attrs defines as it is, "" for none, and "_OTHER" for
// any other value, which comes from a client and must not make a series
// per value.
func metricModality(m string) string {
	switch m {
	case "", attrs.ModalityImage, attrs.ModalityVideo, attrs.ModalityAudio, attrs.ModalityText, attrs.ModalityLatent:
		return m
	}
	return otherValue
}

// failedRequest returns the attributes of a failed request's measurement.
func (s *recordSets) failedRequest(errType string) []metric.RecordOption {
	return s.variant(&s.failedReq, errType, func(v string) []attribute.KeyValue {
		return append(s.requestBase(), omniattr.ErrorType(v))
	})
}

// failedStage returns the attributes of a failed stage's measurement.
func (s *recordSets) failedStage(errType string) []metric.RecordOption {
	return s.variant(&s.failedStg, errType, func(v string) []attribute.KeyValue {
		return append(s.base(), omniattr.ErrorType(v))
	})
}

// transfer returns the attributes of a transfer size: the model and the
// connector.
func (s *recordSets) transfer(connector string) []metric.RecordOption {
	if connector == "" {
		return s.scope
	}
	return s.variant(&s.transfers, connector, func(v string) []attribute.KeyValue {
		return append(s.base(), omniattr.TransferConnector(v))
	})
}

func (s *recordSets) variant(m *map[string][]metric.RecordOption, key string, build func(string) []attribute.KeyValue) []metric.RecordOption {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := (*m)[key]; ok {
		return o
	}
	if len(*m) >= maxVariants {
		key = otherValue
		if o, ok := (*m)[key]; ok {
			return o
		}
	}
	if *m == nil {
		*m = map[string][]metric.RecordOption{}
	}
	o := recordSet(build(key)...)
	(*m)[key] = o
	return o
}

func newModelTable(k tableKey, rec *recordSets) *modelTable {
	model := k.model
	t := &modelTable{key: k, model: model, hasModel: model != "", rec: rec}
	n := 1
	if t.hasModel {
		n = 2
	}
	for p := spans.Phase(1); int(p) < plan.NumPhases; p++ {
		t.phaseKV[p] = [2]attribute.KeyValue{omniattr.Phase(p.String()), omniattr.RequestModel(model)}
		t.phaseOpt[p] = []trace.SpanStartOption{trace.WithAttributes(t.phaseKV[p][:n]...)}
	}
	return t
}

// kv returns the span attributes of phase p (p must be valid).
func (t *modelTable) kv(p spans.Phase) []attribute.KeyValue {
	if t.hasModel {
		return t.phaseKV[p][:]
	}
	return t.phaseKV[p][:1]
}

// modelCache maps a model and stage type to their table. An engine usually
// serves one model, so the last table is kept where one atomic load finds
// it.
type modelCache struct {
	limit    int
	provider string
	last     atomic.Pointer[modelTable]

	mu     sync.Mutex
	tables map[tableKey]*modelTable
	models map[string]bool
	sets   map[tableKey]*recordSets
}

type tableKey struct{ model, stageType, modality string }

func (c *modelCache) init(limit int, provider string) {
	c.limit, c.provider = limit, provider
}

// get returns the table of model, stageType and modality, all already
// bounded (modality by metricModality). The
// first limit distinct models get a table of their own, kept; any other
// model gets a table built for the request, whose measurements record the
// model as "_OTHER": a client that sends many model names must grow neither
// the engine's memory nor the metrics backend's series.
func (c *modelCache) get(model, stageType, modality string) (*modelTable, bool) {
	k := tableKey{model, stageType, modality}
	if t := c.last.Load(); t != nil && t.key == k {
		return t, false
	}
	c.mu.Lock()
	if t, ok := c.tables[k]; ok {
		c.mu.Unlock()
		c.last.Store(t)
		return t, false
	}
	if c.tables == nil {
		c.tables, c.models, c.sets = map[tableKey]*modelTable{}, map[string]bool{}, map[tableKey]*recordSets{}
	}
	if !c.models[model] && len(c.models) >= c.limit {
		rec := c.setsLocked(tableKey{otherValue, stageType, modality})
		c.mu.Unlock()
		return newModelTable(k, rec), true
	}
	c.models[model] = true
	t := newModelTable(k, c.setsLocked(k))
	c.tables[k] = t
	c.mu.Unlock()
	c.last.Store(t)
	return t, false
}

func (c *modelCache) setsLocked(k tableKey) *recordSets {
	s, ok := c.sets[k]
	if !ok {
		s = newRecordSets(c.provider, k)
		c.sets[k] = s
	}
	return s
}
