// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package sanitize makes strings safe to hand to an OpenTelemetry SDK, a
// log or a terminal: valid UTF-8 (each invalid byte sequence replaced by
// U+FFFD) and bounded in bytes, cut at a rune boundary and copied, so that a
// bounded value never keeps a large original alive.
//
// The OTLP exporters refuse a whole batch that holds one string that is not
// valid UTF-8, and the SDK's attribute length limit counts characters, not
// bytes: both are reasons to bound client strings before they reach the
// SDK. otelomni, otelsetup and the commands bound every string they record
// or show through this package.
package sanitize

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
)

// Replacement replaces each invalid byte sequence.
const Replacement = "\uFFFD"

// String returns s as valid UTF-8 of at most max bytes. It returns s itself
// when s is already valid and short enough (the common case costs one
// validity scan and no allocation); otherwise a fresh copy, so that the
// result never shares memory with a large s. A max of 0 or less means no
// bound on length.
func String(s string, max int) string {
	valid := utf8.ValidString(s)
	if valid && (max <= 0 || len(s) <= max) {
		return s
	}
	if !valid {
		if max > 0 && max < (math.MaxInt-4)/4 && len(s) > 4*max+4 {
			// Repair only the head that can survive the cut: a 10 MB
			// string must not cost a 10 MB repair.
			s = s[:4*max+4]
		}
		s = strings.ToValidUTF8(s, Replacement)
	}
	if max > 0 && len(s) > max {
		s = s[:cut(s, max)]
	}
	return strings.Clone(s)
}

// Valid reports whether s needs no change under max.
func Valid(s string, max int) bool {
	return (max <= 0 || len(s) <= max) && utf8.ValidString(s)
}

// cut returns the largest n <= max at which s can be cut without splitting
// a rune.
func cut(s string, max int) int {
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// KeyValue returns kv with its key bounded by maxKey bytes and its string
// values (a string, the strings of a slice, and at any depth those of a
// slice or map value, whose keys are bounded by maxKey) bounded by
// maxValue bytes, all valid UTF-8. An empty key (after repair) becomes
// "_invalid".
func KeyValue(kv attribute.KeyValue, maxKey, maxValue int) attribute.KeyValue {
	k := string(kv.Key)
	if !Valid(k, maxKey) {
		kv.Key = attribute.Key(String(k, maxKey))
	}
	if kv.Key == "" {
		kv.Key = "_invalid"
	}
	switch kv.Value.Type() {
	case attribute.STRING:
		if v := kv.Value.AsString(); !Valid(v, maxValue) {
			kv.Value = attribute.StringValue(String(v, maxValue))
		}
	case attribute.STRINGSLICE:
		ss := kv.Value.AsStringSlice()
		changed := false
		for i, v := range ss {
			if !Valid(v, maxValue) {
				ss[i], changed = String(v, maxValue), true
			}
		}
		if changed {
			kv.Value = attribute.StringSliceValue(ss)
		}
	case attribute.SLICE, attribute.MAP:
		if !valueOK(kv.Value, maxKey, maxValue) {
			kv.Value = value(kv.Value, maxKey, maxValue)
		}
	}
	return kv
}

// valueOK reports whether every string of a slice or map value (its
// strings, its keys, and those of the values it holds) needs no change.
func valueOK(v attribute.Value, maxKey, maxValue int) bool {
	switch v.Type() {
	case attribute.STRING:
		return Valid(v.AsString(), maxValue)
	case attribute.STRINGSLICE:
		for _, s := range v.AsStringSlice() {
			if !Valid(s, maxValue) {
				return false
			}
		}
	case attribute.SLICE:
		for _, x := range v.AsSlice() {
			if !valueOK(x, maxKey, maxValue) {
				return false
			}
		}
	case attribute.MAP:
		for _, kv := range v.AsMap() {
			if !Valid(string(kv.Key), maxKey) || !valueOK(kv.Value, maxKey, maxValue) {
				return false
			}
		}
	}
	return true
}

// value returns v with every string it holds bounded and valid, at any
// depth; a map's keys stay as they are but for that (an empty one too).
func value(v attribute.Value, maxKey, maxValue int) attribute.Value {
	switch v.Type() {
	case attribute.STRING:
		return attribute.StringValue(String(v.AsString(), maxValue))
	case attribute.STRINGSLICE:
		ss := v.AsStringSlice()
		for i, s := range ss {
			ss[i] = String(s, maxValue)
		}
		return attribute.StringSliceValue(ss)
	case attribute.SLICE:
		xs := v.AsSlice()
		for i, x := range xs {
			xs[i] = value(x, maxKey, maxValue)
		}
		return attribute.SliceValue(xs...)
	case attribute.MAP:
		kvs := v.AsMap()
		for i, kv := range kvs {
			kvs[i] = attribute.KeyValue{Key: attribute.Key(String(string(kv.Key), maxKey)), Value: value(kv.Value, maxKey, maxValue)}
		}
		return attribute.MapValue(kvs...)
	}
	return v
}

// KeyValueOK reports whether KeyValue would leave kv unchanged.
func KeyValueOK(kv attribute.KeyValue, maxKey, maxValue int) bool {
	if kv.Key == "" || !Valid(string(kv.Key), maxKey) {
		return false
	}
	switch kv.Value.Type() {
	case attribute.STRING:
		return Valid(kv.Value.AsString(), maxValue)
	case attribute.STRINGSLICE:
		for _, v := range kv.Value.AsStringSlice() {
			if !Valid(v, maxValue) {
				return false
			}
		}
	case attribute.SLICE, attribute.MAP:
		return valueOK(kv.Value, maxKey, maxValue)
	}
	return true
}

// KeyValues returns kvs with every key and string value bounded. It returns
// kvs itself when nothing needs to change, and a new slice otherwise: the
// caller's slice is never written to.
func KeyValues(kvs []attribute.KeyValue, maxKey, maxValue int) []attribute.KeyValue {
	for i, kv := range kvs {
		if KeyValueOK(kv, maxKey, maxValue) {
			continue
		}
		out := make([]attribute.KeyValue, len(kvs))
		copy(out, kvs)
		for j := i; j < len(out); j++ {
			out[j] = KeyValue(out[j], maxKey, maxValue)
		}
		return out
	}
	return kvs
}

// Display returns s fit for one cell of a terminal table, or one line of
// a terminal: valid UTF-8, with control and format characters (which could
// move the cursor, clear the screen or reorder what is shown) shown as
// '?', and at most limit bytes, cut at a character boundary and marked
// with "…" when cut. Strings in traces and inputs are other people's: one
// 999 000-byte stage name must not make a 360 MB table.
func Display(s string, limit int) string {
	if limit <= 0 {
		return ""
	}
	clean := len(s) <= limit && utf8.ValidString(s)
	if clean {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f || c >= utf8.RuneSelf {
				clean = false
				break
			}
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			// Control and format characters (bidi overrides, zero-width
			// marks) could move the cursor or reorder what is shown.
			r = '?'
		}
		b.WriteRune(r)
		if b.Len() > limit {
			break // it will be cut: the rest need not be read
		}
	}
	out := b.String()
	if len(out) <= limit {
		return out
	}
	mark := "…"
	if limit < len(mark) {
		mark = "" // no room for the mark: at most limit bytes, always
	}
	n := limit - len(mark)
	for n > 0 && !utf8.RuneStart(out[n]) {
		n--
	}
	return out[:n] + mark
}
