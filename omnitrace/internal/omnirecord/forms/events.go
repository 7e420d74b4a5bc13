// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"time"

	"github.com/otelomni/otelomni/internal/plan"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

// Event types of the older event dicts (and of their JSON-lines form).
const (
	evTransferTx     = "transfer_stats"
	evTransferRx     = "transfer_rx_stats"
	evTransferTotal  = "transfer_total_stats"
	evStage          = "Request_stage_stats"
	evStageJSONL     = "stage_request_stats"
	evRequest        = "request_level_metrics"
	evRequestJSONL   = "orchestrator_request_e2e"
	evRunningAverage = "Stage_running_avg"
)

// EventRequestID returns the request an event is about, or "" for an
// event of the whole run.
func EventRequestID(ev *literal.Value) (string, string) {
	tv, ok := ev.Get("type")
	if !ok || tv.Kind != literal.String {
		return "", ""
	}
	switch tv.Str {
	case evTransferTx, evTransferRx, evTransferTotal, evStage, evStageJSONL, evRequest, evRequestJSONL:
	default:
		return "", tv.Str
	}
	idv, _ := ev.Get("request_id")
	id, err := IDOf(idv, "request_id")
	if err != nil {
		return "", tv.Str
	}
	return id, tv.Str
}

// ApplyEvent reads one event dict onto b.
func (b *Builder) ApplyEvent(kind string, ev *literal.Value) {
	switch kind {
	case evTransferTx, evTransferRx, evTransferTotal:
		from, to := -1, -1
		if v, ok := ev.Get("from_stage"); ok {
			if n, err := integer(v); err == nil {
				from = int(n)
			}
		}
		if v, ok := ev.Get("to_stage"); ok {
			if n, err := integer(v); err == nil {
				to = int(n)
			}
		}
		if from < 0 || to < 0 || from > 1<<20 || to > 1<<20 {
			return
		}
		if kind == evTransferTx {
			b.addTx(from, to, ev)
			return
		}
		sizeKey := "rx_bytes"
		if kind == evTransferTotal {
			sizeKey = "size_bytes"
			// The total repeats the parts, with the last chunk's send time
			// and size only (log_utils.py, record_sender_transfer_agg
			// overwrites them chunk by chunk): it fills what the other
			// events did not say.
			if s := b.stages[to]; s != nil {
				if _, ok := s.Durations[plan.TransferTx]; ok {
					ev = without(ev, "tx_time_ms")
				}
				if s.RxBytes != nil {
					ev = without(ev, "size_bytes")
				}
			}
		}
		b.applyTransfer(from, to, ev, Quality{}, sizeKey, 1)
	case evStage, evStageJSONL:
		row := without(ev, "type", "request_id", "rx_transfer_bytes", "rx_decode_time_ms", "rx_in_flight_time_ms", "rx_mbps")
		b.ApplyStageRow(row, RowSource{})
		if v, ok := ev.Get("stage_id"); ok {
			if n, err := integer(v); err == nil && n > 0 && n < 1<<20 {
				// The receive side of the hand-over into this stage; at the
				// first stage these are defaults, and are left out.
				rx := without(ev, "type", "request_id", "stage_id", "batch_size", "num_tokens_out", "stage_gen_time_ms", "tokens_per_s", "rx_mbps")
				rx = renamed(rx, map[string]string{"rx_decode_time_ms": "rx_decode_time_ms", "rx_in_flight_time_ms": "in_flight_time_ms"})
				b.applyTransfer(int(n)-1, int(n), rx, Quality{}, "rx_transfer_bytes", 1)
			}
		}
	case evRequest, evRequestJSONL:
		if stages, ok := ev.Get("stages"); ok && stages.Kind == literal.Object {
			for i, k := range stages.Keys {
				id, _, ok := parseLabel(k)
				row := &stages.Vals[i]
				if !ok || row.Kind != literal.Object {
					continue
				}
				r := *row
				r.Keys = append([]string{"stage_id"}, r.Keys...)
				r.Vals = append([]literal.Value{{Kind: literal.Number, Num: float64(id), Str: k}}, r.Vals...)
				b.ApplyStageRow(&r, RowSource{})
			}
		}
		b.ApplyE2ERow(ev, RowSource{})
	}
}

// addTx adds one chunk's send time and size: the older log writes one
// event per chunk sent.
func (b *Builder) addTx(from, to int, ev *literal.Value) {
	s := b.handOverInto(from, to)
	if s == nil {
		return
	}
	v, _ := ev.Get("tx_time_ms")
	if d, ok := b.durationOf("tx_time_ms", v, time.Millisecond); ok && d > 0 {
		if old, had := s.Durations[plan.TransferTx]; had {
			s.set(plan.TransferTx, AddSat(old, d), Quality{Summed: true})
		} else {
			s.set(plan.TransferTx, d, Quality{})
		}
	}
	if v, ok := ev.Get("size_bytes"); ok {
		if n, ok := number(v); ok && n > 0 && n < 1<<62 {
			bytes := int64(n)
			if s.RxBytes != nil {
				bytes += *s.RxBytes
				s.RxBytesSummed = true
			}
			s.RxBytes = &bytes
		}
	}
}

// without returns obj less the keys named.
func without(obj *literal.Value, keys ...string) *literal.Value {
	out := &literal.Value{Kind: literal.Object}
	for i, k := range obj.Keys {
		skip := false
		for _, x := range keys {
			if k == x {
				skip = true
				break
			}
		}
		if !skip {
			out.Keys = append(out.Keys, k)
			out.Vals = append(out.Vals, obj.Vals[i])
		}
	}
	return out
}

// renamed returns obj with keys renamed.
func renamed(obj *literal.Value, names map[string]string) *literal.Value {
	out := &literal.Value{Kind: literal.Object, Vals: obj.Vals, Keys: make([]string, len(obj.Keys))}
	for i, k := range obj.Keys {
		if n, ok := names[k]; ok {
			k = n
		}
		out.Keys[i] = k
	}
	return out
}
