// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"

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
