// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// diffBenchRequests is how many requests each side of BenchmarkDiff
// holds: 100 000, or OMNITRACE_DIFF_BENCH_N.
func diffBenchRequests(b *testing.B) int {
	if v := os.Getenv("OMNITRACE_DIFF_BENCH_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("OMNITRACE_DIFF_BENCH_N=%q", v)
		}
		return n
	}
	return 100000
}

// writeDiffBenchInput writes n single-stage image requests (request,
// preprocess, queue wait within exec, forward and VAE decode under exec,
// postprocess: six spans), lognormal phases, forward scaled by k, as
// OTLP/JSON a thousand requests a line, as an import's -out writes it.
func writeDiffBenchInput(b *testing.B, path string, seed uint64, n int, k float64) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(seed, 3))
	d := func(median float64) time.Duration {
		return time.Duration(median * math.Exp(0.3*rng.NormFloat64()) * float64(time.Millisecond))
	}
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var batch []traceview.Span
	for i := range n {
		tid := fmt.Sprintf("%016x%016x", seed, i)
		// Ids from 1: an id of zeros is no id in OTLP.
		id := func(k int) string { return fmt.Sprintf("%08x%08x", i+1, k) }
		t := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		span := func(k int, parent, name string, start time.Time, l time.Duration) traceview.Span {
			return traceview.Span{TraceID: tid, SpanID: id(k), ParentID: parent, Name: name, Start: start, End: start.Add(l)}
		}
		pre := span(1, id(0), "omni.diffusion.preprocess", t, d(8))
		qw := span(2, id(0), "omni.diffusion.queue_wait", pre.End, d(5))
		fwd := span(4, id(3), "omni.diffusion.forward", qw.End, d(800*k))
		vae := span(5, id(3), "omni.diffusion.vae_decode", fwd.End, d(60))
		exec := traceview.Span{TraceID: tid, SpanID: id(3), ParentID: id(0), Name: "omni.diffusion.exec", Start: pre.End, End: vae.End}
		post := span(6, id(0), "omni.diffusion.postprocess", vae.End, d(20))
		req := traceview.Span{TraceID: tid, SpanID: id(0), Name: "omni.request", Start: t, End: post.End.Add(d(1)),
			Attrs: map[string]attribute.Value{"omni.output.modality": attribute.StringValue("image"), "omni.stage.type": attribute.StringValue("diffusion")}}
		batch = append(batch, req, pre, qw, exec, fwd, vae, post)
		if len(batch) >= 7000 || i == n-1 {
			if err := traceview.WriteOTLPJSON(w, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDiff measures omnitrace diff of two OTLP/JSON files of 100 000
// requests each against omnitrace summary of each, in turns within each
// iteration: summary-s and diff-s are each one's seconds, diff/summary
// their ratio, and diff/summary-cpu the ratio of the CPU time the process
// spent on each (its own and its collector's, from getrusage), which
// other work on a busy machine changes far less than the time.
func BenchmarkDiff(b *testing.B) {
	n := diffBenchRequests(b)
	dir := b.TempDir()
	base, new := filepath.Join(dir, "base.json"), filepath.Join(dir, "new.json")
	writeDiffBenchInput(b, base, 1, n, 1)
	writeDiffBenchInput(b, new, 2, n, 1.05)
	var summary, diff, summaryCPU, diffCPU time.Duration
	for b.Loop() {
		t, c := time.Now(), cpuTime(b)
		for _, f := range []string{base, new} {
			if code := run(context.Background(), []string{"summary", "-file", f}, nil, io.Discard, io.Discard); code != 0 {
				b.Fatalf("summary: exit %d", code)
			}
		}
		summary += time.Since(t)
		summaryCPU += cpuTime(b) - c
		t, c = time.Now(), cpuTime(b)
		if code := run(context.Background(), []string{"diff", base, new}, nil, io.Discard, io.Discard); code != 0 {
			b.Fatalf("diff: exit %d", code)
		}
		diff += time.Since(t)
		diffCPU += cpuTime(b) - c
	}
	b.ReportMetric(summary.Seconds()/float64(b.N), "summary-s")
	b.ReportMetric(diff.Seconds()/float64(b.N), "diff-s")
	b.ReportMetric(float64(diff)/float64(summary), "diff/summary")
	b.ReportMetric(float64(diffCPU)/float64(summaryCPU), "diff/summary-cpu")
}

// cpuTime is the CPU time the process has spent, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
