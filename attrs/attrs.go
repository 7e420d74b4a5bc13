package attrs

import "go.opentelemetry.io/otel/attribute"

// Keys on the request span (omni.request).
const (
	// RequestIDKey is the request id exactly as the engine gave it.
	RequestIDKey = attribute.Key("omni.request.id")
	// RequestModelKey is the GenAI convention's name of the requested model.
	RequestModelKey = attribute.Key("gen_ai.request.model")
	// OperationNameKey is the GenAI convention's operation name.
	OperationNameKey = attribute.Key("gen_ai.operation.name")
	// OutputModalityKey is the kind of output the request produces.
	OutputModalityKey = attribute.Key("omni.output.modality")
	// NumInferenceStepsKey is the number of denoising steps requested.
	NumInferenceStepsKey = attribute.Key("omni.diffusion.num_inference_steps")
	// GuidanceScaleKey is the classifier-free guidance scale requested.
	GuidanceScaleKey = attribute.Key("omni.diffusion.guidance_scale")
	// HeightKey is the height of the generated image or video.
	HeightKey = attribute.Key("omni.diffusion.height")
	// WidthKey is the width of the generated image or video.
	WidthKey = attribute.Key("omni.diffusion.width")
	// NumFramesKey is the number of frames of a generated video.
	NumFramesKey = attribute.Key("omni.diffusion.num_frames")
	// OutputTypeKey is the GenAI convention's requested output type, set
	// beside omni.output.modality when the conventions have a value for
	// the modality (image, speech, text).
	OutputTypeKey = attribute.Key("gen_ai.output.type")
	// ProviderNameKey is the GenAI convention's name of the serving stack,
	// on the GenAI instruments.
	ProviderNameKey = attribute.Key("gen_ai.provider.name")
	// ErrorTypeKey is the OpenTelemetry convention's class of a failure.
	ErrorTypeKey = attribute.Key("error.type")
	// PromptKey is the request's prompt, recorded only when the user opts
	// in (otelomni.WithContentCapture), truncated.
	PromptKey = attribute.Key("omni.request.prompt")
)

// RequestID returns the omni.request.id attribute: the request id exactly as
// given, never parsed. Example: "chatcmpl-ac59cea85b422f04".
func RequestID(v string) attribute.KeyValue { return RequestIDKey.String(v) }

// RequestModel returns the gen_ai.request.model attribute. Example:
// "Qwen/Qwen-Image".
func RequestModel(v string) attribute.KeyValue { return RequestModelKey.String(v) }

// OperationName returns the gen_ai.operation.name attribute. Example:
// [OperationGenerateContent].
func OperationName(v string) attribute.KeyValue { return OperationNameKey.String(v) }

// OutputModality returns the omni.output.modality attribute. Example:
// [ModalityImage].
func OutputModality(v string) attribute.KeyValue { return OutputModalityKey.String(v) }

// OutputType returns the gen_ai.output.type attribute for an omni output
// modality, and false for a modality the GenAI conventions have no value
// for (video, latent). Example: ModalityAudio gives "speech".
func OutputType(modality string) (attribute.KeyValue, bool) {
	switch modality {
	case ModalityImage:
		return OutputTypeKey.String("image"), true
	case ModalityAudio:
		return OutputTypeKey.String("speech"), true
	case ModalityText:
		return OutputTypeKey.String("text"), true
	}
	return attribute.KeyValue{}, false
}

// ProviderName returns the gen_ai.provider.name attribute. Example:
// "vllm_omni".
func ProviderName(v string) attribute.KeyValue { return ProviderNameKey.String(v) }

// NumInferenceSteps returns the omni.diffusion.num_inference_steps attribute
// (steps). Example: 50.
func NumInferenceSteps(v int) attribute.KeyValue { return NumInferenceStepsKey.Int(v) }

// GuidanceScale returns the omni.diffusion.guidance_scale attribute
// (dimensionless). Example: 7.5; 0 is a real value (guidance off).
func GuidanceScale(v float64) attribute.KeyValue { return GuidanceScaleKey.Float64(v) }

// Height returns the omni.diffusion.height attribute (pixels). Example: 1024.
func Height(v int) attribute.KeyValue { return HeightKey.Int(v) }

// Width returns the omni.diffusion.width attribute (pixels). Example: 1024.
func Width(v int) attribute.KeyValue { return WidthKey.Int(v) }

// NumFrames returns the omni.diffusion.num_frames attribute (frames).
// Example: 81.
func NumFrames(v int) attribute.KeyValue { return NumFramesKey.Int(v) }

// Prompt returns the omni.request.prompt attribute. Example: "a red fox in
// the snow". Request content is recorded only on opt-in.
func Prompt(v string) attribute.KeyValue { return PromptKey.String(v) }

// ErrorType returns the error.type attribute. Example: [ErrorClientAbort].
func ErrorType(v string) attribute.KeyValue { return ErrorTypeKey.String(v) }

// Values of gen_ai.operation.name.
const (
	// OperationGenerateContent is the operation of every omni request.
	OperationGenerateContent = "generate_content"
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
	// ErrorProcessDied: the process died (SIGKILL, the OOM killer, a fatal
	// runtime error) while the span was open; set on spans recovered from
	// a crash journal (see [RecoveredKey]).
	ErrorProcessDied = "process_died"
)
