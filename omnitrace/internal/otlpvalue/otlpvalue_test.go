// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otlpvalue

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
)

// TestTruncateCutsAsTheSDKDoes: values are cut to characters, not bytes.
func TestTruncateCutsAsTheSDKDoes(t *testing.T) {
	for _, c := range []struct {
		limit  int
		in, ok string
	}{{-1, "日本語", "日本語"}, {0, "abc", ""}, {2, "日本語", "日本"}, {3, "日本語", "日本語"}, {5, "ab", "ab"}} {
		if got := truncate(c.limit, c.in); got != c.ok {
			t.Errorf("truncate(%d, %q) = %q, want %q", c.limit, c.in, got, c.ok)
		}
	}
}

// TestSetWritesEveryType: each attribute type becomes its OTLP value,
// strings of a slice cut like a string.
func TestSetWritesEveryType(t *testing.T) {
	m := pcommon.NewMap()
	PutAll(m, []attribute.KeyValue{attribute.Bool("b", true), attribute.Int64("i", -3), attribute.Float64("f", 1.5),
		attribute.String("s", "abc"), attribute.BoolSlice("bs", []bool{true}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Float64Slice("fs", []float64{0.5}), attribute.StringSlice("ss", []string{"x", "y"})})
	want := map[string]string{"b": "true", "i": "-3", "f": "1.5", "s": "abc", "bs": "[true]", "is": "[1,2]", "fs": "[0.5]", "ss": `["x","y"]`}
	for k, w := range want {
		v, ok := m.Get(k)
		if !ok || v.AsString() != w {
			t.Errorf("%s = %q, want %q", k, v.AsString(), w)
		}
	}
	v := pcommon.NewValueEmpty()
	Set(v, attribute.StringSliceValue([]string{"日本語"}), 2)
	if got := v.Slice().At(0).Str(); got != "日本" {
		t.Errorf("a slice's string cut to %q", got)
	}
}
