// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/otelsetup/internal/journal"
)

// RecoveryReport says what [Recover] found and did.
type RecoveryReport struct {
	// Files counts the journals of dead processes read; Removed, those
	// removed, every span they held exported.
	Files, Removed int
	// Live counts the journals whose process still runs, left alone.
	Live int
	// Unreadable counts the files named like journals that this build
	// cannot read (another format version, a damaged header), left in
	// place.
	Unreadable int
	// Ended counts the spans exported as they ended; Open, those still
	// open at the death, exported as ended then with status Error.
	Ended, Open int
	// Torn and Corrupt count the stretches and records skipped: cut short
	// by the death or torn by a power loss, or not decodable.
	Torn, Corrupt int
}

// Recover exports, through exp, the spans that dead processes journalled
// in dir ([WithJournal]) and never had confirmed exported, and removes
// their files: what the next Setup with the same journal directory does.
func Recover(ctx context.Context, dir string, exp sdktrace.SpanExporter) (RecoveryReport, error) {
	c := &exportCounts{}
	rep, err := journal.Recover(ctx, dir, &safeExporter{exp: exp, c: c, maxValue: defaultAttributeValueLengthLimit})
	return RecoveryReport(rep), err
}
