// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/setupopt"
)

// The tests name the errors' types to read their fields.
type (
	EnvError  = envError
	LossError = lossError
)

// DefaultAttributeValueLengthLimit is the bound the tests measure against.
const DefaultAttributeValueLengthLimit = defaultAttributeValueLengthLimit

// The settings of setupopt.Options as options, for the tests; Setup applies
// them as it applies those of its context (TestSetupTakesTheSettingsOfItsContext).
func own(o setupopt.Options) Option { return optionFunc(func(c *config) { applyOwn(c, o) }) }

func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return own(setupopt.Options{SpanExporter: exp})
}

func WithBatchOptions(opts ...sdktrace.BatchSpanProcessorOption) Option {
	return own(setupopt.Options{BatchOptions: opts})
}

func WithoutMetrics() Option { return own(setupopt.Options{NoMetrics: true}) }
