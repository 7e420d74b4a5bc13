// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// benchInput writes n records of today's JSON-lines form (about 470 bytes
// each, single-stage diffusion requests).
func benchInput(b *testing.B, n int) string {
	b.Helper()
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&buf, `{"request_id": "chatcmpl-%016x", "model": "Qwen/Qwen-Image", "arrival_time": %.6f, "modality": "image", "num_inference_steps": 50, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": %.6f, "stage_gen_time_ms": 2310.5, "diffusion_metrics": {"scheduler_queue_wait_ms": %d, "preprocess_time_ms": 4.25, "diffusion_engine_exec_time_ms": 2100.0, "forward_time_ms": 1900.5, "postprocess_time_ms": 45.2}}]}`+"\n",
			i, 1796000000.125+float64(i)*0.01, 1796000000.127+float64(i)*0.01, i%3)
	}
	p := filepath.Join(b.TempDir(), "records.jsonl")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkImport imports 10 000 records per iteration, in process, to
// each destination; ns/op divided by 10 000 is the cost of one record.
// importbench (testbed/cmd/importbench) compares the whole command with
// a bare decode of the same lines.
func BenchmarkImport(b *testing.B) {
	const n = 10000
	in := benchInput(b, n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"none", []string{"OTEL_TRACES_EXPORTER=none"}, nil},
		{"otlp", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}, nil},
		{"file", nil, []string{"-out", filepath.Join(b.TempDir(), "out.json")}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for _, kv := range os.Environ() {
				if len(kv) > 5 && kv[:5] == "OTEL_" {
					k, _, _ := bytes.Cut([]byte(kv), []byte("="))
					b.Setenv(string(k), "")
					os.Unsetenv(string(k))
				}
			}
			for _, kv := range c.env {
				k, v, _ := bytes.Cut([]byte(kv), []byte("="))
				b.Setenv(string(k), string(v))
			}
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				if code := run(context.Background(), append(append([]string{"import"}, c.args...), in), nil, io.Discard, io.Discard); code != 0 {
					b.Fatalf("exit %d", code)
				}
			}
		})
	}
}
