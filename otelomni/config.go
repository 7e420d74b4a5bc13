package otelomni

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope name of every span otelomni makes.
const ScopeName = "github.com/otelomni/otelomni/otelomni"

// config is what the options set; the zero config uses the global providers
// at call time.
type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagators    propagation.TextMapPropagator
	denoiseSteps   bool
	contentMax     int
}

// Option configures an [Instrumenter].
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTracerProvider makes the instrumenter use tp. Without it, or with a nil
// tp, the global provider is read at each call, so installing an SDK later
// (otel.SetTracerProvider) turns otelomni on.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.tracerProvider = tp
		}
	})
}

// WithMeterProvider makes the instrumenter record its histograms (see
// docs/metrics.md) through mp. Without it, or with a nil mp, the global
// provider is read at each call, so installing a metrics SDK later turns the
// histograms on. Metrics count every request, sampled or not.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.meterProvider = mp
		}
	})
}

// WithPropagators makes the instrumenter carry trace context across
// processes with p. Without it, or with a nil p, the global propagators are
// read at each call; when those are the default no-op propagator, W3C trace
// context is used so that cross-process traces never break silently.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return optionFunc(func(c *config) {
		if p != nil {
			c.propagators = p
		}
	})
}

// WithDenoiseSteps switches per-step spans (omni.diffusion.denoise_step, one
// per step, under forward) on or off. They are off by default: a 50-step
// request makes 50 more spans.
func WithDenoiseSteps(on bool) Option {
	return optionFunc(func(c *config) { c.denoiseSteps = on })
}

// DefaultContentCaptureBytes is the length a captured prompt is truncated to
// when WithContentCapture is given 0: enough to recognise a prompt, too
// short to carry a document.
const DefaultContentCaptureBytes = 256

// WithContentCapture records request content (RequestInfo.Prompt) on the
// request span as omni.request.prompt, truncated to maxBytes bytes (at a
// UTF-8 boundary; 0 means DefaultContentCaptureBytes). Without it, content
// is never recorded: prompts, images and audio can be private.
func WithContentCapture(maxBytes int) Option {
	return optionFunc(func(c *config) {
		if maxBytes <= 0 {
			maxBytes = DefaultContentCaptureBytes
		}
		c.contentMax = maxBytes
	})
}
