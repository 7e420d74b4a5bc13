// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// maxLogBody bounds a log record's body (its message), in bytes: the
// attribute limits do not apply to it.
const maxLogBody = maxValueLength

// newLoggerProvider builds the logger provider: the SDK's batch log
// processor with the OTEL_BLRP_* settings and the log record limits that
// readEnv read, behind boundedLogs.
func newLoggerProvider(exp sdklog.Exporter, res *resource.Resource, env *environ) (*sdklog.LoggerProvider, *sdklog.BatchProcessor) {
	queue := env.int(defaultLogQueue, "OTEL_BLRP_MAX_QUEUE_SIZE")
	bp := sdklog.NewBatchProcessor(exp,
		sdklog.WithMaxQueueSize(queue),
		sdklog.WithExportMaxBatchSize(env.int(int64(min(defaultLogBatch, queue)), "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE")),
		sdklog.WithExportInterval(env.duration(defaultLogDelay, "OTEL_BLRP_SCHEDULE_DELAY")),
		sdklog.WithExportTimeout(env.duration(defaultLogTimeout, "OTEL_BLRP_EXPORT_TIMEOUT")))
	// OTEL_LOGRECORD_*, else the general OTEL_ATTRIBUTE_* limits, else the
	// SDK's count and otelsetup's value length.
	maxValue := env.int(defaultAttributeValueLengthLimit,
		"OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
	lp := sdklog.NewLoggerProvider(
		sdklog.WithResource(res),
		sdklog.WithProcessor(boundedLogs{BatchProcessor: bp, maxValue: maxValue}),
		sdklog.WithAttributeCountLimit(env.int(defaultCount,
			"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT")),
		sdklog.WithAttributeValueLengthLimit(maxValue))
	return lp, bp
}

// boundedLogs hands the batch processor each record with its strings
// bounded and its own. The SDK cuts an attribute value to the value limit
// (in characters) without copying it, and does not bound a body: a queued
// record would keep a 10 MB original alive. A string attribute of the
// limit in bytes or more is cut to it, at a rune boundary, and copied; a
// body longer than maxLogBody is cut to it. A record of short strings
// costs one walk of its attributes and no allocation.
type boundedLogs struct {
	*sdklog.BatchProcessor
	maxValue int
}

func (p boundedLogs) OnEmit(ctx context.Context, r *sdklog.Record) error {
	if b := r.Body(); b.Type() == attribute.STRING && len(b.AsString()) > maxLogBody {
		r.SetBody(attribute.StringValue(sanitize.String(b.AsString(), maxLogBody)))
	}
	long := false
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		long = longKV(kv, p.maxValue)
		return !long
	})
	if long {
		kvs := make([]attribute.KeyValue, 0, r.AttributesLen())
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			kvs = append(kvs, ownKV(sanitize.KeyValue(kv, maxKeyBytes, p.maxValue), p.maxValue))
			return true
		})
		r.SetAttributes(kvs...)
	}
	return p.BatchProcessor.OnEmit(ctx, r)
}

// longKV reports whether kv's key is longer than maxKeyBytes, or a string
// value of it at least maxValue bytes long: cut by the SDK, or about to
// be.
func longKV(kv attribute.KeyValue, maxValue int) bool {
	if len(kv.Key) > maxKeyBytes {
		return true
	}
	switch kv.Value.Type() {
	case attribute.STRING:
		return len(kv.Value.AsString()) >= maxValue
	case attribute.STRINGSLICE:
		for _, v := range kv.Value.AsStringSlice() {
			if len(v) >= maxValue {
				return true
			}
		}
	}
	return false
}

// ownKV returns kv with each string value of maxValue bytes or more
// copied.
func ownKV(kv attribute.KeyValue, maxValue int) attribute.KeyValue {
	switch kv.Value.Type() {
	case attribute.STRING:
		if v := kv.Value.AsString(); len(v) >= maxValue {
			kv.Value = attribute.StringValue(strings.Clone(v))
		}
	case attribute.STRINGSLICE:
		ss := kv.Value.AsStringSlice() // a copy
		for j, v := range ss {
			if len(v) >= maxValue {
				ss[j] = strings.Clone(v)
			}
		}
		kv.Value = attribute.StringSliceValue(ss)
	}
	return kv
}
