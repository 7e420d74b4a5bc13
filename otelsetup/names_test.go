// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The tests name the warnings' and errors' types to read their fields.
type (
	EnvError  = envError
	LossError = lossError
)

// DefaultAttributeValueLengthLimit is the bound the tests measure against.
const DefaultAttributeValueLengthLimit = defaultAttributeValueLengthLimit

// The settings no user program needs, for the tests only: an exporter in
// place of the environment's, the batch processor's options after the
// OTEL_BSP_* variables, and no metric reader from the environment.

func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return optionFunc(func(c *config) { c.exporter = exp })
}

func WithBatchOptions(opts ...sdktrace.BatchSpanProcessorOption) Option {
	return optionFunc(func(c *config) { c.batchOptions = append(c.batchOptions, opts...) })
}

func WithoutMetrics() Option { return optionFunc(func(c *config) { c.noMetrics = true }) }
