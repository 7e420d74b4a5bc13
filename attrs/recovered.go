// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys of spans recovered from a crash journal (otelsetup's journal and
// `omnitrace recover`): spans of a process that died before they were
// exported, exported at the next start or by the command.
const (
	// RecoveredKey marks every span rebuilt from a crash journal: one that
	// had ended keeps its own end and status; one still open when its
	// process died ends at the journal's last heartbeat before the death,
	// with status Error and error.type = [ErrorProcessDied] (bool).
	RecoveredKey = attribute.Key("omni.recovered")
)
