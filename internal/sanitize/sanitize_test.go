// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package sanitize_test

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/internal/sanitize"
)

func TestString(t *testing.T) {
	cases := []struct {
		name, in string
		max      int
		want     string
	}{
		{"short and valid: itself", "chatcmpl-1", 64, "chatcmpl-1"},
		{"no bound", strings.Repeat("x", 100), 0, strings.Repeat("x", 100)},
		{"cut in bytes", strings.Repeat("x", 100), 10, strings.Repeat("x", 10)},
		{"cut at a rune boundary", strings.Repeat("日", 10), 8, "日日"},
		{"invalid bytes replaced", "a\xffb", 64, "a\uFFFDb"},
		{"invalid bytes replaced, then cut", "\xff\xff\xff", 4, "\uFFFD"},
		{"a huge invalid run costs only its head", strings.Repeat("\xff", 10<<20), 7, "\uFFFD"},
		{"empty", "", 10, ""},
		{"a bound so large that 4 times it overflows", "a\xffb", 1 << 61, "a\uFFFDb"},
		{"the largest bound", "a\xffb", math.MaxInt, "a\uFFFDb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sanitize.String(tc.in, tc.max); got != tc.want {
				t.Errorf("String(%.20q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
		})
	}
}

func TestStringCopiesWhatItCuts(t *testing.T) {
	in := strings.Repeat("a", 1<<20)
	out := sanitize.String(in, 16)
	p, q := uintptr(unsafe.Pointer(unsafe.StringData(out))), uintptr(unsafe.Pointer(unsafe.StringData(in)))
	if p >= q && p < q+uintptr(len(in)) {
		t.Error("the cut string shares the original's memory")
	}
}

func TestKeyValuesNeverWritesTheCallersSlice(t *testing.T) {
	in := []attribute.KeyValue{attribute.String("ok", "fine"), attribute.String("k\xff", "v\xff"), attribute.StringSlice("s", []string{"\xff"})}
	orig := append([]attribute.KeyValue(nil), in...)
	out := sanitize.KeyValues(in, 8, 8)
	for i := range in {
		if in[i] != orig[i] {
			t.Fatalf("the caller's slice was written at %d", i)
		}
	}
	if !sanitize.KeyValueOK(out[1], 8, 8) || !sanitize.KeyValueOK(out[2], 8, 8) || out[0] != in[0] {
		t.Errorf("out %v", out)
	}
	if ok := []attribute.KeyValue{attribute.String("a", "b")}; &sanitize.KeyValues(ok, 8, 8)[0] != &ok[0] {
		t.Error("a clean slice must be returned as is, without a copy")
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "abc", "日本", "\xff\xfe", "a\x80b", strings.Repeat("é", 50)} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max %= 1 << 16
		got := sanitize.String(s, max)
		if !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q: not valid UTF-8", s, max, got)
		}
		if max > 0 && len(got) > max {
			t.Fatalf("String(%q, %d) is %d bytes", s, max, len(got))
		}
		if utf8.ValidString(s) && !strings.HasPrefix(s, got) {
			t.Fatalf("String(%q, %d) = %q: not a prefix of a valid string", s, max, got)
		}
		if sanitize.String(got, max) != got {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}

func TestDisplayBoundsAndDefusesClientStrings(t *testing.T) {
	cases := map[string]struct {
		in    string
		limit int
		want  string
	}{
		"short":                  {"chatcmpl-1", 16, "chatcmpl-1"},
		"terminal escapes":       {"id\x1b[2J\x07", 16, "id?[2J?"},
		"bidi override":          {"ab\u202ecd", 16, "ab?cd"},
		"zero-width space":       {"a\u200bb", 16, "a?b"},
		"invalid UTF-8":          {"a\xffb", 16, "a?b"},
		"long":                   {strings.Repeat("x", 1000), 16, strings.Repeat("x", 13) + "…"},
		"long, wide characters":  {strings.Repeat("日", 10), 20, "日日日日日…"},
		"a limit below the mark": {"abcdef", 2, "ab"},
		"no room":                {"abc", 0, ""},
	}
	for name, tc := range cases {
		got := sanitize.Display(tc.in, tc.limit)
		if got != tc.want || len(got) > max(tc.limit, 0) {
			t.Errorf("%s: Display = %q, want %q", name, got, tc.want)
		}
	}
}

// TestNestedStringsAreRepaired: a string not valid UTF-8, or too long, at
// any depth of a slice or map value (a map's keys among them) is repaired,
// as the OTLP exporters would otherwise refuse the whole batch; the
// caller's value is not written to.
func TestNestedStringsAreRepaired(t *testing.T) {
	in := attribute.Slice("s", attribute.StringValue("bad \xff"), attribute.MapValue(
		attribute.String("k\xfe", "v"), attribute.StringSlice("ss", []string{"ok", "\xc3"}),
		attribute.Slice("deeper", attribute.StringValue("long string"))), attribute.IntValue(1))
	if sanitize.KeyValueOK(in, 16, 8) {
		t.Fatal("KeyValueOK accepts a nested string that is not valid UTF-8")
	}
	got := sanitize.KeyValue(in, 16, 8)
	if !sanitize.KeyValueOK(got, 16, 8) {
		t.Errorf("KeyValue left a nested string to repair: %s", got.Value.String())
	}
	want := attribute.Slice("s", attribute.StringValue("bad "+sanitize.Replacement), attribute.MapValue(
		attribute.String("k"+sanitize.Replacement, "v"), attribute.StringSlice("ss", []string{"ok", sanitize.Replacement}),
		attribute.Slice("deeper", attribute.StringValue("long str"))), attribute.IntValue(1))
	if got.Value.String() != want.Value.String() {
		t.Errorf("repaired to %s, want %s", got.Value.String(), want.Value.String())
	}
	if in.Value.AsSlice()[0].AsString() != "bad \xff" {
		t.Error("the caller's value was written to")
	}
	if fine := attribute.Map("m", attribute.String("k", "v")); !sanitize.KeyValueOK(fine, 16, 8) || sanitize.KeyValue(fine, 16, 8) != fine {
		t.Error("a valid map value was changed")
	}
}
