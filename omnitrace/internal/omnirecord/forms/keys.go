// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
)

// The keys of imported spans are attrs' (the project's conventions).
const (
	ResolutionKey         = attrs.ResolutionKey
	SummedKey             = attrs.SummedKey
	UnmeasuredZeroKey     = attrs.UnmeasuredZeroKey
	TransferResolutionKey = attrs.TransferResolutionKey
	TransferSummedKey     = attrs.TransferSummedKey
	SourceKey             = attrs.ImportSourceKey
)

// QualityAttrs appends the attributes that say q.
func QualityAttrs(kv []attribute.KeyValue, q Quality) []attribute.KeyValue {
	if q.Resolution > 0 {
		kv = append(kv, ResolutionKey.Float64(float64(q.Resolution)/float64(time.Millisecond)))
	}
	if q.Summed {
		kv = append(kv, SummedKey.Bool(true))
	}
	return kv
}
