// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Telemetry is what [Setup] built: the providers, the accounting of what
// was exported, and how to flush and shut it all down. The Telemetry that
// Setup returns with an error, or when the SDK is disabled, is a no-op.
type Telemetry struct {
	prop            propagation.TextMapPropagator
	counts          *exportCounts
	queue           *spanQueue
	journal         *crashJournal
	tp              *sdktrace.TracerProvider
	mp              *sdkmetric.MeterProvider
	lp              *sdklog.LoggerProvider
	metrics         string
	shutdownTimeout time.Duration
	exporter        string
	once            sync.Once
	err             error
}

// TextMapPropagator returns the propagator OTEL_PROPAGATORS names, which
// Setup installs as the global one unless [WithoutGlobal] is given (pass it
// to otelomni.WithPropagators then), also when OTEL_SDK_DISABLED is true or
// nothing is exported. On the no-op Telemetry of a Setup that failed, and
// on a nil one, it is W3C trace context and baggage.
func (t *Telemetry) TextMapPropagator() propagation.TextMapPropagator {
	if t == nil || t.prop == nil {
		return defaultPropagator()
	}
	return t.prop
}

// TracerProvider returns the tracer provider; a no-op one when the SDK is
// disabled or nothing is exported.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// MeterProvider returns the meter provider; a no-op one when the SDK is
// disabled or no metric is read.
func (t *Telemetry) MeterProvider() metric.MeterProvider {
	if t == nil || t.mp == nil {
		return metricnoop.NewMeterProvider()
	}
	return t.mp
}

// Enabled reports whether spans are recorded.
func (t *Telemetry) Enabled() bool { return t != nil && t.tp != nil }

// Exporter describes where spans go, for a start-up log line: "none",
// "otlp (grpc) to http://127.0.0.1:4317", "console", ...
func (t *Telemetry) Exporter() string {
	if t == nil || t.exporter == "" {
		return "none"
	}
	return t.exporter
}

// MetricsExporter describes where metrics go, for a start-up log line.
func (t *Telemetry) MetricsExporter() string {
	if t == nil || t.metrics == "" {
		return "none"
	}
	return t.metrics
}

// ExportStats returns the accounting of every span handed to the exporter:
// ended, exported, failed, and pending (after Shutdown: dropped). Zero when
// nothing is exported.
func (t *Telemetry) ExportStats() ExportStats {
	if t == nil || t.counts == nil {
		return ExportStats{}
	}
	s := t.counts.stats()
	if t.journal != nil {
		t.journal.addStats(&s)
	}
	return s
}

// ErrSpansLost is wrapped by the error of [Telemetry.Shutdown] and
// [Telemetry.ForceFlush] when spans did not reach the collector, whatever
// the exporter's protocol: test it with errors.Is(err, ErrSpansLost). The
// error's message gives the counts (from ForceFlush, also those since the
// previous ForceFlush); [Telemetry.ExportStats] gives them as numbers.
var ErrSpansLost = errors.New("spans did not reach the collector")

// lossError reports the spans that did not reach the collector. Its
// ExportStats are the counts since Setup; since, from ForceFlush, those
// since the previous ForceFlush.
type lossError struct {
	ExportStats
	since *lossCounts // ForceFlush's: the losses since the previous one
}

func (e *lossError) Error() string {
	if e.since == nil {
		return "otelsetup: " + e.describe()
	}
	return fmt.Sprintf("otelsetup: %d spans did not reach the collector since the previous flush (%d dropped: queue full, %d failed to export, %d rejected by the collector, %d refused: times OTLP cannot carry); since the start, %s",
		e.since.total(), e.since.dropped, e.since.failed, e.since.rejected, e.since.refused, e.describe())
}

func (e *lossError) Unwrap() error { return ErrSpansLost }

// ForceFlush exports every span, metric and log record ended so far,
// waiting at most until ctx is done. It returns an error wrapping
// [ErrSpansLost] when spans did not reach the collector since the previous
// ForceFlush (or since Setup): dropped because the queue was full, failed
// to export, rejected by the collector, or refused for their times,
// whether the exporter itself reported it or not, over gRPC and HTTP
// alike. Each loss is reported by
// one ForceFlush, and again, in the total, by Shutdown.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil || (t.tp == nil && t.mp == nil && t.lp == nil) {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var errs []error
	if t.journal != nil {
		errs = append(errs, t.journal.waitRecovery(ctx))
	}
	if t.tp != nil {
		errs = append(errs, t.tp.ForceFlush(ctx))
		if t.queue != nil {
			errs = append(errs, t.queue.lossSince())
		}
	}
	if t.mp != nil {
		errs = append(errs, t.mp.ForceFlush(ctx))
	}
	if t.lp != nil {
		errs = append(errs, t.lp.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes what is queued and stops exporting. It returns within
// the Telemetry's shutdown timeout, or ctx's deadline if earlier, even when
// the collector is dead. When spans did not reach the collector (failed to
// export, or dropped from a full queue or at the deadline) it returns an
// error wrapping [ErrSpansLost] with the counts, over gRPC and HTTP alike,
// and logs it once through the OpenTelemetry error handler. With the crash
// journal on, it first lets a recovery in progress finish (within the same
// deadline), and closes the journal after the last export: its file is
// removed when nothing in it is left to send. Calling it again returns the
// first result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil || (t.tp == nil && t.mp == nil && t.lp == nil) {
		return nil
	}
	t.once.Do(func() {
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, t.shutdownTimeout)
		defer cancel()
		var errs []error
		if t.journal != nil {
			// A recovery in progress finishes first, within the deadline:
			// its exports go through the exporter the provider shuts down.
			t.journal.stopRecovery(ctx)
		}
		if t.tp != nil {
			errs = append(errs, t.tp.Shutdown(ctx))
			if s := t.ExportStats(); s.Lost() > 0 {
				loss := &lossError{ExportStats: s}
				otel.Handle(loss)
				errs = append(errs, loss)
			}
		}
		if t.journal != nil {
			// After the provider's last export, which confirms the last
			// spans: the file is removed when nothing in it is left to send.
			if err := t.journal.close(); err != nil {
				otel.Handle(err)
				errs = append(errs, err)
			}
		}
		if t.mp != nil {
			errs = append(errs, t.mp.Shutdown(ctx))
		}
		if t.lp != nil {
			errs = append(errs, t.lp.Shutdown(ctx))
		}
		t.err = errors.Join(errs...)
	})
	return t.err
}
