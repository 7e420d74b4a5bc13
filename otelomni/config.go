// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope name of every span and instrument
// otelomni makes.
const ScopeName = "github.com/otelomni/otelomni/otelomni"

// Defaults of the options, each stated in its option's doc.
const (
	// defaultContentCaptureBytes is the length a captured prompt is cut to
	// when WithContentCapture is given 0: enough to recognise a prompt, too
	// short to carry a document.
	defaultContentCaptureBytes = 256
	// valueLimit bounds, in bytes, every string otelomni records: request
	// ids, model, stage and replica names, connectors, error messages and
	// the string values of attributes handed to it, each cut at a UTF-8
	// boundary and copied, so that a cut value never keeps a large
	// original alive. 1 KiB keeps every real id and name whole and bounds
	// what a hostile client can make an engine hold; the SDK's span limits
	// (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT) may cut further on export.
	valueLimit = 1024
	// defaultMetricModelLimit is the number of distinct models the
	// histograms keep a series for; see WithMetricModelLimit.
	defaultMetricModelLimit = 64
	// defaultProviderName is gen_ai.provider.name on the GenAI
	// instruments when WithProviderName is not given: the conventions'
	// value for a provider they do not list.
	defaultProviderName = "_OTHER"
)

// maxKeyBytes bounds the keys of attributes handed to otelomni.
const maxKeyBytes = 256

// config is what the options set.
type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	propagators    propagation.TextMapPropagator
	denoiseSteps   bool
	contentMax     int
	valueMax       int
	modelLimit     int
	providerName   string
	publicEndpoint func(context.Context) bool
}

func newConfig(opts []Option) config {
	c := config{valueMax: valueLimit, modelLimit: defaultMetricModelLimit, providerName: defaultProviderName}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// Option configures an [Instrumenter].
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// panics reports whether f panics: the first call on a nil pointer given
// for an interface (a nil *sdktrace.TracerProvider, say) does.
func panics(f func()) (p bool) {
	defer func() {
		if recover() != nil {
			p = true
		}
	}()
	f()
	return false
}

// WithTracerProvider makes the instrumenter use tp. Without it, or with a
// nil tp (or a nil pointer, such as a nil *sdktrace.TracerProvider), it uses
// the global provider as it is when [New] runs: before an SDK is installed
// that provider forwards to the one installed later
// (otel.SetTracerProvider), so installing an SDK turns otelomni on.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.tracerProvider = tp
		}
	})
}

// WithMeterProvider makes the instrumenter record its histograms (see
// docs/metrics.md) through mp. Without it, or with a nil mp (or a nil
// pointer), it uses the global meter provider, which likewise forwards to an
// SDK installed later. Metrics count every request, sampled or not.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.meterProvider = mp
		}
	})
}

// WithPropagators makes the instrumenter carry trace context across
// processes with p, as it is (one that carries nothing sends nothing).
// Without it, or with a nil p (or a nil pointer), the global propagator is
// read at each call (otel.GetTextMapPropagator), as in all OpenTelemetry
// instrumentation: otelsetup.Setup installs W3C trace context and baggage
// there (or what OTEL_PROPAGATORS names). The API's global before a program
// sets one carries nothing; the first Inject or Extract with a propagator
// that carries no fields says so once through the OpenTelemetry error
// handler.
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

// WithContentCapture records request content (RequestInfo.Prompt) on the
// request span as omni.request.prompt, cut to maxBytes bytes at a UTF-8
// boundary (0 or less means 256 bytes: enough to recognise a prompt, too
// short to carry a document). Without it, content
// is never recorded: prompts, images and audio can be private.
func WithContentCapture(maxBytes int) Option {
	return optionFunc(func(c *config) {
		if maxBytes <= 0 {
			maxBytes = defaultContentCaptureBytes
		}
		c.contentMax = maxBytes
	})
}

// WithMetricModelLimit bounds the distinct values of gen_ai.request.model
// on the histograms to n: the model comes from the client, and every
// distinct value is a series a metrics backend keeps. Beyond n models, a
// measurement's model is recorded as "_OTHER" (spans keep the real model).
// The default, and what n of 0 or less keeps, is 64 models.
func WithMetricModelLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.modelLimit = n
		}
	})
}

// WithProviderName sets gen_ai.provider.name on the GenAI instruments
// (gen_ai.server.request.duration, gen_ai.server.time_to_first_token), which
// the conventions require: the name of the serving stack, such as
// "vllm_omni". Without it, or with "", "_OTHER": the conventions' value for
// a provider they do not list.
func WithProviderName(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.providerName = name
		}
	})
}

// WithPublicEndpoint makes a request span the root of a new trace, with a
// link to the trace context that came with the request, for an engine or
// gateway that faces clients it does not trust. fn decides per request: it
// gets the context given to [Instrumenter.Start] and returns true when the
// incoming trace context is not to be trusted; a nil fn trusts no request
// (every request with an incoming context starts a new trace). Without the
// option, an incoming traceparent decides the trace id and, under a
// parent-based sampler, whether the request is sampled: a client can force
// recording or hide a request. It does not touch baggage: to drop a
// client's baggage, use propagators without the baggage propagator where
// requests come in.
func WithPublicEndpoint(fn func(ctx context.Context) bool) Option {
	if fn == nil {
		fn = func(context.Context) bool { return true }
	}
	return optionFunc(func(c *config) { c.publicEndpoint = fn })
}
