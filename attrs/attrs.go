// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys on the request span (omni.request).
const (
	// RequestIDKey is the request id exactly as the engine gave it, never
	// parsed (string). Example: "chatcmpl-ac59cea85b422f04".
	RequestIDKey = attribute.Key("omni.request.id")
	// OutputModalityKey is the kind of output the request produces (string).
	// Example: [ModalityImage].
	OutputModalityKey = attribute.Key("omni.output.modality")
	// NumInferenceStepsKey is the number of denoising steps requested (int,
	// steps). Example: 50.
	NumInferenceStepsKey = attribute.Key("omni.diffusion.num_inference_steps")
	// GuidanceScaleKey is the classifier-free guidance scale requested
	// (double, dimensionless). Example: 7.5; 0 is a real value (guidance off).
	GuidanceScaleKey = attribute.Key("omni.diffusion.guidance_scale")
	// HeightKey is the height of the generated image or video (int, pixels).
	// Example: 1024.
	HeightKey = attribute.Key("omni.diffusion.height")
	// WidthKey is the width of the generated image or video (int, pixels).
	// Example: 1024.
	WidthKey = attribute.Key("omni.diffusion.width")
	// NumFramesKey is the number of frames of a generated video (int,
	// frames). Example: 81.
	NumFramesKey = attribute.Key("omni.diffusion.num_frames")
	// PromptKey is the request's prompt, recorded only when the user opts
	// in (otelomni.WithContentCapture), truncated (string).
	PromptKey = attribute.Key("omni.request.prompt")
)

// Values of omni.output.modality.
const (
	ModalityImage  = "image"
	ModalityVideo  = "video"
	ModalityAudio  = "audio"
	ModalityText   = "text"
	ModalityLatent = "latent"
)

// Values of error.type that otelomni defines; any other failure carries the
// error's own type.
const (
	// ErrorClientAbort: the client aborted the request, possibly before it
	// was admitted (then it has no queue wait).
	ErrorClientAbort = "client_abort"
	// ErrorClientDisconnect: the client went away while the request ran.
	ErrorClientDisconnect = "client_disconnect"
	// ErrorStageError: a pipeline stage failed the request.
	ErrorStageError = "stage_error"
	// ErrorTimeout: the request ran out of time.
	ErrorTimeout = "timeout"
)
