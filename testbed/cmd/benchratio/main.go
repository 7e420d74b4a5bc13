// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command benchratio runs the comparisons docs/performance.md reports:
// otelomni's live path against the same spans and measurements written by
// hand, on every path (BenchmarkRequest in ./otelomni); the record path
// against its hand-written spans, a batched request against one alone, and
// requests on 8 and 64 goroutines against one (BenchmarkRecord,
// BenchmarkBatch, BenchmarkScaling); and the crash journal against the
// same live path without it (BenchmarkJournal in ./otelsetup).
//
//	go run ./testbed/cmd/benchratio [-rounds 16] [-benchtime 0.5s] [-raw FILE]
//	go run ./testbed/cmd/benchratio -in FILE
//
// It builds each package's test binary once, then runs -rounds rounds, each
// running every sub-benchmark once, so that a neighbour's load falls on
// both sides of a ratio alike. For each comparison it prints the ratio of
// the minimums over the rounds (a neighbour only ever adds time, so the
// minimum is the figure least moved by one), the median of the ratios of
// the rounds, each round's two sides paired, with its 95% confidence
// interval, and the allocations per request of each side; for otelomni's
// paths, the cached floor too, the limit. -raw keeps the rounds' output,
// in the Go benchmark format with each round's number and the machine's
// load average at its start as configuration ("round", "load1"), so that
// benchstat can read it (benchstat -ignore round,load1 FILE); -in
// summarises such a file again without running anything.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"
)

// suite is one package's benchmarks and the comparisons made of them.
type suite struct {
	pkg   string // import path
	bench string // the -test.bench pattern
	rows  []comparison
}

// comparison is one row of the summary: ours against theirs, and
// optionally the floor ours is held against, each a sub-benchmark's full
// name as the Go benchmark format reads it, without "Benchmark" and
// without its GOMAXPROCS suffix ("Request/otelomni").
type comparison struct {
	label              string
	ours, theirs, base string
}

// suites is the documented comparison.
var suites = []suite{
	{
		pkg:   "github.com/otelomni/otelomni/otelomni",
		bench: "^BenchmarkRequest$",
		rows: []comparison{
			{"sampled", "Request/otelomni", "Request/handwritten", "Request/floor"},
			{"metrics on", "Request/otelomni+metrics", "Request/handwritten+metrics", "Request/floor+metrics"},
			{"unsampled", "Request/unsampled", "Request/handwritten-unsampled", "Request/floor-unsampled"},
			{"unsampled, metrics on", "Request/unsampled+metrics", "Request/handwritten-unsampled+metrics", "Request/floor-unsampled+metrics"},
			{"no SDK installed", "Request/nosdk", "Request/handwritten-nosdk", "Request/floor-nosdk"},
		},
	},
	{
		pkg:   "github.com/otelomni/otelomni/otelomni",
		bench: "^(BenchmarkRecord|BenchmarkBatch)$",
		rows: []comparison{
			{"record path", "Record/otelomni", "Record/handwritten", ""},
			{"a request in a batch of 4", "Batch/batched", "Batch/unbatched", ""},
		},
	},
	{
		pkg:   "github.com/otelomni/otelomni/otelomni",
		bench: "^BenchmarkScaling$/^goroutines=(1|8|64)$/^otelomni$",
		rows: []comparison{
			{"8 goroutines, against 1", "Scaling/goroutines=8/otelomni", "Scaling/goroutines=1/otelomni", ""},
			{"64 goroutines, against 1", "Scaling/goroutines=64/otelomni", "Scaling/goroutines=1/otelomni", ""},
		},
	},
	{
		pkg:   "github.com/otelomni/otelomni/otelsetup",
		bench: "^BenchmarkJournal$",
		rows: []comparison{
			{"crash journal", "Journal/journal", "Journal/nojournal", ""},
			{"SDK accessors alone", "Journal/sdk+read", "Journal/sdk", ""},
		},
	},
}

func main() {
	rounds := flag.Int("rounds", 16, "rounds, each running every sub-benchmark once")
	benchtime := flag.String("benchtime", "0.5s", "each sub-benchmark's -test.benchtime in a round")
	raw := flag.String("raw", "", "write the rounds' benchmark output to this file")
	in := flag.String("in", "", "summarise this file (as -raw writes it) instead of running")
	goCmd := flag.String("go", "go", "the go command that builds the test binaries")
	flag.Parse()
	if flag.NArg() > 0 || *rounds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *in, *raw, *goCmd, *rounds, *benchtime); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, in, raw, goCmd string, rounds int, benchtime string) error {
	var out []byte
	if in != "" {
		b, err := os.ReadFile(in)
		if err != nil {
			return err
		}
		out = b
	} else {
		var buf bytes.Buffer
		if err := runRounds(ctx, &buf, goCmd, rounds, benchtime); err != nil {
			return err
		}
		out = buf.Bytes()
		if raw != "" {
			if err := os.WriteFile(raw, out, 0o644); err != nil {
				return err
			}
		}
	}
	res, err := read(bytes.NewReader(out), in)
	if err != nil {
		return err
	}
	var all []comparison
	for _, s := range suites {
		all = append(all, s.rows...)
	}
	var tables [][]row
	for _, u := range units {
		rows, err := summarise(res, all, u.unit)
		if err != nil {
			return err
		}
		tables = append(tables, rows)
	}
	return printSummary(w, res, tables)
}

// runRounds builds each package's test binary once, then runs every suite
// once a round, writing each round's number, the load average at its start and
// the benchmarks' output to w.
func runRounds(ctx context.Context, w io.Writer, goCmd string, rounds int, benchtime string) error {
	dir, err := os.MkdirTemp("", "benchratio")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins := make([]string, len(suites))
	dirs := make([]string, len(suites))
	built := map[string]int{} // by package: the suite whose binary it is
	for i, s := range suites {
		if j, ok := built[s.pkg]; ok {
			bins[i], dirs[i] = bins[j], dirs[j]
			continue
		}
		built[s.pkg] = i
		bins[i] = filepath.Join(dir, fmt.Sprintf("%d.test", i))
		build := exec.CommandContext(ctx, goCmd, "test", "-c", "-o", bins[i], s.pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the tests of %s: %w", s.pkg, err)
		}
		// The binary runs in its package's directory, as go test runs it.
		list, err := exec.CommandContext(ctx, goCmd, "list", "-f", "{{.Dir}}", s.pkg).Output()
		if err != nil {
			return fmt.Errorf("finding %s: %w", s.pkg, err)
		}
		dirs[i] = strings.TrimSpace(string(list))
	}
	for r := 1; r <= rounds; r++ {
		start := time.Now()
		fmt.Fprintf(w, "round: %d\nload1: %s\n", r, loadAverage())
		for i, s := range suites {
			var out bytes.Buffer
			cmd := exec.CommandContext(ctx, bins[i], "-test.run", "^$", "-test.bench", s.bench,
				"-test.count", "1", "-test.benchmem", "-test.benchtime", benchtime)
			cmd.Dir, cmd.Stdout, cmd.Stderr = dirs[i], &out, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("round %d, %s: %w\n%s", r, s.pkg, err, out.Bytes())
			}
			w.Write(out.Bytes())
		}
		fmt.Fprintf(os.Stderr, "benchratio: round %d of %d done in %v\n", r, rounds, time.Since(start).Round(time.Second))
	}
	return nil
}

// loadAverage returns the machine's load average over the last minute,
// or "unknown" where /proc/loadavg cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
