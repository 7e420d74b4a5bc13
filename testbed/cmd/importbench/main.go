// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command importbench measures what `omnitrace import` costs against a
// bare encoding/json decode of the same lines, side by side in one run:
// to no exporter, to OTLP (a local receiver that discards what it gets),
// and to an OTLP/JSON file; its CPU time (user and system); and the peak
// memory of each, for the input at N records and at twice N, to show that
// memory does not grow with the input.
//
//	go run ./testbed/cmd/importbench [-n 100000] [-rounds 3] [-base OMNITRACE]
//
// Each figure is the median of -rounds runs: the machine may be shared.
// With -base, another omnitrace binary (an older build) is measured in
// the same rounds, each of its runs next to one of this build's, and the
// table gives both.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 100000, "records in the input (the input at twice n is measured too)")
	rounds := flag.Int("rounds", 3, "rounds of each measurement; the median is shown (the machine may be shared)")
	keep := flag.Bool("keep", false, "keep the work directory")
	base := flag.String("base", "", "another omnitrace binary to measure beside this build, run for run")
	flag.Parse()
	if err := run(*n, *rounds, *keep, *base); err != nil {
		fmt.Fprintln(os.Stderr, "importbench:", err)
		os.Exit(1)
	}
}

// record is one request of today's JSON-lines form, of the size measured
// before (about 470 bytes): a single-stage diffusion request.
const record = `{"request_id": "chatcmpl-%016x", "model": "Qwen/Qwen-Image", "arrival_time": %.6f, "modality": "image", "num_inference_steps": 50, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": %.6f, "stage_gen_time_ms": 2310.5, "diffusion_metrics": {"scheduler_queue_wait_ms": %d, "preprocess_time_ms": 4.25, "diffusion_engine_exec_time_ms": 2100.0, "forward_time_ms": 1900.5, "postprocess_time_ms": 45.2}}]}` + "\n"

// logRequest is one request of a vLLM log: its [OmniTiming] line and its
// stage table, as the orchestrator writes them, among unrelated lines.
const logRequest = `INFO 11-30 05:10:44 [serving_chat.py:1401] Finished request chatcmpl-%016x.
INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=chatcmpl-%016x total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]
INFO 11-30 05:10:44 [stats.py:560] ` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] [StageRequestStats [request_id=chatcmpl-%016x]]` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] | Field                         | 0:thinker |     1:dit |` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] | diffusion_engine_exec_time_ms |           |     2,301 |` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] | forward_time_ms               |           |     2,105 |` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] | num_tokens_out                |       120 |         0 |` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] | stage_gen_time_ms             |   812.250 | 2,410.500 |` + "\r" + `
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+
`

func writeLog(path string, n int) (int64, error) {
	return writeFile(path, func(w io.Writer) {
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, logRequest, i, i, i)
		}
	})
}

func writeInput(path string, n int) (int64, error) {
	t0 := float64(time.Now().Add(-24*time.Hour).Unix()) + 0.125
	return writeFile(path, func(w io.Writer) {
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, record, i, t0+float64(i)*0.01, t0+float64(i)*0.01+0.002, i%3)
		}
	})
}

// writeFile writes what fill writes to path, and returns its size.
func writeFile(path string, fill func(io.Writer)) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	fill(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

// bareDecode is the baseline: each line into a map with encoding/json.
func bareDecode(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return 0, err
		}
	}
	return time.Since(start), sc.Err()
}

// sink is an OTLP/HTTP receiver that reads and discards every request.
func sink() (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}

type result struct {
	wall, cpu time.Duration
	maxRSS    int64 // KiB
}

func runImport(bin string, env []string, args ...string) (result, error) {
	cmd := exec.Command(bin, append([]string{"import"}, args...)...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("%v: %v\n%s", args, err, out.String())
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r := result{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if ru != nil {
		r.maxRSS = ru.Maxrss
	}
	return r, nil
}

func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) < 5 || kv[:5] != "OTEL_" {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// median runs each of fs rounds times, one after the other in each round,
// and returns, for each, the result of median wall time, with the median
// CPU time and peak memory of its runs.
func median(rounds int, fs ...func() (result, error)) ([]result, error) {
	rs := make([][]result, len(fs))
	for i := 0; i < max(rounds, 1); i++ {
		for j, f := range fs {
			r, err := f()
			if err != nil {
				return nil, err
			}
			rs[j] = append(rs[j], r)
		}
	}
	out := make([]result, len(fs))
	for j, x := range rs {
		sort.Slice(x, func(a, b int) bool { return x[a].wall < x[b].wall })
		out[j].wall = x[len(x)/2].wall
		sort.Slice(x, func(a, b int) bool { return x[a].cpu < x[b].cpu })
		out[j].cpu = x[len(x)/2].cpu
		sort.Slice(x, func(a, b int) bool { return x[a].maxRSS < x[b].maxRSS })
		out[j].maxRSS = x[len(x)/2].maxRSS
	}
	return out, nil
}

func run(n, rounds int, keep bool, base string) error {
	dir, err := os.MkdirTemp("", "importbench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	bin := filepath.Join(dir, "omnitrace")
	build := exec.Command("go", "build", "-o", bin, "./omnitrace")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building omnitrace (run from the repository root): %w", err)
	}
	type binary struct{ label, path string }
	bins := []binary{{"", bin}}
	if base != "" {
		bins = append(bins, binary{"base: ", base})
	}
	url, stop, err := sink()
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("machine: %s/%s, %d CPUs, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Printf("%-10s %8s %-34s %8s %8s %8s %14s\n", "records", "MB", "what", "seconds", "CPU s", "x bare", "peak RSS MiB")
	for _, size := range []int{n, 2 * n} {
		in := filepath.Join(dir, fmt.Sprintf("records-%d.jsonl", size))
		bytes, err := writeInput(in, size)
		if err != nil {
			return err
		}
		// Every measurement of one size in each round, the bare decode
		// too: a machine busy for a while slows all of them alike.
		labels := []string{"bare encoding/json decode"}
		fs := []func() (result, error){func() (result, error) {
			d, err := bareDecode(in)
			return result{wall: d}, err
		}}
		for _, c := range []struct {
			what string
			env  []string
			args []string
		}{
			{"import, no exporter", baseEnv("OTEL_TRACES_EXPORTER=none"), []string{in}},
			{"import, OTLP/HTTP", baseEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+url, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"), []string{in}},
			{"import -out FILE", baseEnv(), []string{"-out", filepath.Join(dir, "out.json"), in}},
		} {
			for _, b := range bins {
				labels = append(labels, b.label+c.what)
				fs = append(fs, func() (result, error) { return runImport(b.path, c.env, c.args...) })
			}
		}
		rs, err := median(rounds, fs...)
		if err != nil {
			return err
		}
		bare := rs[0].wall
		for i, r := range rs {
			cpu := fmt.Sprintf("%.2f", r.cpu.Seconds())
			if i == 0 {
				cpu = "-" // in this process: not measured apart
			}
			fmt.Printf("%-10d %8.1f %-34s %8.2f %8s %8.2f %14.1f\n", size, float64(bytes)/1e6, labels[i], r.wall.Seconds(), cpu,
				bare.Seconds()/r.wall.Seconds(), float64(r.maxRSS)/1024)
		}
		_ = os.Remove(in)
	}
	// A log: memory must not grow with its length either.
	for _, size := range []int{n / 4, n / 2} {
		in := filepath.Join(dir, fmt.Sprintf("vllm-%d.log", size))
		bytes, err := writeLog(in, size)
		if err != nil {
			return err
		}
		var fs []func() (result, error)
		for _, b := range bins {
			fs = append(fs, func() (result, error) {
				return runImport(b.path, baseEnv(), "-out", filepath.Join(dir, "out.json"), in)
			})
		}
		rs, err := median(rounds, fs...)
		if err != nil {
			return err
		}
		for i, r := range rs {
			fmt.Printf("%-10d %8.1f %-34s %8.2f %8.2f %8s %14.1f\n", size, float64(bytes)/1e6, bins[i].label+"import -out FILE, vLLM log", r.wall.Seconds(), r.cpu.Seconds(), "", float64(r.maxRSS)/1024)
		}
		_ = os.Remove(in)
	}
	return nil
}
