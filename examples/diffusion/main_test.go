// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/otelomni/otelomni/examples/diffusion/engine"
	"github.com/otelomni/otelomni/spans"
)

// TestSummaryAndInstrumentsAgree runs the demo in its embedded mode and
// checks that the terminal summary (from the spans) and the phase histogram
// (from the same measurements) count each phase the same, and that both
// count exactly what the scenarios measured: preprocess once per request
// that had a pre-processor, not once per request.
func TestSummaryAndInstrumentsAgree(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"} {
		t.Setenv(k, "")
	}
	manifest := filepath.Join(t.TempDir(), "m.jsonl")
	const requests = 21
	res, err := run(io.Discard, config{requests: requests, concurrency: 4, seed: 3, slots: 2, scale: 0.3, quiet: true, manifest: manifest})
	if err != nil {
		t.Fatal(err)
	}
	want := map[spans.Phase]int{}
	f, err := os.Open(manifest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var m struct{ Scenario string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		s, _ := engine.Lookup(m.Scenario)
		exp, _ := s.Expect()
		for p, c := range exp {
			want[p] += c
		}
		n++
	}
	if n != requests {
		t.Fatalf("%d requests in the manifest", n)
	}
	if want[spans.Preprocess] == 0 || want[spans.Preprocess] == requests {
		t.Fatalf("the mix should have some requests with a pre-processor and some without: %d", want[spans.Preprocess])
	}
	for p, c := range want {
		if p == spans.DenoiseStep {
			continue
		}
		if got := res.spans[p.String()]; got != c {
			t.Errorf("%v: summary counts %d spans, the scenarios measured %d", p, got, c)
		}
		if got := res.metrics[p.String()]; got != uint64(c) {
			t.Errorf("%v: histogram counts %d, the scenarios measured %d", p, got, c)
		}
	}
}
