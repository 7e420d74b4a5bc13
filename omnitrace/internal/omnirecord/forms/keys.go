// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"go.opentelemetry.io/otel/attribute"
)

// The keys of imported spans are attrs' (the project's conventions).
const (
	ResolutionKey         = omnikeys.Resolution
	SummedKey             = omnikeys.Summed
	UnmeasuredZeroKey     = omnikeys.UnmeasuredZero
	TransferResolutionKey = omnikeys.TransferResolution
	TransferSummedKey     = omnikeys.TransferSummed
	SourceKey             = omnikeys.ImportSource
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
