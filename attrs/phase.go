// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys on phase spans, outputs and transfers.
const (
	// PhaseKey is the phase id of a phase span, so that one span-metrics
	// dimension groups every phase (string). Example: "queue_wait".
	PhaseKey = attribute.Key("omni.phase")
	// StepKey is the 0-based index of a denoise_step span (int). Example: 17.
	StepKey = attribute.Key("omni.diffusion.step")
	// OutputIndexKey is the 0-based index of an output of a streaming
	// request (int). Example: 2.
	OutputIndexKey = attribute.Key("omni.output.index")
	// OutputFinalKey tells whether an output is the one that finishes its
	// stage (bool).
	OutputFinalKey = attribute.Key("omni.output.final")
	// TransferFromStageKey is the stage id that sent a hand-over (int).
	TransferFromStageKey = attribute.Key("omni.transfer.from_stage")
	// TransferToStageKey is the stage id that received a hand-over (int).
	TransferToStageKey = attribute.Key("omni.transfer.to_stage")
	// TransferBytesKey is the size of a hand-over's payload (int, bytes).
	// Example: 8388608.
	TransferBytesKey = attribute.Key("omni.transfer.bytes")
	// TransferConnectorKey names the connector that carried a hand-over
	// (string). Example: "shm".
	TransferConnectorKey = attribute.Key("omni.transfer.connector")
	// ReconstructedKey marks spans rebuilt from a timing record, whose start
	// times were placed by the documented phase order, not read from a clock
	// (bool).
	ReconstructedKey = attribute.Key("omni.timing.reconstructed")
)
