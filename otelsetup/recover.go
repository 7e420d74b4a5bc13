// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/otelsetup/internal/journal"
)

// RecoveryReport says what a recovery of crash journals found and did:
// [Recover]'s, or a restart's ([WithJournal]), which go the same way.
type RecoveryReport struct {
	// Files counts the journals of dead processes read; Removed, those
	// removed, every span they held exported, rejected or refused.
	Files, Removed int
	// Live counts the journals whose process still runs, and the files a
	// live process is making its journal in, left alone.
	Live int
	// Unreadable counts the files named like journals that cannot be
	// read (another format version, a damaged header, not a regular
	// file, no permission), left in place and named in the error.
	Unreadable int
	// Unfinished counts the files of processes that died while making
	// their journal, before it held any span, removed.
	Unfinished int
	// Ended and Open count the spans that left the journals: those that
	// had ended, and those still open at the death (ended then, with
	// status Error and error.type = process_died). Each was exported,
	// rejected or refused: Ended + Open = Exported + Rejected + Refused.
	Ended, Open int
	// Exported counts the spans the destination accepted.
	Exported int
	// Rejected counts the spans the collector rejected of batches it took
	// (an OTLP partial success); its reason is logged through the
	// OpenTelemetry error handler the first time. They are not sent again.
	Rejected int
	// Refused counts the spans not sent because their times lie outside
	// what OTLP carries (1970 to 2262-04-11), as the live path refuses
	// them. They are not sent again.
	Refused int
	// Failed counts the spans of batches whose export failed (the
	// destination was down, refused the request, or timed out): each such
	// batch and the rest of its journal are left for the next recovery.
	Failed int
	// Torn and Corrupt count the stretches and records skipped: cut short
	// by the death or torn by a power loss, or not decodable.
	Torn, Corrupt int
}

// Recover exports, through exp, the spans that dead processes journalled
// in dir ([WithJournal]) and never had confirmed exported, and removes
// their files and the files of processes that died making theirs: what
// the next Setup with the same journal directory does, through the same
// path (the same refusal of times OTLP cannot carry, the same repair of
// strings within OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, the same
// handling of a partial success, the same counts). A limit variable that
// is not valid is warned about and ignored, as Setup does. Exports are
// made one at a time; exp is not shut down.
func Recover(ctx context.Context, dir string, exp sdktrace.SpanExporter) (RecoveryReport, error) {
	if exp == nil {
		return RecoveryReport{}, errors.New("otelsetup: Recover needs an exporter")
	}
	env, warnings := readEnv()
	for _, w := range warnings {
		if strings.Contains(w.Name, "ATTRIBUTE_VALUE_LENGTH_LIMIT") {
			otel.Handle(w)
		}
	}
	return newRecoveryExporter(exp, spanLimits(env).AttributeValueLengthLimit).recoverDir(ctx, dir)
}

// recoveryExporter is the one way recovered spans leave a process, at a
// restart and in [Recover] alike: the live path's safe exporter over the
// destination (its time refusal, string repair and partial-success
// handling), with counts of the batches it was given.
type recoveryExporter struct {
	// mu makes one export at a time: a batch's counts are the safe
	// exporter's change over it.
	mu   sync.Mutex
	safe safeExporter
	c    exportCounts // the safe exporter's
	// The recovery's counts (see RecoveryReport), read by ExportStats
	// while an export may be in flight.
	exported, rejected, refused, failed atomic.Uint64
}

func newRecoveryExporter(exp sdktrace.SpanExporter, maxValue int) *recoveryExporter {
	r := &recoveryExporter{}
	r.safe = safeExporter{exp: exp, c: &r.c, maxValue: maxValue}
	return r
}

func (r *recoveryExporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	exported, rejected, refused := r.c.exported.Load(), r.c.rejected.Load(), r.c.refused.Load()
	if err := r.safe.ExportSpans(ctx, ss); err != nil {
		// None of the batch leaves the journal, refused spans included:
		// the next recovery counts them again.
		r.failed.Add(uint64(len(ss)))
		return err
	}
	r.exported.Add(r.c.exported.Load() - exported)
	r.rejected.Add(r.c.rejected.Load() - rejected)
	r.refused.Add(r.c.refused.Load() - refused)
	return nil
}

// Shutdown does nothing: the destination is the caller's to shut down.
func (r *recoveryExporter) Shutdown(context.Context) error { return nil }

// recoveryCounts are a recoveryExporter's counts at one moment.
type recoveryCounts struct{ exported, rejected, refused, failed uint64 }

func (r *recoveryExporter) counts() recoveryCounts {
	return recoveryCounts{r.exported.Load(), r.rejected.Load(), r.refused.Load(), r.failed.Load()}
}

// recoverDir recovers the dead processes' journals in dir through r: the
// one recovery of a restart's passes and of [Recover].
func (r *recoveryExporter) recoverDir(ctx context.Context, dir string) (RecoveryReport, error) {
	before := r.counts()
	rep, err := journal.Recover(ctx, dir, r)
	after := r.counts()
	return RecoveryReport{
		Files: rep.Files, Removed: rep.Removed, Live: rep.Live, Unreadable: rep.Unreadable, Unfinished: rep.Unfinished,
		Ended: rep.Ended, Open: rep.Open,
		Exported: int(after.exported - before.exported), Rejected: int(after.rejected - before.rejected),
		Refused: int(after.refused - before.refused), Failed: int(after.failed - before.failed),
		Torn: rep.Torn, Corrupt: rep.Corrupt,
	}, err
}
