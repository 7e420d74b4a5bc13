// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package emit

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/otlpvalue"
	"github.com/otelomni/otelomni/spans"

	tree "github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// An import makes the spans of each request as OpenTelemetry Collector
// data (pdata's ptrace), straight from the placed phases: the spans that
// otelomni's record path (Instrumenter.Start, StartStage, RecordPhase,
// RecordTransfer, EndAt) makes through the OpenTelemetry SDK for the same
// request, with the same names, parents, kinds, times, attributes, limits
// and ids, without the SDK's cost per span. TestTheImportMakesTheRecordPathsSpans
// holds the two equal, span for span, on every form's fixtures and on
// fuzzed requests.

// Limits are the SDK's span limits that apply to an import's spans.
type Limits struct {
	// Attributes bounds the attributes of a span
	// (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT): a new key beyond it is dropped
	// and counted in the span's dropped attributes count; a key already
	// there is updated. Negative: no bound.
	Attributes int
	// ValueLength bounds each string value, in characters
	// (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT). Negative: no bound.
	ValueLength int
}

// Bounds of the strings of a span, as otelomni applies them to what it
// records (its default value limit, and its key limit).
const (
	maxValueBytes = 1024
	maxAttrKey    = 256
)

// Emitter makes the spans of requests. It is not safe for concurrent use:
// each worker has its own.
type Emitter struct {
	limits Limits
	sample func(trace.TraceID) bool
	ids    idState
	// The request being emitted: its spans, and what it needs of them.
	dst   ptrace.SpanSlice
	kv    []attribute.KeyValue
	model string
	// size estimates what the spans of the last request take (see Size).
	size int
}

// Size estimates the memory the spans made by the last Emit take: their
// names and attributes, and what each costs beside them.
func (e *Emitter) Size() int { return e.size }

// What a span, and an attribute beside its key and value, take of memory
// as pdata holds them (its structs and pointers), about.
const (
	spanSize = 256
	attrSize = 64
)

// sizeOf estimates what attribute a takes of memory.
func sizeOf(a attribute.KeyValue) int {
	n := attrSize + len(a.Key)
	switch a.Value.Type() {
	case attribute.STRING:
		n += len(a.Value.AsString())
	case attribute.STRINGSLICE:
		for _, s := range a.Value.AsStringSlice() {
			n += attrSize/4 + len(s)
		}
	case attribute.BOOLSLICE:
		n += attrSize / 4 * len(a.Value.AsBoolSlice())
	case attribute.INT64SLICE:
		n += attrSize / 4 * len(a.Value.AsInt64Slice())
	case attribute.FLOAT64SLICE:
		n += attrSize / 4 * len(a.Value.AsFloat64Slice())
	}
	return n
}

// NewEmitter returns an emitter of spans within limits. sample decides
// whether a trace is recorded (the environment's sampler); nil records
// every trace.
func NewEmitter(limits Limits, sample func(trace.TraceID) bool) *Emitter {
	return &Emitter{limits: limits, sample: sample}
}

// Emit appends the spans of r's trace to dst: a single-stage trace (no
// omni.stage span; the request span carries the stage's attributes and
// unknown keys) for a request with one stage and no hand-over, a
// multi-stage trace otherwise. Times the input lacks are placed (see
// placeTimes) from anchor. The trace and span ids are derived from the
// request and the times it is placed at (see traceKey and idState): the
// same request placed the same way makes the same ids, one placed
// otherwise makes others, and each span's id says what the span is. A
// request with a time outside what OTLP carries makes no span at all, and
// nor does a request the sampler drops, or any request when dst is nil
// (tracing is off): it is only placed.
//
// A phase that cannot hang where the record path would hang it (one that
// starts before its stage) makes no span, and the error says so; the
// request's other spans are made.
func (e *Emitter) Emit(r *forms.Request, anchor time.Time, dst *ptrace.SpanSlice) error {
	e.size = 0
	placed, end, err := plan(r, anchor)
	if err != nil || dst == nil {
		return err
	}
	key := traceKey(r, placed, end)
	if e.sample != nil && !e.sample(trace.TraceID(key)) {
		return nil
	}
	e.ids.reset(key)
	e.dst = *dst
	e.model = str(r.Model)
	id := str(r.ID)

	single := len(placed) == 1 && !placed[0].p.HasTransfer
	kv := append(e.kv[:0], r.Extra...)
	if !single {
		kv = forms.WithDroppedKeys(kv, r.DroppedKeys)
	}
	kv = append(kv, omniattr.Reconstructed(true))
	if r.Source != "" {
		kv = append(kv, forms.SourceKey.String(r.Source))
	}
	if r.Total != nil {
		kv = forms.QualityAttrs(kv, r.Total.Quality)
		if end.After(r.Arrival.Add(r.Total.D)) {
			// A stage ends after the measured end-to-end time: the span
			// reaches it, and the measurement is kept beside it.
			kv = append(kv, e2eAttr.Float64(float64(r.Total.D)/float64(time.Millisecond)))
		}
	}
	var errs []error
	var stage *forms.Stage
	if single {
		st := placed[0].st
		stage = st
		kv = append(kv, st.Extra...)
		kv = append(kv, st.RxExtra...) // no previous stage
		// One span carries the request's keys and its stage's.
		kv = forms.WithDroppedKeys(kv, r.DroppedKeys+st.DroppedKeys)
		kv = stageAttrs(kv, st)
		if st.GenTime != nil {
			// No omni.stage span carries the stage's own length here.
			kv = append(kv, genTimeAttr.Float64(float64(st.GenTime.D)/float64(time.Millisecond)))
		}
	}
	e.kv = kv[:0]
	req := e.start(spans.RequestSpanName, ptrace.SpanKindServer, nil, r.Arrival)
	req.set(e.requestAttrs(r, id, stage)...)
	req.set(sanitize.KeyValues(kv, maxAttrKey, maxValueBytes)...)
	if single {
		errs = append(errs, e.phases(&req, &placed[0])...)
		req.end(end)
		*dst = e.dst
		return errors.Join(errs...)
	}
	for i := range placed {
		ps := &placed[i]
		st := ps.st
		e.ids.stage = int64(st.ID)
		sid, sidOK := stageID(st.ID)
		stage := e.start(spans.StageSpanName, ptrace.SpanKindInternal, &req, st.Submit)
		if sidOK {
			stage.set(omniattr.StageID(sid))
		}
		stage.set(omniattr.StageType(stageTypeOf(st)))
		if name := str(st.Name); name != "" {
			stage.set(omniattr.StageName(name))
		}
		switch {
		case ps.p.HasTransfer && (i > 0 || st.RxFrom != nil):
			ps.p.Transfer.FromStage = r.Stages[max(i-1, 0)].ID
			if st.RxFrom != nil {
				ps.p.Transfer.FromStage = *st.RxFrom
			}
			errs = append(errs, e.transfer(&req, &ps.p.Transfer)...)
			stage.set(sanitize.KeyValues(transferQuality(st), maxAttrKey, maxValueBytes)...)
		case i == 0:
			stage.set(sanitize.KeyValues(st.RxExtra, maxAttrKey, maxValueBytes)...) // no previous stage
		}
		errs = append(errs, e.phases(&stage, ps)...)
		stage.set(sanitize.KeyValues(st.Extra, maxAttrKey, maxValueBytes)...)
		stage.set(forms.WithDroppedKeys(nil, st.DroppedKeys)...)
		own := stageAttrs(reconstructedOnly[:1:1], st)
		if !hasLength(st) {
			own = append(own, omnikeys.LengthUnmeasured.Bool(true))
		}
		stage.set(sanitize.KeyValues(own, maxAttrKey, maxValueBytes)...)
		stage.end(ps.p.End)
	}
	req.end(end)
	*dst = e.dst
	return errors.Join(errs...)
}

// requestAttrs are the attributes the record path gives a request span
// at its start: the request's own, and, for a single-stage request, its
// stage's.
func (e *Emitter) requestAttrs(r *forms.Request, id string, st *forms.Stage) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 16)
	kv = append(kv, omniattr.RequestID(id), omniattr.OperationName(semconv.GenAIOperationNameGenerateContent.Value.AsString()))
	if e.model != "" {
		kv = append(kv, omniattr.RequestModel(e.model))
	}
	if r.Modality != "" {
		m := str(r.Modality)
		kv = append(kv, omniattr.OutputModality(m))
		if t, ok := omniattr.OutputType(m); ok {
			kv = append(kv, t)
		}
	}
	if r.Steps > 0 {
		kv = append(kv, omniattr.NumInferenceSteps(r.Steps))
	}
	if r.Guidance != nil {
		kv = append(kv, omniattr.GuidanceScale(*r.Guidance))
	}
	for _, n := range [...]struct {
		v  int
		kv func(int) attribute.KeyValue
	}{{r.Height, omniattr.Height}, {r.Width, omniattr.Width}, {r.Frames, omniattr.NumFrames}} {
		if n.v > 0 {
			kv = append(kv, n.kv(n.v))
		}
	}
	if st != nil {
		if sid, ok := stageID(st.ID); ok {
			kv = append(kv, omniattr.StageID(sid))
		}
		kv = append(kv, omniattr.StageType(stageTypeOf(st)))
		if name := str(st.Name); name != "" {
			kv = append(kv, omniattr.StageName(name))
		}
	}
	return kv
}

// stageID returns a stage's id as the record path records it: 0 to
// 2^31-1, or not at all.
func stageID(id int) (int, bool) { return id, id >= 0 && id <= math.MaxInt32 }

// stageTypeOf is a stage's type as recorded: one of the three the
// conventions know.
func stageTypeOf(st *forms.Stage) string {
	switch t := stageType(st); t {
	case attrs.StageLLM, attrs.StageDiffusion:
		return t
	}
	return attrs.StageOther
}

// str returns s as every string of a span is recorded: valid UTF-8, at
// most maxValueBytes.
func str(s string) string {
	if sanitize.Valid(s, maxValueBytes) {
		return s
	}
	return sanitize.String(s, maxValueBytes)
}

// scope is a request or stage span being made: the span, what its
// phases hang under, and what its end is checked against.
type scope struct {
	e     *Emitter
	span  ptrace.Span
	id    trace.SpanID
	start time.Time
	// exec, when one was made, is the span its parts hang under.
	exec     trace.SpanID
	execIV   spans.Interval
	hasExec  bool
	dropped  int
	attrsMap pcommon.Map
}

// start appends a span named name under parent (nil: a root), starting
// at start.
func (e *Emitter) start(name string, kind ptrace.SpanKind, parent *scope, start time.Time) scope {
	var pid trace.SpanID
	if parent != nil {
		pid = parent.id
	}
	s := e.span(name, kind, pid, start)
	return scope{e: e, span: s, id: trace.SpanID(s.SpanID()), start: start, attrsMap: s.Attributes()}
}

// span appends one span, its id derived from its name and parent.
func (e *Emitter) span(name string, kind ptrace.SpanKind, parent trace.SpanID, start time.Time) ptrace.Span {
	s := e.dst.AppendEmpty()
	e.size += spanSize + len(name)
	s.SetTraceID(pcommon.TraceID(e.ids.trace))
	s.SetSpanID(pcommon.SpanID(e.ids.next(name, parent)))
	if parent.IsValid() {
		s.SetParentSpanID(pcommon.SpanID(parent))
	}
	s.SetName(name)
	s.SetKind(kind)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	// The W3C flags (sampled), and that the parent is known not to be
	// remote, as the SDK's exporter writes them.
	s.SetFlags(uint32(trace.FlagsSampled) | 0x100)
	return s
}

// set records kv on the scope's span, within the limits.
func (s *scope) set(kv ...attribute.KeyValue) {
	for _, a := range kv {
		if !s.e.limits.put(s.attrsMap, a) {
			s.dropped++
			continue
		}
		s.e.size += sizeOf(a)
	}
}

// end ends the scope's span at t. An end is never before the scope's
// start or the end of a phase it holds: plan places it after both.
func (s *scope) end(t time.Time) {
	s.span.SetEndTimestamp(pcommon.NewTimestampFromTime(t))
	if s.dropped > 0 {
		s.span.SetDroppedAttributesCount(clampCount(s.dropped))
	}
}

// phases makes the spans of a stage's placed phases under sc: parts of
// exec under exec, the others under sc itself, each with its quality.
func (e *Emitter) phases(sc *scope, ps *placedStage) []error {
	var errs []error
	for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
		for _, ph := range order {
			iv := intervalOf(&ps.p, ph)
			if !iv.Measured() {
				continue
			}
			kv := reconstructedOnly
			if q := ps.st.Quality[ph]; q != (forms.Quality{}) {
				kv = forms.QualityAttrs([]attribute.KeyValue{omniattr.Reconstructed(true)}, q)
			}
			if err := e.phase(sc, ph, iv, kv); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// phase makes one phase's span, where the record path's RecordPhase
// would hang it, or refuses it as it would.
func (e *Emitter) phase(sc *scope, ph spans.Phase, iv spans.Interval, kv []attribute.KeyValue) error {
	if err := iv.Validate(); err != nil {
		return &spans.PhaseError{Phase: ph, Output: -1, Step: -1, Interval: iv, Err: err}
	}
	parent := sc.id
	switch {
	case tree.ParentOf(ph) == tree.UnderExec && sc.hasExec:
		if !tree.Within(iv, sc.execIV.Start(), sc.execIV.End()) {
			return &spans.PhaseError{Phase: ph, Output: -1, Step: -1, Interval: iv, Err: spans.ErrOutsideParent}
		}
		parent = sc.exec
	case iv.Start().Before(sc.start):
		return &spans.PhaseError{Phase: ph, Output: -1, Step: -1, Interval: iv, Err: spans.ErrOutsideParent}
	}
	s := e.span(ph.SpanName(), ptrace.SpanKindInternal, parent, iv.Start())
	e.phaseAttrs(s, ph, kv)
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(iv.End()))
	if ph == spans.Exec {
		sc.exec, sc.execIV, sc.hasExec = trace.SpanID(s.SpanID()), iv, true
	}
	return nil
}

// phaseAttrs gives a phase span its attributes: omni.phase, the model,
// then kv.
func (e *Emitter) phaseAttrs(s ptrace.Span, ph spans.Phase, kv []attribute.KeyValue) {
	m := s.Attributes()
	dropped := 0
	base := [2]attribute.KeyValue{omniattr.Phase(ph.String()), omniattr.RequestModel(e.model)}
	n := 2
	if e.model == "" {
		n = 1
	}
	for _, set := range [2][]attribute.KeyValue{base[:n], sanitize.KeyValues(kv, maxAttrKey, maxValueBytes)} {
		for _, a := range set {
			if !e.limits.put(m, a) {
				dropped++
				continue
			}
			e.size += sizeOf(a)
		}
	}
	if dropped > 0 {
		s.SetDroppedAttributesCount(clampCount(dropped))
	}
}

// transfer makes the spans of the hand-over rec under req: omni.transfer
// from its earliest part to its latest, and one child a part, as the
// record path's RecordTransfer does.
func (e *Emitter) transfer(req *scope, rec *spans.TransferRecord) []error {
	var buf [3]tree.Span
	ps, iv, err := tree.Transfer(buf[:0], rec)
	var bad []error
	for _, x := range flatten(err) {
		switch {
		case errors.Is(x, tree.ErrClockSkew), errors.Is(x, tree.ErrNoTransferPart):
		default:
			bad = append(bad, x)
		}
	}
	from, fromOK := stageID(rec.FromStage)
	to, toOK := stageID(rec.ToStage)
	for _, c := range [...]struct {
		what string
		v    int
		ok   bool
	}{{"transfer from_stage", rec.FromStage, fromOK}, {"transfer to_stage", rec.ToStage, toOK}} {
		if !c.ok {
			bad = append(bad, fmt.Errorf("otelomni: %s %d is out of range (0 to %d); not recorded", c.what, c.v, math.MaxInt32))
		}
	}
	if rec.Bytes < 0 {
		bad = append(bad, fmt.Errorf("otelomni: transfer bytes %d is out of range (0 to %d); not recorded", rec.Bytes, int64(math.MaxInt64)))
	}
	if !iv.Measured() {
		return bad
	}
	t := e.start(tree.TransferSpanName, ptrace.SpanKindInternal, req, iv.Start())
	if fromOK {
		t.set(omniattr.TransferFromStage(from))
	}
	if toOK {
		t.set(omniattr.TransferToStage(to))
	}
	if rec.Bytes > 0 {
		t.set(omniattr.TransferBytes(rec.Bytes))
	}
	if rec.Reconstructed {
		t.set(omniattr.Reconstructed(true))
	}
	var kv []attribute.KeyValue
	if rec.Reconstructed {
		kv = reconstructedOnly
	}
	for i := range ps {
		p := &ps[i]
		s := e.span(p.Phase.SpanName(), ptrace.SpanKindInternal, t.id, p.Start)
		e.phaseAttrs(s, p.Phase, kv)
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(p.End))
	}
	t.span.SetEndTimestamp(pcommon.NewTimestampFromTime(iv.End()))
	if t.dropped > 0 {
		t.span.SetDroppedAttributesCount(clampCount(t.dropped))
	}
	return bad
}

// put records a on m as the SDK does within its limits: an invalid
// attribute (an empty key) is dropped; a key already there is updated in
// place; a new key beyond the count limit is dropped. It reports whether
// a was kept.
func (l Limits) put(m pcommon.Map, a attribute.KeyValue) bool {
	if !a.Valid() || l.Attributes == 0 {
		return false
	}
	k := string(a.Key)
	v, ok := m.Get(k)
	if !ok {
		if l.Attributes > 0 && m.Len() >= l.Attributes {
			return false
		}
		v = m.PutEmpty(k)
	}
	otlpvalue.Set(v, a.Value, l.ValueLength)
	return true
}

func clampCount(n int) uint32 {
	if int64(n) > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(n)
}

// diffusionOrder is the order in which a stage's diffusion phases are
// recorded: parents before their children, as the tree is built.
var diffusionOrder = []spans.Phase{spans.QueueWait, spans.Preprocess, spans.Exec, spans.KVRecv, spans.Forward,
	spans.VAEDecode, spans.OutputReadyWait, spans.Postprocess}

var llmOrder = []spans.Phase{tree.LLMQueue, tree.LLMPrefill, tree.LLMDecode}

// placedStage is a stage with its phases placed.
type placedStage struct {
	st *forms.Stage
	p  Placed
}

// plan places every time of the request and checks that each lies within
// what OTLP carries, naming the phase that does not. Nothing is emitted
// for a request that fails.
func plan(r *forms.Request, anchor time.Time) ([]placedStage, time.Time, error) {
	placeTimes(r, anchor)
	out := make([]placedStage, len(r.Stages))
	end := r.Arrival
	if r.Total != nil {
		end = r.Arrival.Add(r.Total.D)
	}
	for i := range r.Stages {
		st := &r.Stages[i]
		p := place(st)
		out[i] = placedStage{st, p}
		if p.End.After(end) {
			end = p.End
		}
		for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
			for _, ph := range order {
				if err := checkRange(intervalOf(&p, ph)); err != nil {
					return nil, end, fmt.Errorf("stage %d: %s: %w", st.ID, ph.String(), err)
				}
			}
		}
		for _, iv := range [...]struct {
			ph spans.Phase
			iv spans.Interval
		}{{tree.TransferTx, p.Transfer.Tx}, {tree.TransferInFlight, p.Transfer.InFlight}, {tree.TransferRxDecode, p.Transfer.RxDecode}} {
			if err := checkRange(iv.iv); err != nil {
				return nil, end, fmt.Errorf("stage %d: %s: %w", st.ID, iv.ph.String(), err)
			}
		}
		// The stage itself last: the phase that made it too long is named.
		if err := checkRange(spans.Between(st.Submit, p.End)); err != nil {
			return nil, end, fmt.Errorf("stage %d: %w", st.ID, err)
		}
	}
	if err := checkRange(spans.Between(r.Arrival, end)); err != nil {
		return nil, end, fmt.Errorf("request: %w", err)
	}
	return out, end, nil
}

// intervalOf returns the placed interval of a diffusion or LLM phase.
func intervalOf(p *Placed, ph spans.Phase) spans.Interval {
	d, l := &p.Diffusion, &p.LLM
	switch ph {
	case spans.QueueWait:
		return d.QueueWait
	case spans.Preprocess:
		return d.Preprocess
	case spans.Exec:
		return d.Exec
	case spans.KVRecv:
		return d.KVRecv
	case spans.Forward:
		return d.Forward
	case spans.VAEDecode:
		return d.VAEDecode
	case spans.OutputReadyWait:
		return d.OutputReadyWait
	case spans.Postprocess:
		return d.Postprocess
	case tree.LLMQueue:
		return l.Queue
	case tree.LLMPrefill:
		return l.Prefill
	case tree.LLMDecode:
		return l.Decode
	}
	return spans.Interval{}
}

// hasLength reports whether a record gave the stage's own length: its
// generation time, or a phase of it (a hand-over into it is not its own).
func hasLength(s *forms.Stage) bool {
	if s.GenTime != nil {
		return true
	}
	for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
		for _, p := range order {
			if _, ok := s.Durations[p]; ok {
				return true
			}
		}
	}
	return false
}

// e2eAttr keeps a measured end-to-end time shorter than the request span,
// which a stage's end made longer.
var e2eAttr = omnikeys.RecordKey("e2e_total_ms")

// genTimeAttr keeps a single-stage request's stage_gen_time, which has no
// omni.stage span to give it a length.
var genTimeAttr = omnikeys.RecordKey("stage_gen_time_ms")

// reconstructedOnly is the attribute of a placed phase of exact duration,
// shared: it is never written to.
var reconstructedOnly = []attribute.KeyValue{omniattr.Reconstructed(true)}

// stageAttrs appends a stage's own attributes: preemptions, the quality of
// its stage_gen_time, and the fields whose 0 meant "not measured".
func stageAttrs(kv []attribute.KeyValue, st *forms.Stage) []attribute.KeyValue {
	if st.Preemptions != nil {
		kv = append(kv, omniattr.NumPreemptions(*st.Preemptions))
	}
	if st.GenTime != nil {
		kv = forms.QualityAttrs(kv, st.GenTime.Quality)
	}
	if len(st.Unmeasured) > 0 {
		u := append([]string(nil), st.Unmeasured...)
		sort.Strings(u)
		kv = append(kv, forms.UnmeasuredZeroKey.StringSlice(u))
	}
	return kv
}

// transferQuality says how exact the hand-over into st is.
func transferQuality(st *forms.Stage) []attribute.KeyValue {
	var q forms.Quality
	for _, p := range []spans.Phase{tree.TransferTx, tree.TransferInFlight, tree.TransferRxDecode} {
		pq := st.Quality[p]
		q.Resolution = max(q.Resolution, pq.Resolution)
		q.Summed = q.Summed || pq.Summed
	}
	var kv []attribute.KeyValue
	if q.Resolution > 0 {
		kv = append(kv, forms.TransferResolutionKey.Float64(float64(q.Resolution)/float64(time.Millisecond)))
	}
	if q.Summed || st.RxBytesSummed {
		kv = append(kv, forms.TransferSummedKey.Bool(true))
	}
	return kv
}

// stageType is the input's stage type, or what its keys say it is: a
// diffusion phase makes a diffusion stage, else an LLM phase an LLM stage.
func stageType(s *forms.Stage) string {
	if s.Type != "" {
		return s.Type
	}
	for _, p := range diffusionOrder {
		if _, ok := s.Durations[p]; ok {
			return attrs.StageDiffusion
		}
	}
	for _, p := range llmOrder {
		if _, ok := s.Durations[p]; ok {
			return attrs.StageLLM
		}
	}
	return attrs.StageOther
}

// flatten returns the errors an errors.Join holds, or err itself.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
