// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"strings"
	"testing"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// A string beyond the value limit is kept as otelsetup's exporter sends
// it: repaired, then cut at a rune boundary.
func FuzzKeptIsWhatTheExporterSends(f *testing.F) {
	for _, s := range []string{
		strings.Repeat("\xff", 40) + "tail", strings.Repeat("a", 15) + "é", strings.Repeat("a", 14) + "\xffb",
		strings.Repeat("\xe2\x82", 20) + "tail", strings.Repeat("e\xff\xfe", 9), strings.Repeat("a", 14) + "\xc3\xa9\xa9", "\uFFFD\xff\uFFFD\xff" + strings.Repeat("x", 20),
		strings.Repeat("\xff", 100) + "late",
	} {
		f.Add(s, 16)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = minValue + limit&63
		if len(s) <= limit {
			return
		}
		want := sanitize.String(s, limit)
		n, own := keptLen(s, limit)
		got := s[:min(n, len(s))]
		if !own {
			b := make([]byte, n)
			got = string(b[:repairCut(b, s, limit)])
		}
		if got != want || n != len(want) {
			t.Errorf("%q cut to %d: kept %q (%d bytes, its own %v), the exporter sends %q", s, limit, got, n, own, want)
		}
	})
}
