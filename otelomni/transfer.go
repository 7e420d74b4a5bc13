// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"errors"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// RecordTransfer makes the spans of one hand-over into this stage:
// omni.transfer, a child of the request span, from its earliest measured
// part to its latest, with the edge's bytes and connector, and one child per
// measured part. A part that was not measured makes no span. An in-flight
// time that comes out negative across the two hosts' clocks is left out and
// counted (Stats.ClockSkew), not reported as an error; any other bad part
// makes no span and is reported. A stage out of its range (0 to 2^31-1),
// or negative bytes, is left out of the span's attributes (and the bytes
// of the size histogram), reported and counted in Stats.Misuse.
func (r *Request) RecordTransfer(rec spans.TransferRecord) error {
	if !r.recording() {
		return nil
	}
	r.mu.Lock()
	ended := r.ended
	r.mu.Unlock()
	if ended {
		// Nothing of it is recorded, its size neither.
		r.in.stats.misused("a transfer recorded on a request that had already ended")
		return ErrRequestEnded
	}
	// The receiver's own readings compare and export on the request's
	// clock; the sender's, from another clock, are kept as given.
	rec.Tx, rec.InFlight, rec.RxDecode = r.clk.interval(rec.Tx), r.clk.interval(rec.InFlight), r.clk.interval(rec.RxDecode)
	var buf [3]plan.Span
	ps, iv, err := plan.Transfer(buf[:0], &rec)
	var bad []error
	for _, e := range flatten(err) {
		switch {
		case errors.Is(e, plan.ErrClockSkew):
			r.in.stats.skewed(e)
		case errors.Is(e, plan.ErrNoTransferPart):
			// Not measured: no span, and no error (the absence rule).
		default:
			r.in.stats.reject(e)
			bad = append(bad, e)
		}
	}
	// Ints out of their range are left out of the spans, and reported.
	from, to := rec.FromStage, rec.ToStage
	for _, s := range [...]struct {
		what string
		v    *int
	}{{"transfer from_stage", &from}, {"transfer to_stage", &to}} {
		if badIndex(*s.v) {
			bad = append(bad, r.in.outOfRange(s.what, int64(*s.v), 0, maxIndex, "not recorded", nil))
			*s.v = -1
		}
	}
	if rec.Bytes < 0 {
		bad = append(bad, r.in.outOfRange("transfer bytes", rec.Bytes, 0, math.MaxInt64, "not recorded", nil))
	}
	connector := r.in.str(rec.Connector)
	if r.met != nil && rec.Bytes > 0 {
		r.met.size.Record(r.parent, rec.Bytes, r.tbl.rec.transfer(connector)...)
	}
	if !iv.Measured() {
		return errors.Join(bad...)
	}
	tctx := r.parent
	var span trace.Span
	if r.span != nil {
		kv := make([]attribute.KeyValue, 0, 5)
		if from >= 0 {
			kv = append(kv, omniattr.TransferFromStage(from))
		}
		if to >= 0 {
			kv = append(kv, omniattr.TransferToStage(to))
		}
		if rec.Bytes > 0 {
			kv = append(kv, omniattr.TransferBytes(rec.Bytes))
		}
		if connector != "" {
			kv = append(kv, omniattr.TransferConnector(connector))
		}
		if rec.Reconstructed {
			kv = append(kv, omniattr.Reconstructed(true))
		}
		tctx, span = r.tracer.Start(r.parent, plan.TransferSpanName, trace.WithAttributes(kv...), trace.WithTimestamp(iv.Start()))
	}
	for i := range ps {
		c := r.emit(tctx, &ps[i], recordOpts{reconstructed: rec.Reconstructed})
		r.observe(c, ps[i].Phase, ps[i].Start, ps[i].End, -1, 0, false)
	}
	if span != nil {
		span.End(trace.WithTimestamp(iv.End()))
	}
	return errors.Join(bad...)
}
