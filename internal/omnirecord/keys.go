package omnirecord

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// Attribute keys of imported spans beyond the project's own conventions:
// how exact an imported duration is, and what its writer did to it.
const (
	// ResolutionKey: the step of the duration as its writer wrote it, in
	// ms (1 for int()-truncated milliseconds, 10 for [OmniTiming]'s
	// seconds with two decimals). Absent when written at full precision.
	ResolutionKey = attribute.Key("omni.timing.resolution_ms")
	// SummedKey: the writer added the duration over the request's outputs
	// (diffusion values) or the transfer's chunks (bytes and send time);
	// the parts cannot be told apart.
	SummedKey = attribute.Key("omni.timing.summed")
	// UnmeasuredZeroKey: the fields of this scope whose 0 was read as "not
	// measured", because their writer puts 0 when it measured nothing.
	UnmeasuredZeroKey = attribute.Key("omni.timing.unmeasured_zero")
	// TransferResolutionKey and TransferSummedKey say the same of the
	// hand-over into a stage, on the stage's span.
	TransferResolutionKey = attribute.Key("omni.timing.transfer_resolution_ms")
	TransferSummedKey     = attribute.Key("omni.timing.transfer_summed")
	// SourceKey names the form a request was imported from.
	SourceKey = attribute.Key("omni.import.source")
)

// qualityAttrs appends the attributes that say q.
func qualityAttrs(kv []attribute.KeyValue, q Quality) []attribute.KeyValue {
	if q.Resolution > 0 {
		kv = append(kv, ResolutionKey.Float64(float64(q.Resolution)/float64(time.Millisecond)))
	}
	if q.Summed {
		kv = append(kv, SummedKey.Bool(true))
	}
	return kv
}
