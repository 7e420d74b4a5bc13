// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package spans

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
