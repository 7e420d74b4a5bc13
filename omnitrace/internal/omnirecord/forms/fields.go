// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

// Bounds of what an input string may put on a span.
const (
	// MaxKeyBytes bounds an attribute key made from an input key.
	MaxKeyBytes = 256
	// MaxValueBytes bounds a string attribute value from the input: what
	// otelomni records of any string (its default value limit).
	MaxValueBytes = 1024
	// MaxIDBytes bounds a request id, a model, a stage name.
	MaxIDBytes = 1024
	// MaxExtras bounds the unknown keys kept per request or stage; beyond,
	// they are counted in omni.record.dropped_keys.
	MaxExtras = 64
)

// maxDuration is the longest duration this package accepts: longer cannot
// be placed within what OTLP carries, whatever its start.
const maxDuration = time.Duration(292 * 365 * 24 * time.Hour)

// duration reads a non-negative finite number of unit as a duration.
func duration(v *literal.Value, unit time.Duration) (time.Duration, error) {
	if v.Kind != literal.Number {
		return 0, ErrNotNumber
	}
	if !v.Finite() {
		return 0, ErrNonFinite
	}
	f := v.Num
	if f < 0 {
		return 0, fmt.Errorf("%w: %s", ErrNegative, literal.Clip(v.Str))
	}
	ns := f * float64(unit)
	if ns > float64(maxDuration) {
		return 0, fmt.Errorf("%w: %s is %w", ErrNonFinite, literal.Clip(v.Str), ErrOutOfRange)
	}
	return time.Duration(math.Round(ns)), nil
}

// integer reads a whole number.
func integer(v *literal.Value) (int64, error) {
	if !v.Finite() || v.Num != math.Trunc(v.Num) || math.Abs(v.Num) > 1<<53 {
		return 0, fmt.Errorf("not an integer")
	}
	return int64(v.Num), nil
}

// IDOf returns an id exactly as written: a string, or a number's literal
// text (never parsed: 12345678901234567890 stays that text). A non-finite
// number is no id. The id is kept whole (it is bounded by the line it came
// from), so that two ids that differ only past what a span shows, or only
// in their invalid bytes, stay two requests with two trace ids; the span's
// omni.request.id is cut and repaired as every string otelomni records.
// It is a copy (see own).
func IDOf(v *literal.Value, key string) (string, error) {
	switch {
	case v == nil || v.Kind == literal.Null:
		return "", ErrNoRequestID
	case v.Kind == literal.String:
		if v.Str == "" {
			return "", ErrNoRequestID
		}
		return own(v.Str), nil
	case v.Finite():
		return own(v.Str), nil
	}
	return "", fmt.Errorf("%w: %s is neither a string nor a finite number", ErrBadField, key)
}

// maxUnixSeconds is the last second a span may lie at: 2262-04-11.
const maxUnixSeconds = math.MaxInt64 / int64(time.Second)

// timeOf reads Unix seconds (a float) as a time.
func timeOf(v *literal.Value, key string) (time.Time, error) {
	if v == nil || v.Kind == literal.Null {
		return time.Time{}, fmt.Errorf("%w: %s", ErrNoTime, key)
	}
	if !v.Finite() || v.Num <= 0 {
		return time.Time{}, fmt.Errorf("%w: %s is not a Unix time in seconds", ErrBadField, key)
	}
	if v.Num >= float64(maxUnixSeconds) {
		return time.Time{}, fmt.Errorf("%w: %s is %w", ErrBadField, key, ErrOutOfRange)
	}
	sec := math.Floor(v.Num)
	return time.Unix(int64(sec), int64(math.Round((v.Num-sec)*1e9))).UTC(), nil
}

func stringOf(obj *literal.Value, key string, dst *string) error {
	v, ok := obj.Get(key)
	if !ok || v.Kind == literal.Null {
		return nil
	}
	if v.Kind != literal.String {
		return fmt.Errorf("%w: %s is not a string", ErrBadField, key)
	}
	*dst = own(sanitize.String(v.Str, MaxIDBytes))
	return nil
}

// own returns a copy of s, a string of a parsed value: such a string
// shares the memory of the whole text it was parsed from (a record of up
// to a line, a summary entry, a table), which a request held or queued
// must not keep for one short string of it.
func own(s string) string { return strings.Clone(s) }

func intOf(obj *literal.Value, key string, dst *int) error {
	v, ok := obj.Get(key)
	if !ok || v.Kind == literal.Null {
		return nil
	}
	n, err := integer(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("%w: %s is not a non-negative integer", ErrBadField, key)
	}
	*dst = int(n)
	return nil
}

// extras keeps the members of obj not in known as omni.record.<key>
// attributes, at most MaxExtras, bounded and valid UTF-8, and counts in
// dropped those it does not keep.
func extras(dst []attribute.KeyValue, obj *literal.Value, known func(string) bool, dropped *int) []attribute.KeyValue {
	for i, k := range obj.Keys {
		if known(k) {
			continue
		}
		if len(dst) >= MaxExtras || k == droppedKeys {
			*dropped++
			continue
		}
		dst = append(dst, extraValue(k, &obj.Vals[i]))
	}
	return dst
}

// extraKey is the attribute key of an input key, bounded.
func extraKey(k string) attribute.Key {
	return omnikeys.RecordKey(sanitize.String(k, MaxKeyBytes-len("omni.record.")))
}

func extraValue(k string, v *literal.Value) attribute.KeyValue {
	key := extraKey(k)
	switch v.Kind {
	case literal.String:
		return key.String(own(sanitize.String(v.Str, MaxValueBytes)))
	case literal.Bool:
		return key.Bool(v.Bool)
	case literal.Number:
		if n, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
			return key.Int64(n)
		}
		if v.Finite() {
			return key.Float64(v.Num)
		}
		return key.String(own(v.Str)) // NaN and Infinity, as written
	}
	return key.String(string(appendJSON(nil, v, MaxValueBytes))) // objects, arrays, null
}

// appendJSON appends v as compact JSON, stopping once b would pass limit
// bytes (the text is then cut at a character boundary).
func appendJSON(b []byte, v *literal.Value, limit int) []byte {
	start := len(b)
	b = appendJSONValue(b, v, start+limit)
	if len(b)-start > limit {
		n := start + limit
		for n > start && !utf8.RuneStart(b[n]) {
			n--
		}
		b = b[:n]
	}
	return b
}

func appendJSONValue(b []byte, v *literal.Value, stop int) []byte {
	if len(b) > stop {
		return b
	}
	switch v.Kind {
	case literal.Null:
		return append(b, "null"...)
	case literal.Bool:
		return strconv.AppendBool(b, v.Bool)
	case literal.Number:
		return append(b, v.Str...)
	case literal.String:
		return strconv.AppendQuote(b, sanitize.String(v.Str, max(stop-len(b), 1)))
	case literal.Array:
		b = append(b, '[')
		for i := range v.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONValue(b, &v.Items[i], stop)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, k := range v.Keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, sanitize.String(k, MaxKeyBytes))
		b = append(b, ':')
		b = appendJSONValue(b, &v.Vals[i], stop)
	}
	return append(b, '}')
}
