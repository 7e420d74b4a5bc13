package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys on phase spans, outputs and transfers.
const (
	// PhaseKey is the phase id of a phase span, so that one span-metrics
	// dimension groups every phase.
	PhaseKey = attribute.Key("omni.phase")
	// StepKey is the 0-based index of a denoise_step span.
	StepKey = attribute.Key("omni.diffusion.step")
	// OutputIndexKey is the 0-based index of an output of a streaming request.
	OutputIndexKey = attribute.Key("omni.output.index")
	// OutputFinalKey tells whether an output is the one that finishes its stage.
	OutputFinalKey = attribute.Key("omni.output.final")
	// TransferFromStageKey is the stage id that sent a hand-over.
	TransferFromStageKey = attribute.Key("omni.transfer.from_stage")
	// TransferToStageKey is the stage id that received a hand-over.
	TransferToStageKey = attribute.Key("omni.transfer.to_stage")
	// TransferBytesKey is the size of a hand-over's payload.
	TransferBytesKey = attribute.Key("omni.transfer.bytes")
	// TransferConnectorKey names the connector that carried a hand-over.
	TransferConnectorKey = attribute.Key("omni.transfer.connector")
	// ReconstructedKey marks spans rebuilt from a timing record, whose start
	// times were placed by the documented phase order, not read from a clock.
	ReconstructedKey = attribute.Key("omni.timing.reconstructed")
	// RecordKeyPrefix prefixes the keys of a timing record that otelomni
	// does not know, kept as attributes rather than dropped.
	RecordKeyPrefix = "omni.record."
)

// Phase returns the omni.phase attribute. Example: "queue_wait".
func Phase(id string) attribute.KeyValue { return PhaseKey.String(id) }

// Step returns the omni.diffusion.step attribute (0-based). Example: 17.
func Step(v int) attribute.KeyValue { return StepKey.Int(v) }

// OutputIndex returns the omni.output.index attribute (0-based). Example: 2.
func OutputIndex(v int) attribute.KeyValue { return OutputIndexKey.Int(v) }

// OutputFinal returns the omni.output.final attribute. Example: true.
func OutputFinal(v bool) attribute.KeyValue { return OutputFinalKey.Bool(v) }

// TransferFromStage returns the omni.transfer.from_stage attribute. Example: 0.
func TransferFromStage(v int) attribute.KeyValue { return TransferFromStageKey.Int(v) }

// TransferToStage returns the omni.transfer.to_stage attribute. Example: 1.
func TransferToStage(v int) attribute.KeyValue { return TransferToStageKey.Int(v) }

// TransferBytes returns the omni.transfer.bytes attribute (bytes). Example:
// 8388608.
func TransferBytes(v int64) attribute.KeyValue { return TransferBytesKey.Int64(v) }

// TransferConnector returns the omni.transfer.connector attribute. Example:
// "shm".
func TransferConnector(v string) attribute.KeyValue { return TransferConnectorKey.String(v) }

// Reconstructed returns the omni.timing.reconstructed attribute. Example: true.
func Reconstructed(v bool) attribute.KeyValue { return ReconstructedKey.Bool(v) }

// RecordKey returns the attribute key under which an unknown key of a timing
// record is kept. Example: RecordKey("cfg_parallel") is
// "omni.record.cfg_parallel".
func RecordKey(key string) attribute.Key { return attribute.Key(RecordKeyPrefix + key) }
