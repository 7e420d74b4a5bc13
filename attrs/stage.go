package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys on a stage span (omni.stage), or on the request span of a
// single-stage pipeline, and on the exec span.
const (
	// StageIDKey is the stage's index in the pipeline.
	StageIDKey = attribute.Key("omni.stage.id")
	// StageNameKey is the stage's name in the pipeline's configuration.
	StageNameKey = attribute.Key("omni.stage.name")
	// StageTypeKey is the kind of engine that runs the stage.
	StageTypeKey = attribute.Key("omni.stage.type")
	// ReplicaIDKey names the replica of the stage that served the request.
	ReplicaIDKey = attribute.Key("omni.replica.id")
	// InputTokensKey is the GenAI convention's count of input tokens.
	InputTokensKey = attribute.Key("gen_ai.usage.input_tokens")
	// OutputTokensKey is the GenAI convention's count of output tokens.
	OutputTokensKey = attribute.Key("gen_ai.usage.output_tokens")
	// NumPreemptionsKey counts the times an LLM stage preempted the request.
	NumPreemptionsKey = attribute.Key("omni.llm.num_preemptions")
	// BatchIDKey names the engine batch that ran the request.
	BatchIDKey = attribute.Key("omni.batch.id")
	// BatchSizeKey is the number of requests in that batch.
	BatchSizeKey = attribute.Key("omni.batch.size")
)

// StageID returns the omni.stage.id attribute. Example: 0.
func StageID(v int) attribute.KeyValue { return StageIDKey.Int(v) }

// StageName returns the omni.stage.name attribute. Example: "thinker".
func StageName(v string) attribute.KeyValue { return StageNameKey.String(v) }

// StageType returns the omni.stage.type attribute. Example: [StageDiffusion].
func StageType(v string) attribute.KeyValue { return StageTypeKey.String(v) }

// ReplicaID returns the omni.replica.id attribute. Example: "dit-1".
func ReplicaID(v string) attribute.KeyValue { return ReplicaIDKey.String(v) }

// InputTokens returns the gen_ai.usage.input_tokens attribute (tokens).
// Example: 512.
func InputTokens(v int) attribute.KeyValue { return InputTokensKey.Int(v) }

// OutputTokens returns the gen_ai.usage.output_tokens attribute (tokens).
// Example: 128.
func OutputTokens(v int) attribute.KeyValue { return OutputTokensKey.Int(v) }

// NumPreemptions returns the omni.llm.num_preemptions attribute (count).
// Example: 1.
func NumPreemptions(v int) attribute.KeyValue { return NumPreemptionsKey.Int(v) }

// BatchID returns the omni.batch.id attribute. Example: "step-1842".
func BatchID(v string) attribute.KeyValue { return BatchIDKey.String(v) }

// BatchSize returns the omni.batch.size attribute (requests). Example: 4.
func BatchSize(v int) attribute.KeyValue { return BatchSizeKey.Int(v) }

// Values of omni.stage.type.
const (
	StageLLM       = "llm"
	StageDiffusion = "diffusion"
	StageOther     = "other"
)
