// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"strings"
	"testing"
)

func TestParseMetricsSumsMatchingSeries(t *testing.T) {
	text := `# HELP x_total A counter.
# TYPE x_total counter
x_total{policy="error",sampled="true"} 12
x_total{policy="error",sampled="false"} 108
x_total{policy="slow-audio",sampled="true"} 6 1700000000000
x_total{note="a \"quoted\", comma\\ and\nnewline",sampled="true"} 1
plain 3.5
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"x_total", map[string]string{"sampled": "true"}, 19},
		{"x_total", map[string]string{"policy": "error"}, 120},
		{"x_total", map[string]string{"note": "a \"quoted\", comma\\ and\nnewline"}, 1},
		{"x_total", map[string]string{"policy": "none"}, 0},
		{"plain", nil, 3.5},
	}
	for _, c := range cases {
		if got := m.Sum(c.name, c.match); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.match, got, c.want)
		}
	}
	if got := m.Values("x_total", "policy", map[string]string{"sampled": "true"}); got["error"] != 12 || got["slow-audio"] != 6 {
		t.Errorf("Values by policy = %v", got)
	}
}

func TestParseMetricsRejectsMalformedLines(t *testing.T) {
	for _, line := range []string{
		`x{a="1"`,
		`x{a="1} 2`,
		`x{a} 2`,
		`x notanumber`,
		`x{a="1"}`,
	} {
		if _, err := parseMetrics(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}
