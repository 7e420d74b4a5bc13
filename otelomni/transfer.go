package otelomni

import (
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// Receive measures the receiving side of a hand-over: from
// [Stage.StartReceive] to [Receive.End] is the receive-and-decode time.
type Receive struct {
	s     *Stage
	hdr   spans.TransferHeader
	start time.Time
}

// StartReceive starts receiving the payload that hdr (from the stage
// message) describes.
func (s *Stage) StartReceive(hdr spans.TransferHeader) Receive {
	if s == nil || !s.recording() {
		return Receive{}
	}
	return Receive{s: s, hdr: hdr, start: time.Now()}
}

// End ends the receipt and makes the transfer's spans: omni.transfer under
// the request span, with its measured parts (tx and in flight from the
// header, rx decode measured here) as children. See
// [Stage.RecordTransfer].
func (x Receive) End() error {
	if x.s == nil {
		return nil
	}
	rec := x.hdr.Record(x.s.stageID, spans.Between(x.start, time.Now()))
	return x.s.RecordTransfer(rec)
}

// RecordTransfer makes the spans of one hand-over into this stage:
// omni.transfer, a child of the request span, from its earliest measured
// part to its latest, with the edge's bytes and connector, and one child per
// measured part. A part that was not measured makes no span. An in-flight
// time that comes out negative across the two hosts' clocks is left out and
// counted (Stats.ClockSkew), not reported as an error; any other bad part
// makes no span and is reported.
func (s *Stage) RecordTransfer(rec spans.TransferRecord) error {
	if s == nil || !s.recording() {
		return nil
	}
	var buf [3]spans.PlannedSpan
	plan, iv, err := rec.Plan(buf[:0])
	var bad []error
	for _, e := range flatten(err) {
		switch {
		case errors.Is(e, spans.ErrClockSkew):
			s.in.stats.skewed(e)
		case errors.Is(e, spans.ErrNoTransferPart):
			// Not measured: no span, and no error (the absence rule).
		default:
			s.in.stats.reject(e)
			bad = append(bad, e)
		}
	}
	if s.met != nil && rec.Bytes > 0 && s.met.size.Enabled(s.parent) {
		s.met.size.Record(s.parent, rec.Bytes, s.pattrs.transferRec(rec.Connector)...)
	}
	if !iv.Measured() {
		return errors.Join(bad...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		s.in.stats.misused("a transfer recorded on a stage that had already ended")
		return ErrRequestEnded
	}
	tctx := s.parent
	var span trace.Span
	if s.span != nil {
		s.startOpt[0] = trace.WithTimestamp(iv.Start())
		tctx, span = s.tracer.Start(s.parent, spans.TransferSpanName, s.startOpt[:1]...)
		kv := append(s.attrBuf[:0],
			attrs.TransferFromStage(rec.FromStage), attrs.TransferToStage(rec.ToStage))
		if rec.Bytes > 0 {
			kv = append(kv, attrs.TransferBytes(rec.Bytes))
		}
		if rec.Connector != "" {
			kv = append(kv, attrs.TransferConnector(rec.Connector))
		}
		if rec.Reconstructed {
			kv = append(kv, attrs.Reconstructed(true))
		}
		span.SetAttributes(kv...)
	}
	for _, p := range plan {
		s.emitUnderLocked(tctx, p.Phase, p.Start, p.End, -1, false, -1, rec.Reconstructed, nil)
	}
	if span != nil {
		s.endOpt[0] = trace.WithTimestamp(iv.End())
		span.End(s.endOpt[:]...)
	}
	return errors.Join(bad...)
}
