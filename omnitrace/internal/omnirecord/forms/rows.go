// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

// How the writer of vLLM-Omni's per-request rows treats a missing
// measurement, field by field. Each rule is read from the writer's code
// (the module named with it); docs/omnitrace.md has the same table.
type zeroRule uint8

const (
	// zeroIsMeasured: the writer puts the key only when it measured the
	// phase, so a 0 is a measurement (under a millisecond, once truncated)
	// and makes a zero-length span.
	zeroIsMeasured zeroRule = iota
	// zeroIsDefault: the writer puts 0 when it measured nothing (no
	// pre-processor, a synchronous output, a default of its dataclass), so
	// a 0 cannot be told from "not measured" and makes no span; the field
	// is listed in omni.timing.unmeasured_zero.
	zeroIsDefault
)

// diffusionFields are the diffusion engine's per-request keys
// (vllm_omni/diffusion/diffusion_engine.py, DiffusionEngine.step_streaming),
// without their unit.
var diffusionFields = map[string]struct {
	phase spans.Phase
	rule  zeroRule
}{
	// Always written; 0.0 when the model has no pre-processor.
	"preprocess_time": {spans.Preprocess, zeroIsDefault},
	// Always written; measured for every served output.
	"diffusion_engine_exec_time": {spans.Exec, zeroIsMeasured},
	// Always written; 0.0 for a synchronous output, which never waits.
	"output_ready_wait_time": {spans.OutputReadyWait, zeroIsDefault},
	// Always written; the post-processor always runs.
	"postprocess_time": {spans.Postprocess, zeroIsMeasured},
	// Written only when the scheduler measured it.
	"scheduler_queue_wait": {spans.QueueWait, zeroIsMeasured},
	// Written only when above 0: a 0 here is a sub-millisecond value
	// truncated by the aggregator.
	"kv_recv_time": {spans.KVRecv, zeroIsMeasured},
	// Written only when the pipeline reported its stage durations.
	"forward_time":    {spans.Forward, zeroIsMeasured},
	"vae_decode_time": {spans.VAEDecode, zeroIsMeasured},
}

// RowSource says how the numbers of a row were written.
type RowSource struct {
	// Table: read from a box table of the log, whose floats have three
	// decimals; otherwise from a summary dict, at full precision.
	Table bool
}

// floatQuality is the quality of a float field of the row.
func (src RowSource) floatQuality() Quality {
	if src.Table {
		return Quality{Resolution: time.Microsecond}
	}
	return Quality{}
}

// diffusionQuality is the quality of a diffusion engine's value: added
// over the request's outputs (vllm_omni/metrics/stats.py,
// accumulate_diffusion_metrics). In a summary, a value written without a
// fraction was truncated by int() to its unit (_as_stage_request_stats);
// one written with a fraction (a release that keeps floats, in seconds)
// keeps its precision. In a box table, a value is as fine as its decimals:
// "2,301" (ms) is good to 1 ms, "13.802" (s) to 1 ms.
func diffusionQuality(v *literal.Value, unit time.Duration, src RowSource) Quality {
	q := Quality{Summed: true}
	frac := strings.IndexByte(v.Str, '.')
	switch {
	case src.Table && frac >= 0 && !strings.ContainsAny(v.Str, "eE"):
		q.Resolution = unit
		for range v.Str[frac+1:] {
			q.Resolution /= 10
		}
		q.Resolution = max(q.Resolution, 1)
	case !strings.ContainsAny(v.Str, ".eE"):
		q.Resolution = unit
	}
	return q
}

// stageRowKeys are the keys of a stage row this package maps.
var stageRowKeys = map[string]bool{"stage_id": true, "stage": true, "stage_gen_time_ms": true,
	"num_tokens_in": true, "num_tokens_out": true, "postprocess_time_ms": true}

// ApplyStageRow reads one stage's row of a summary's stage_table, or one
// column of a StageRequestStats table.
func (b *Builder) ApplyStageRow(row *literal.Value, src RowSource) {
	s := b.stageOf(row)
	if s == nil {
		return
	}
	isDiffusion := false
	for _, k := range row.Keys {
		if stem, _, ok := unitKey(k); ok && stem != "postprocess_time" {
			if _, ok := diffusionFields[stem]; ok {
				isDiffusion = true
			}
		}
	}
	if isDiffusion && s.Type == "" {
		s.Type = attrs.StageDiffusion
	}
	if _, ok := row.Get("num_tokens_out"); ok && !isDiffusion && s.Type == "" {
		s.Type = attrs.StageLLM // a stage that counts tokens and runs no diffusion
	}
	used := map[string]bool{}
	// One phase may come in both units ("x_ms" and "x_s"): they must agree
	// within their resolution, as in a record line; two that do not are
	// reported and both left out.
	type reading struct {
		key  string
		v    *literal.Value
		d    time.Duration
		q    Quality
		zero bool
	}
	var order []spans.Phase
	readings := map[spans.Phase][]reading{}
	for i, k := range row.Keys {
		v := &row.Vals[i]
		if stageRowKeys[k] && k != "postprocess_time_ms" {
			continue
		}
		stem, unit, ok := unitKey(k)
		if !ok {
			continue
		}
		f, ok := diffusionFields[stem]
		if !ok || (stem == "postprocess_time" && !isDiffusion) {
			continue
		}
		used[k] = true
		d, ok := b.durationOf(k, v, unit)
		if !ok {
			continue
		}
		if _, seen := readings[f.phase]; !seen {
			order = append(order, f.phase)
		}
		readings[f.phase] = append(readings[f.phase], reading{k, v, d, diffusionQuality(v, unit, src), v.Num == 0 && f.rule == zeroIsDefault})
	}
	for _, p := range order {
		rs := readings[p]
		agree := true
		for _, r := range rs[1:] {
			diff := rs[0].d - r.d
			if diff < 0 {
				diff = -diff
			}
			if diff > max(roundingTolerance, rs[0].q.Resolution, r.q.Resolution) {
				b.note("%s and %s disagree (%v and %v)", literal.Clip(rs[0].key), literal.Clip(r.key), rs[0].d, r.d)
				agree = false
				break
			}
		}
		if !agree {
			continue
		}
		for _, r := range rs {
			if r.zero {
				unmeasuredPhase(s, p, r.key)
				continue
			}
			b.setPhase(s, p, r.d, r.q)
			measured(s, r.key)
		}
	}
	if v, ok := row.Get("stage_gen_time_ms"); ok {
		if d, ok := b.durationOf("stage_gen_time_ms", v, time.Millisecond); ok {
			b.setGen(s, Measure{D: d, Quality: src.floatQuality()})
		}
	}
	for _, t := range []struct {
		key string
		mk  func(int) attribute.KeyValue
	}{{"num_tokens_in", omniattr.InputTokens}, {"num_tokens_out", omniattr.OutputTokens}} {
		if v, ok := row.Get(t.key); ok {
			if n, ok := number(v); ok && n == math.Trunc(n) && n < 1<<31 {
				s.Extra = appendOnce(s.Extra, t.mk(int(n)))
			}
		}
	}
	for i, k := range row.Keys {
		if stageRowKeys[k] || used[k] {
			if k == "postprocess_time_ms" && !isDiffusion {
				// The orchestrator's hand-off to the next stage, not a
				// phase of this catalogue; 0 is its dataclass default.
				if n, ok := number(&row.Vals[i]); ok && n == 0 {
					unmeasured(s, k)
				} else {
					s.Extra = b.AddExtra(s.Extra, &s.DroppedKeys, k, &row.Vals[i])
				}
			}
			continue
		}
		s.Extra = b.AddExtra(s.Extra, &s.DroppedKeys, k, &row.Vals[i])
	}
}

// stageOf returns the stage a row is about: its stage_id, or its label.
func (b *Builder) stageOf(row *literal.Value) *Stage {
	id, name, ok := -1, "", false
	if v, has := row.Get("stage"); has && v.Kind == literal.String {
		id, name, ok = parseLabel(v.Str)
	}
	if v, has := row.Get("stage_id"); has {
		if n, err := integer(v); err == nil && n >= 0 && n < 1<<20 {
			id, ok = int(n), true
		}
	}
	if !ok {
		b.note("a stage row without a stage id from 0 to %d", 1<<20-1)
		return nil
	}
	s := b.stage(id)
	if name != "" && s.Name == "" {
		s.Name = name
	}
	return s
}

func appendOnce(dst []attribute.KeyValue, kv attribute.KeyValue) []attribute.KeyValue {
	for i := range dst {
		if dst[i].Key == kv.Key {
			dst[i] = kv
			return dst
		}
	}
	return append(dst, kv)
}

// transferFields are the parts of a hand-over in a summary's trans_table
// (vllm_omni/metrics/stats.py, TransferEdgeStats): every one defaults to
// 0.0 in the dataclass, made by whichever side of the hand-over was
// recorded first, so a 0 is "not measured". The send time and the size are
// added over the hand-over's chunks (record_transfer_tx).
var transferFields = map[string]struct {
	phase  spans.Phase
	summed bool
}{
	"tx_time_ms":        {plan.TransferTx, true},
	"in_flight_time_ms": {plan.TransferInFlight, false},
	"rx_decode_time_ms": {plan.TransferRxDecode, false},
}

// ApplyTransferRow reads one edge's row of a trans_table, or one column of
// a TransferEdgeStats table, onto the receiving stage.
func (b *Builder) ApplyTransferRow(row *literal.Value, src RowSource) {
	ev, ok := row.Get("edge")
	if !ok || ev.Kind != literal.String {
		b.note("a transfer row without an edge")
		return
	}
	from, to, ok := parseEdge(ev.Str)
	if !ok {
		b.note("edge %q is not from->to", literal.Clip(ev.Str))
		return
	}
	b.applyTransfer(from, to, row, src.floatQuality(), "size_kbytes", 1024)
}

// applyTransfer reads the parts of a hand-over from obj, whose size is in
// sizeKey (times sizeUnit bytes).
func (b *Builder) applyTransfer(from, to int, obj *literal.Value, q Quality, sizeKey string, sizeUnit float64) {
	s := b.handOverInto(from, to)
	if s == nil {
		return
	}
	for i, k := range obj.Keys {
		v := &obj.Vals[i]
		tf, ok := transferFields[k]
		switch {
		case ok:
			d, ok := b.durationOf(k, v, time.Millisecond)
			if !ok {
				continue
			}
			if v.Num == 0 {
				unmeasuredPhase(s, tf.phase, k)
				continue
			}
			pq := q
			pq.Summed = tf.summed
			b.setPhase(s, tf.phase, d, pq)
			measured(s, k)
		case k == sizeKey:
			if n, ok := number(v); ok && n > 0 && n*sizeUnit < 1<<62 {
				bytes := int64(math.Round(n * sizeUnit))
				s.RxBytes, s.RxBytesSummed = &bytes, true
			}
		case k == "edge" || k == "from_stage" || k == "to_stage" || k == "request_id" || k == "type":
		default:
			s.Extra = b.AddExtra(s.Extra, &s.DroppedKeys, "transfer."+k, v)
		}
	}
}

// e2eTotalKeys are the keys that give a request's end-to-end time, in the
// order they are preferred: the orchestrator's own measure, from the
// request's start to its final output (on_finalize_request).
var e2eTotalKeys = []string{"e2e_total_ms", "e2e_time_ms", "engine_pipeline_time_ms"}

// ApplyE2ERow reads a request's row of an e2e_table, a RequestE2EStats
// table, or a request_level_metrics event. It closes the request.
func (b *Builder) ApplyE2ERow(row *literal.Value, src RowSource) {
	used := map[string]bool{}
	for _, k := range e2eTotalKeys {
		v, ok := row.Get(k)
		if !ok {
			continue
		}
		// The key that gives the request span its length, and one left
		// out as no duration, are no attributes.
		used[k] = true
		if d, ok := b.durationOf(k, v, time.Millisecond); ok {
			b.setTotal(Measure{D: d, Quality: src.floatQuality()})
			break
		}
	}
	for i, k := range row.Keys {
		if k == "request_id" || k == "type" || k == "stages" || used[k] {
			continue
		}
		b.R.Extra = b.AddExtra(b.R.Extra, &b.R.DroppedKeys, k, &row.Vals[i])
	}
	b.Complete = true
}

// applySummary reads one request's rows of a summary dict.
func applySummaryRows(b *Builder, stageRows, transferRows []literal.Value, e2e *literal.Value) {
	for i := range stageRows {
		b.ApplyStageRow(&stageRows[i], RowSource{})
	}
	for i := range transferRows {
		b.ApplyTransferRow(&transferRows[i], RowSource{})
	}
	if e2e != nil {
		b.ApplyE2ERow(e2e, RowSource{})
	}
}
