// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/sanitize"
)

// str returns s valid and bounded by the value limit, counting a repair.
// The common case, a short valid string, costs one scan and no allocation.
func (in *Instrumenter) str(s string) string {
	return in.strMax(s, in.cfg.valueMax)
}

func (in *Instrumenter) strMax(s string, max int) string {
	if sanitize.Valid(s, max) {
		return s
	}
	in.stats.repairedString()
	return sanitize.String(s, max)
}

// reservedKeys are the keys otelomni sets from a call's own arguments: the
// phase, step and output of a phase span, the identity of a request or
// stage (given at its start, so that samplers see it), a transfer's
// stages, a batch's id and size. A caller gives them through those
// arguments (RequestInfo, StageInfo, StartBatch), or, for a phase's output
// and step, as the attributes of the phase's start, which otelomni reads
// (liveArgsOf); anywhere else, such an attribute is left out.
var reservedKeys = map[attribute.Key]bool{
	attrs.PhaseKey: true, attrs.StepKey: true, attrs.OutputIndexKey: true, attrs.OutputFinalKey: true,
	attrs.RequestIDKey: true, attrs.StageIDKey: true, attrs.StageTypeKey: true, attrs.StageNameKey: true,
	attrs.ReplicaIDKey: true, attrs.TransferFromStageKey: true, attrs.TransferToStageKey: true,
	attrs.BatchIDKey: true, attrs.BatchSizeKey: true, attrs.OutputModalityKey: true,
}

// reservedError reports an attribute a caller gave whose key otelomni sets
// itself: left out.
type reservedError struct {
	call string
	key  attribute.Key
}

func (e *reservedError) Error() string {
	return fmt.Sprintf("otelomni: %s was given the attribute %s, which otelomni sets itself from the call's arguments; the attribute was left out",
		e.call, sanitize.String(string(e.key), maxKeyBytes))
}

// callerKVs returns kv as kvs does, without the attributes whose key
// otelomni sets itself, each counted in Stats.Misuse.
func (in *Instrumenter) callerKVs(call string, kv []attribute.KeyValue) []attribute.KeyValue {
	kept, dropped := withoutReserved(kv, false, false)
	for _, k := range dropped {
		in.stats.misused((&reservedError{call: call, key: k}).Error())
	}
	return in.kvs(kept)
}

// withoutReserved returns kv without the attributes whose key otelomni
// sets itself, and the keys it left out. For a phase's start, whose output
// keys (output) or step key (step) otelomni read, those keys are left out
// too, but not counted: otelomni sets them from what it read. kv itself is
// returned when it holds none of them; it is never written to.
func withoutReserved(kv []attribute.KeyValue, output, step bool) ([]attribute.KeyValue, []attribute.Key) {
	read := func(k attribute.Key) bool {
		return output && (k == attrs.OutputIndexKey || k == attrs.OutputFinalKey) || step && k == attrs.StepKey
	}
	n := 0
	var dropped []attribute.Key
	for i := range kv {
		if reservedKeys[kv[i].Key] {
			n++
			if !read(kv[i].Key) {
				dropped = append(dropped, kv[i].Key)
			}
		}
	}
	if n == 0 {
		return kv, nil
	}
	out := make([]attribute.KeyValue, 0, len(kv)-n)
	for _, a := range kv {
		if !reservedKeys[a.Key] {
			out = append(out, a)
		}
	}
	return out, dropped
}

// kvs returns kv with every key and string value valid and bounded; kv
// itself when nothing needs repair. The caller's slice is never written to.
func (in *Instrumenter) kvs(kv []attribute.KeyValue) []attribute.KeyValue {
	out := sanitize.KeyValues(kv, maxKeyBytes, in.cfg.valueMax)
	if len(kv) > 0 && &out[0] != &kv[0] {
		in.stats.repairedString()
	}
	return out
}
