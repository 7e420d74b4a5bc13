// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"time"

	"github.com/otelomni/otelomni/spans"
)

// Transfer appends one [Span] per measured and valid part of r (tx, in
// flight, rx decode) and returns the interval of the transfer span, from
// the earliest part's start to the latest part's end. A negative in-flight
// time is reported as [ErrClockSkew]; a bad part measured on one clock as
// spans.ErrEndBeforeStart or spans.ErrZeroTime. The span interval is not
// measured when no part is ([ErrNoTransferPart]).
func Transfer(dst []Span, r *spans.TransferRecord) ([]Span, spans.Interval, error) {
	if r == nil {
		return dst, spans.Interval{}, nil
	}
	var errs []error
	n := len(dst)
	dst, errs = one(dst, errs, TransferTx, r.Tx, -1, false, -1)
	if r.InFlight.Measured() && r.InFlight.Validate() == spans.ErrEndBeforeStart {
		errs = append(errs, &spans.PhaseError{Phase: TransferInFlight, Output: -1, Step: -1, Interval: r.InFlight, Err: ErrClockSkew})
	} else {
		dst, errs = one(dst, errs, TransferInFlight, r.InFlight, -1, false, -1)
	}
	dst, errs = one(dst, errs, TransferRxDecode, r.RxDecode, -1, false, -1)
	parts := dst[n:]
	if len(parts) == 0 {
		if len(errs) == 0 {
			errs = append(errs, ErrNoTransferPart)
		}
		return dst, spans.Interval{}, errors.Join(errs...)
	}
	start, end := parts[0].Start, parts[0].End
	for _, p := range parts[1:] {
		if p.Start.Before(start) {
			start = p.Start
		}
		if p.End.After(end) {
			end = p.End
		}
	}
	return dst, spans.Between(start, end), errors.Join(errs...)
}

// TransferOf builds a transfer's record from the header the sender put in
// the stage message and the receiver's measured receive-and-decode
// interval, for the stage toStage. The in-flight part runs from the
// header's TxEnd to rx's start, and is measured only when both are.
func TransferOf(h spans.TransferHeader, toStage int, rx spans.Interval) spans.TransferRecord {
	r := spans.TransferRecord{FromStage: h.FromStage, ToStage: toStage, Bytes: h.Bytes, Connector: h.Connector, RxDecode: rx}
	if h.TxStart != 0 && h.TxEnd != 0 {
		r.Tx = spans.Between(time.Unix(0, h.TxStart), time.Unix(0, h.TxEnd))
	}
	if h.TxEnd != 0 && rx.Measured() && !rx.Start().IsZero() {
		// Strip the receiver's monotonic reading: the difference must be
		// taken on the wall clocks, the only ones the two hosts share.
		r.InFlight = spans.Between(time.Unix(0, h.TxEnd), rx.Start().Round(0))
	}
	return r
}
