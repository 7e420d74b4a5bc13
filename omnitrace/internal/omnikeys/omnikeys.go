// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package omnikeys holds the attribute keys that only spans imported from
// what an engine wrote carry (omnitrace import): how exact an imported
// duration is, what its writer did to it, and the keys of a record that
// otelomni does not know. The importer writes them, the views read them.
package omnikeys

import "go.opentelemetry.io/otel/attribute"

const (
	// Resolution is the step of an imported duration as its writer wrote
	// it (double, milliseconds): 1 for int()-truncated milliseconds, 10 for
	// seconds with two decimals. Absent when written at full precision.
	Resolution = attribute.Key("omni.timing.resolution_ms")
	// Summed marks a duration its writer added up over the request's
	// outputs (diffusion values) or the transfer's chunks (bytes and send
	// time): the parts cannot be told apart (bool).
	Summed = attribute.Key("omni.timing.summed")
	// UnmeasuredZero lists the fields of a scope whose 0 was read as "not
	// measured", because their writer puts 0 when it measured nothing
	// (string array).
	UnmeasuredZero = attribute.Key("omni.timing.unmeasured_zero")
	// LengthUnmeasured marks an imported stage span whose own length its
	// record did not give (no generation time, no phase measured): the span
	// holds the stage's attributes and its hand-over, and its duration is no
	// measurement. Tools show its length as not measured, never 0 (bool).
	LengthUnmeasured = attribute.Key("omni.timing.length_unmeasured")
	// TransferResolution is Resolution of the hand-over into a stage, on
	// the stage's span (double, milliseconds).
	TransferResolution = attribute.Key("omni.timing.transfer_resolution_ms")
	// TransferSummed is Summed of the hand-over into a stage, on the
	// stage's span (bool).
	TransferSummed = attribute.Key("omni.timing.transfer_summed")
	// ImportSource names the form a request was imported from: "summary",
	// "log", "events" or "jsonl" (string); the forms merged, joined by "+"
	// ("summary+log"), for a request given in several.
	ImportSource = attribute.Key("omni.import.source")
	// RecordPrefix prefixes the keys of a timing record that otelomni does
	// not know, kept as attributes rather than dropped: the record's key
	// cfg_parallel is kept as omni.record.cfg_parallel.
	RecordPrefix = "omni.record."
)

// RecordKey is the key a record's own key takes on a span: key prefixed by
// RecordPrefix.
func RecordKey(key string) attribute.Key { return attribute.Key(RecordPrefix + key) }
