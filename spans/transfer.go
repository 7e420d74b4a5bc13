package spans

import (
	"errors"
	"time"
)

// TransferRecord is the timing of one hand-over between two stages. The
// sending stage measures Tx on its clock, the receiving stage RxDecode on
// its own; InFlight runs from the sender's end of sending to the receiver's
// start of receipt, so it is computed across two hosts' clocks.
type TransferRecord struct {
	FromStage, ToStage int
	// Bytes is the payload's size; 0 when unknown.
	Bytes int64
	// Connector names what carried it: "shm", "mooncake", "cuda_ipc"...
	Connector string

	Tx, InFlight, RxDecode Interval
	// Reconstructed marks records whose start times were placed by the
	// phase order rather than read from a clock.
	Reconstructed bool
}

// ErrClockSkew reports a part computed across two hosts' clocks that came
// out negative: the clocks disagree by more than the part lasted. The part
// is left out, never exported negative.
var ErrClockSkew = errors.New("negative across two hosts' clocks (clock skew)")

// ErrNoTransferPart is returned for a transfer none of whose parts was
// measured validly: there is no interval to give its span.
var ErrNoTransferPart = errors.New("no part of the transfer was measured")

// Plan appends one [PlannedSpan] per measured and valid part (tx, in
// flight, rx decode) and returns the interval of the transfer span, from
// the earliest part's start to the latest part's end. A negative in-flight
// time is reported as [ErrClockSkew]; a bad part measured on one clock as
// [ErrEndBeforeStart] or [ErrZeroTime]. The span interval is not measured
// when no part is.
func (r *TransferRecord) Plan(dst []PlannedSpan) ([]PlannedSpan, Interval, error) {
	if r == nil {
		return dst, Interval{}, nil
	}
	var errs []error
	n := len(dst)
	dst, errs = planOne(dst, errs, TransferTx, r.Tx, -1, false, -1)
	if r.InFlight.measured && r.InFlight.Validate() == ErrEndBeforeStart {
		errs = append(errs, &PhaseError{Phase: TransferInFlight, Output: -1, Step: -1, Interval: r.InFlight, Err: ErrClockSkew})
	} else {
		dst, errs = planOne(dst, errs, TransferInFlight, r.InFlight, -1, false, -1)
	}
	dst, errs = planOne(dst, errs, TransferRxDecode, r.RxDecode, -1, false, -1)
	parts := dst[n:]
	if len(parts) == 0 {
		if len(errs) == 0 {
			errs = append(errs, ErrNoTransferPart)
		}
		return dst, Interval{}, errors.Join(errs...)
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
	return dst, Interval{start: start, end: end, measured: true}, errors.Join(errs...)
}

// TransferHeader is what a sending stage puts in its stage message so that
// the receiving stage can build the transfer's spans: who sent it, how, how
// big, and the sender's wall-clock times of sending.
type TransferHeader struct {
	FromStage int    `json:"from_stage"`
	Connector string `json:"connector,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	// TxStart and TxEnd are Unix nanoseconds on the sender's wall clock;
	// 0 when not measured (a connector that reports no send times).
	TxStart int64 `json:"tx_start_unix_nano,omitempty"`
	TxEnd   int64 `json:"tx_end_unix_nano,omitempty"`
}

// Record builds the transfer's record from its header and the receiver's
// measured receive-and-decode interval, for the stage toStage. The in-flight
// part runs from the header's TxEnd to rx's start, and is measured only when
// both are.
func (h TransferHeader) Record(toStage int, rx Interval) TransferRecord {
	r := TransferRecord{FromStage: h.FromStage, ToStage: toStage, Bytes: h.Bytes, Connector: h.Connector, RxDecode: rx}
	if h.TxStart != 0 && h.TxEnd != 0 {
		r.Tx = Between(time.Unix(0, h.TxStart), time.Unix(0, h.TxEnd))
	}
	if h.TxEnd != 0 && rx.measured && !rx.start.IsZero() {
		// Strip the receiver's monotonic reading: the difference must be
		// taken on the wall clocks, the only ones the two hosts share.
		r.InFlight = Interval{start: time.Unix(0, h.TxEnd), end: rx.start.Round(0), measured: true}
	}
	return r
}
