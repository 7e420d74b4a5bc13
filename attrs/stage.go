// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys on a stage span (omni.stage), or on the request span of a
// single-stage pipeline, and on the exec span.
const (
	// StageIDKey is the stage's index in the pipeline (int). Example: 0.
	StageIDKey = attribute.Key("omni.stage.id")
	// StageNameKey is the stage's name in the pipeline's configuration
	// (string). Example: "thinker".
	StageNameKey = attribute.Key("omni.stage.name")
	// StageTypeKey is the kind of engine that runs the stage (string).
	// Example: [StageDiffusion].
	StageTypeKey = attribute.Key("omni.stage.type")
	// ReplicaIDKey names the replica of the stage that served the request
	// (string). Example: "dit-1".
	ReplicaIDKey = attribute.Key("omni.replica.id")
	// NumPreemptionsKey counts the times an LLM stage preempted the request
	// (int). Example: 1.
	NumPreemptionsKey = attribute.Key("omni.llm.num_preemptions")
	// BatchIDKey names the engine batch that ran the request (string).
	// Example: "step-1842".
	BatchIDKey = attribute.Key("omni.batch.id")
	// BatchSizeKey is the number of requests in that batch (int, requests).
	// Example: 4.
	BatchSizeKey = attribute.Key("omni.batch.size")
)

// Values of omni.stage.type.
const (
	StageLLM       = "llm"
	StageDiffusion = "diffusion"
	StageOther     = "other"
)
