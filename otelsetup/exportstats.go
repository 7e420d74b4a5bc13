// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"fmt"
	"sync/atomic"
)

// ExportStats accounts for every span the export path was handed: spans
// that ended, spans the collector accepted, spans whose export failed,
// spans the collector rejected, spans refused. What is none of these was
// dropped (its queue was full, or the shutdown deadline passed with it
// still queued) or is still queued.
type ExportStats struct {
	// Ended counts the sampled spans handed to the batch processor.
	Ended uint64
	// Exported counts the spans the collector accepted.
	Exported uint64
	// Failed counts the spans of batches whose export failed (the
	// collector was down, refused them, or timed out).
	Failed uint64
	// Rejected counts the spans the collector rejected of batches it
	// accepted (an OTLP partial success); the other spans of such a batch
	// count as exported.
	Rejected uint64
	// Pending is Ended - Exported - Failed - Rejected - Refused: spans
	// still queued, or dropped.
	// After [Telemetry.Shutdown] nothing is queued any more, so Pending is
	// exactly the number of spans dropped.
	Pending uint64
	// Repaired counts the spans exported repaired: a string that was not
	// valid UTF-8 or longer than the byte limit, or an end before the
	// start (ended where it starts).
	Repaired uint64
	// Refused counts the spans not exported because their times lie
	// outside what OTLP carries (1970 to 2262-04-11), from any
	// instrumentation in the process.
	Refused uint64
	// Recovered counts the spans of earlier processes exported from their
	// crash journals ([WithJournal]) that the collector accepted: spans
	// those processes never had confirmed exported, carrying
	// omni.recovered = true. They are not counted in Ended or the other
	// fields above, which count this process's own spans, nor in Lost.
	Recovered uint64
	// RecoveredRejected, RecoveredRefused and RecoveredFailed count the
	// other spans the recovery read from those journals: rejected by the
	// collector of batches it took (its reason logged the first time),
	// refused for times OTLP cannot carry (1970 to 2262-04-11), and in
	// batches whose export failed (left in their journal for the next
	// start, which counts them again). The four are [RecoveryReport]'s
	// Exported, Rejected, Refused and Failed, summed over the recovery's
	// passes.
	RecoveredRejected, RecoveredRefused, RecoveredFailed uint64
}

// Lost returns the spans that did not reach the collector, or that it
// rejected: failed, rejected, refused, plus pending (after Shutdown:
// dropped).
func (s ExportStats) Lost() uint64 { return s.Failed + s.Rejected + s.Refused + s.Pending }

func (s ExportStats) describe() string {
	return fmt.Sprintf("%d of %d spans did not reach the collector (%d failed to export, %d rejected by the collector, %d refused: times OTLP cannot carry, %d dropped: queue full or shutdown deadline)",
		s.Lost(), s.Ended, s.Failed, s.Rejected, s.Refused, s.Pending)
}

type exportCounts struct {
	ended, exported, failed, repaired, refused, rejected atomic.Uint64
	// partialLogged is set once a partial success has been logged.
	partialLogged atomic.Bool
	// dropped counts the spans the queue did not admit (see spanQueue).
	dropped atomic.Uint64
	// held counts the spans admitted and not yet through an export.
	held atomic.Int64
}

func (c *exportCounts) stats() ExportStats {
	// Read the outcomes before the input, so that Pending never underflows
	// while spans are in flight.
	exported, failed, refused, rejected := c.exported.Load(), c.failed.Load(), c.refused.Load(), c.rejected.Load()
	ended := c.ended.Load()
	s := ExportStats{Ended: ended, Exported: exported, Failed: failed, Rejected: rejected, Repaired: c.repaired.Load(), Refused: refused}
	if done := exported + failed + rejected + refused; ended > done {
		s.Pending = ended - done
	}
	return s
}
