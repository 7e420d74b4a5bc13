// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// childEnv makes the test binary run omnitrace itself, as a child process
// whose peak memory is the command's own.
const childEnv = "OMNITRACE_TEST_MAIN" // see TestMain

// childBinary returns the program to run omnitrace as: the test binary
// itself, or, under the race detector (which would measure itself), the
// command built without it, once.
var childBinary = sync.OnceValues(func() (string, error) {
	if !raceEnabled {
		return os.Args[0], nil
	}
	dir, err := os.MkdirTemp("", "omnitrace-memtest-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "omnitrace")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// peakRSS runs omnitrace with args in a child process, with the variables
// of extra set too, and returns its peak resident memory in KiB, its exit
// status and its stderr.
func peakRSS(t *testing.T, extra []string, args ...string) (int64, int, string) {
	t.Helper()
	bin, err := childBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	// A small export queue: what the import holds of the spans it made is
	// reached at once, and what it holds of its input shows.
	env := []string{childEnv + "=1", "OTEL_BSP_MAX_QUEUE_SIZE=512", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=256"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, extra...) // the last of a variable is the one used
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no peak memory of a child on this system")
	}
	return ru.Maxrss, code, stderr.String()
}

// writeInput writes what gen writes for n units to a file of dir.
func writeInput(t *testing.T, dir, name string, n int, gen func(w io.Writer, n int)) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%s-%d", name, n))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	gen(w, n)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// memoryCase is one command whose peak memory must not grow with its
// input: run at 1, 10 and 100 times a unit of input.
type memoryCase struct {
	name string
	unit int
	gen  func(w io.Writer, n int)
	// args returns the command line for an input file and a scratch
	// directory.
	args func(in, dir string) []string
	// check looks at one run's exit status and stderr, at n units.
	check func(t *testing.T, n, code int, stderr string)
	// env sets variables beside the small export queue of every case.
	env []string
}

// TestPeakMemoryDoesNotGrowWithTheInput runs each command on its input at
// 1, 10 and 100 times a unit, in a child process, and holds its peak
// resident memory: at 100 times, at most a quarter more than at 10 times,
// and 24 MiB (what a garbage collector's timing moves), whatever the input
// holds. Peak memory, not time: it holds on a busy machine.
func TestPeakMemoryDoesNotGrowWithTheInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command on inputs of megabytes")
	}
	imported := func(t *testing.T, n, code int, stderr string) {
		t.Helper()
		if code != 0 || !strings.Contains(stderr, "imported ") || strings.Contains(stderr, "imported 0,") {
			t.Errorf("at %d: exit %d:\n%s", n, code, lastOf(stderr))
		}
	}
	importTo := func(extra ...string) func(in, dir string) []string {
		return func(in, dir string) []string {
			return append(append([]string{"import", "-out", filepath.Join(dir, "out.json")}, extra...), in)
		}
	}
	cases := []memoryCase{
		{name: "a summary over many lines", unit: 100, gen: genSummary, args: importTo("-max-pending", "1000"),
			check: func(t *testing.T, n, code int, stderr string) {
				imported(t, n, code, stderr)
				if want := fmt.Sprintf("imported %d,", n); !strings.Contains(stderr, want) {
					t.Errorf("at %d: want %q:\n%s", n, want, lastOf(stderr))
				}
			}},
		{name: "a summary of many keys per request", unit: 100, gen: genManyKeys, args: importTo(),
			check: func(t *testing.T, n, code int, stderr string) {
				imported(t, n, code, stderr)
				if want := fmt.Sprintf("imported %d,", n); !strings.Contains(stderr, want) {
					t.Errorf("at %d: want %q:\n%s", n, want, lastOf(stderr))
				}
			}},
		{name: "a summary of many keys per request, at the default export queue", unit: 100, gen: genManyKeys, args: importTo(),
			env: []string{"OTEL_BSP_MAX_QUEUE_SIZE=8192", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2048"}, check: imported},
		{name: "a summary entry of lines of zeros", unit: 15, gen: genZeroLines, args: importTo(), check: zerosRead},
		{name: "a summary of requests of many stages on long lines", unit: 2, gen: genWideSummary, args: importTo("-max-pending", "50"), check: imported},
		{name: "a [Summary] dict of a log", unit: 100, gen: genPprintSummary, args: importTo("-max-pending", "1000"),
			check: func(t *testing.T, n, code int, stderr string) {
				imported(t, n, code, stderr)
				if want := fmt.Sprintf("imported %d,", n); !strings.Contains(stderr, want) {
					t.Errorf("at %d: want %q:\n%s", n, want, lastOf(stderr))
				}
			}},
		{name: "an event dict of a log of lines of zeros", unit: 15, gen: genPprintZeros, args: importTo(), check: zerosRead},
		{name: "a vLLM log", unit: 100, gen: genLog, args: importTo(), check: imported},
		{name: "a log of requests held, their tables' lines padded", unit: 5, gen: genPaddedTables, args: importTo("-max-pending", "500"),
			check: func(t *testing.T, n, code int, stderr string) {
				imported(t, n, code, stderr)
				if want := fmt.Sprintf("imported %d,", n); !strings.Contains(stderr, want) {
					t.Errorf("at %d: want %q:\n%s", n, want, lastOf(stderr))
				}
			}},
		{name: "JSON lines", unit: 200, gen: genRecords, args: importTo(), check: imported},
		{name: "summary of an OTLP/JSON file", unit: 100, gen: genOTLP,
			args: func(in, dir string) []string { return []string{"summary", "-max-spans", "3000", "-file", in} },
			check: func(t *testing.T, n, code int, stderr string) {
				if code != 0 {
					t.Errorf("at %d: exit %d:\n%s", n, code, lastOf(stderr))
				}
			}},
		{name: "table of a request of an OTLP/JSON file", unit: 100, gen: genOTLP,
			args: func(in, dir string) []string {
				return []string{"table", "-max-spans", "3000", "-file", in, "-request", "chatcmpl-0000000000000007"}
			},
			check: func(t *testing.T, n, code int, stderr string) {
				if code != 0 {
					t.Errorf("at %d: exit %d:\n%s", n, code, lastOf(stderr))
				}
			}},
		{name: "diff of two OTLP/JSON files", unit: 100, gen: genOTLP,
			args: func(in, dir string) []string {
				return []string{"diff", "-samples", "500", "-max-spans", "3000", in, in}
			},
			check: diffed},
		{name: "diff of requests of distinct long models and phases", unit: 100, gen: genOTLPDistinct,
			args: func(in, dir string) []string {
				return []string{"diff", "-by", "model", "-samples", "500", "-max-rows", "50", "-max-spans", "3000", in, in}
			},
			check: diffed},
		{name: "diff of two vLLM logs", unit: 100, gen: genLog,
			args:  func(in, dir string) []string { return []string{"diff", "-samples", "500", in, in} },
			check: diffed},
		{name: "diff of one trace of many spans", unit: 200, gen: genOneTrace,
			args:  func(in, dir string) []string { return []string{"diff", "-max-spans", "5000", in, in} },
			check: diffed},
		{name: "table -critical of one trace of many spans", unit: 200, gen: genOneTrace,
			args: func(in, dir string) []string {
				return []string{"table", "-critical", "-max-spans", "5000", "-file", in}
			},
			check: func(t *testing.T, n, code int, stderr string) {
				if code != 0 {
					t.Errorf("at %d: exit %d:\n%s", n, code, lastOf(stderr))
				}
			}},
		{name: "table of one trace of many spans", unit: 200, gen: genOneTrace,
			args: func(in, dir string) []string { return []string{"table", "-max-spans", "5000", "-file", in} },
			check: func(t *testing.T, n, code int, stderr string) {
				if code != 0 {
					t.Errorf("at %d: exit %d:\n%s", n, code, lastOf(stderr))
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var peaks []int64
			for _, times := range []int{1, 10, 100} {
				n := c.unit * times
				in := writeInput(t, dir, "input", n, c.gen)
				peak, code, stderr := peakRSS(t, c.env, c.args(in, dir)...)
				c.check(t, n, code, stderr)
				os.Remove(in)
				peaks = append(peaks, peak)
			}
			t.Logf("peak RSS at 1, 10, 100 times %d units: %v KiB", c.unit, peaks)
			if limit := peaks[1]*5/4 + 24<<10; peaks[2] > limit {
				t.Errorf("peak RSS %d KiB at 100 times the input, %d KiB at 10 times: grows with the input (limit %d KiB)", peaks[2], peaks[1], limit)
			}
		})
	}
}

// diffed checks a run of diff: a report written, nothing beyond -fail-on.
func diffed(t *testing.T, n, code int, stderr string) {
	t.Helper()
	if code != 0 {
		t.Errorf("at %d: exit %d:\n%s", n, code, lastOf(stderr))
	}
}

// zerosRead checks a run on a record of n lines of zeros and a request
// after it: 15 lines are 30 000 values, a record read; more are beyond a
// record's bounds, reported and skipped; the request after it is read.
func zerosRead(t *testing.T, n, code int, stderr string) {
	t.Helper()
	want, wantCode := "imported 1,", 1
	if n == 15 {
		want, wantCode = "imported 2,", 0
	}
	if code != wantCode || !strings.Contains(stderr, want) {
		t.Errorf("at %d lines: exit %d, want %d and %q:\n%s", n, code, wantCode, want, lastOf(stderr))
	}
}

func lastOf(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// genSummary writes a summary as vLLM-Omni writes it, indented: n
// requests of two stages and a hand-over.
func genSummary(w io.Writer, n int) {
	fmt.Fprintf(w, "{\n  \"final_stage_id\": {\"*\": 1},\n  \"overall_summary\": {\"e2e_requests\": %d, \"e2e_wall_time_ms\": 3400.2},\n  \"stage_table\": [\n", n)
	for i := range n {
		fmt.Fprintf(w, `    {
      "request_id": "chatcmpl-%016x",
      "stages": [
        {"stage_id": 0, "stage": "0:thinker", "batch_id": 3, "num_tokens_in": 31, "num_tokens_out": 120, "stage_gen_time_ms": 812.25},
        {"stage_id": 1, "stage": "1:dit", "stage_gen_time_ms": 2410.5, "preprocess_time_ms": 0,
         "diffusion_engine_exec_time_ms": 2301, "scheduler_queue_wait_ms": 0, "kv_recv_time_ms": 12,
         "forward_time_ms": 2105, "vae_decode_time_ms": 150, "output_ready_wait_time_ms": 0, "postprocess_time_ms": 41}
      ]
    }%s
`, i, sep(i, n))
	}
	fmt.Fprint(w, "  ],\n  \"trans_table\": [\n")
	for i := range n {
		fmt.Fprintf(w, "    {\"request_id\": \"chatcmpl-%016x\", \"transfers\": [\n      {\"edge\": \"0->1\", \"size_kbytes\": 2048.5, \"tx_time_ms\": 3.25, \"rx_decode_time_ms\": 1.5, \"in_flight_time_ms\": 0.0}]}%s\n", i, sep(i, n))
	}
	fmt.Fprint(w, "  ],\n  \"e2e_table\": [\n")
	for i := range n {
		fmt.Fprintf(w, "    {\"request_id\": \"chatcmpl-%016x\", \"e2e_total_ms\": 3321.75, \"request_wall_time_ms\": 3321.75}%s\n", i, sep(i, n))
	}
	fmt.Fprint(w, "  ]\n}\n")
}

func sep(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}

// manyKeys is how many keys a request of genManyKeys has that the import
// does not map, in its stage's row and in its end-to-end entry each.
const manyKeys = 250

// genManyKeys writes a summary of n requests, each entry on a line of its
// own, whose stage row and end-to-end entry hold manyKeys keys the import
// does not map (it keeps 64 of each).
func genManyKeys(w io.Writer, n int) {
	keys := func(prefix string) string {
		var b strings.Builder
		for k := range manyKeys {
			fmt.Fprintf(&b, `, "%s_%d": %d.5`, prefix, k, k)
		}
		return b.String()
	}
	stage, e2e := keys("engine_counter"), keys("request_counter")
	fmt.Fprint(w, "{\n \"stage_table\": [\n")
	for i := range n {
		fmt.Fprintf(w, `  {"request_id": "req-%08d", "stages": [{"stage_id": 0, "stage": "0:dit", "stage_gen_time_ms": 10.5, "forward_time_ms": 3%s}]}%s`+"\n", i, stage, sep(i, n))
	}
	fmt.Fprint(w, " ],\n \"e2e_table\": [\n")
	for i := range n {
		fmt.Fprintf(w, `  {"request_id": "req-%08d", "e2e_total_ms": 11%s}%s`+"\n", i, e2e, sep(i, n))
	}
	fmt.Fprint(w, " ]\n}\n")
}

// genZeroLines writes a summary whose one entry holds n lines of 2 000
// zeros, each line within a line's bounds, and a request after it.
func genZeroLines(w io.Writer, n int) {
	fmt.Fprint(w, "{\"stage_table\": [{\"request_id\": \"z\", \"stages\": [{\"stage_id\": 0, \"x\": [\n")
	line := strings.TrimSuffix(strings.Repeat("0,", 2000), ",")
	for i := range n {
		fmt.Fprintf(w, "%s%s\n", line, sep(i, n))
	}
	fmt.Fprint(w, "]}]}],\n \"e2e_table\": [{\"request_id\": \"after\", \"e2e_total_ms\": 5}]}\n")
}

// genWideSummary writes a summary of n requests of 500 stages, each
// request's entry on one line.
func genWideSummary(w io.Writer, n int) {
	fmt.Fprint(w, "{\"stage_table\": [\n")
	for i := range n {
		fmt.Fprintf(w, "{\"request_id\": \"wide-%d\", \"stages\": [", i)
		for s := range 500 {
			if s > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprintf(w, "{\"stage_id\": %d, \"stage\": \"%d:s\", \"stage_gen_time_ms\": 1.5, \"forward_time_ms\": 1}", s, s)
		}
		fmt.Fprintf(w, "]}%s\n", sep(i, n))
	}
	fmt.Fprint(w, "],\n\"e2e_table\": [\n")
	for i := range n {
		fmt.Fprintf(w, "{\"request_id\": \"wide-%d\", \"e2e_total_ms\": 1000}%s\n", i, sep(i, n))
	}
	fmt.Fprint(w, "]}\n")
}

const logPrefix = "INFO 11-30 05:30:00 [omni.py:402] "

// genPprintSummary writes a log holding a [Summary] dict of n requests,
// as pformat spreads it over lines.
func genPprintSummary(w io.Writer, n int) {
	fmt.Fprintf(w, "%s[Summary] {'final_stage_id': {'*': 0},\n%s 'overall_summary': {'e2e_requests': %d},\n%s 'stage_table': [", logPrefix, logPrefix, n, logPrefix)
	for i := range n {
		if i > 0 {
			fmt.Fprintf(w, "%s                  ", logPrefix)
		}
		fmt.Fprintf(w, "{'request_id': 'chatcmpl-%016x',\n%s                   'stages': [{'num_tokens_out': 120,\n%s                               'stage': '0:thinker',\n%s                               'stage_gen_time_ms': 9.75,\n%s                               'stage_id': 0}]}", i, logPrefix, logPrefix, logPrefix, logPrefix)
		if i < n-1 {
			fmt.Fprint(w, ",\n")
		}
	}
	fmt.Fprintf(w, "],\n%s 'trans_table': [],\n%s 'e2e_table': [", logPrefix, logPrefix)
	for i := range n {
		if i > 0 {
			fmt.Fprintf(w, "%s                ", logPrefix)
		}
		end := ",\n"
		if i == n-1 {
			end = "]}\n"
		}
		fmt.Fprintf(w, "{'e2e_total_ms': 10.5, 'request_id': 'chatcmpl-%016x'}%s", i, end)
	}
}

// genPprintZeros writes a log whose event dict holds n lines of 2 000
// zeros, and a request after it.
func genPprintZeros(w io.Writer, n int) {
	fmt.Fprintf(w, "%s{'type': 'request_level_metrics', 'request_id': 'z', 'e2e_time_ms': 5, 'x': [\n", logPrefix)
	line := strings.TrimSuffix(strings.Repeat("0, ", 2000), ", ")
	for i := range n {
		fmt.Fprintf(w, "%s %s%s\n", logPrefix, line, sep(i, n))
	}
	fmt.Fprintf(w, "%s ]}\n", logPrefix)
	fmt.Fprintf(w, "%s[OmniTiming] req=after total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]\n", logPrefix)
}

// genLog writes a vLLM log of n requests: each one's [OmniTiming] line
// and stage table among other lines.
func genLog(w io.Writer, n int) {
	for i := range n {
		fmt.Fprintf(w, `INFO 11-30 05:10:44 [serving_chat.py:1401] Finished request chatcmpl-%016x.
INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=chatcmpl-%016x total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]
INFO 11-30 05:10:44 [stats.py:560] [StageRequestStats [request_id=chatcmpl-%016x]]
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+
INFO 11-30 05:10:44 [stats.py:560] | Field                         | 0:thinker |     1:dit |
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+
INFO 11-30 05:10:44 [stats.py:560] | diffusion_engine_exec_time_ms |           |     2,301 |
INFO 11-30 05:10:44 [stats.py:560] | stage_gen_time_ms             |   812.250 | 2,410.500 |
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+
`, i, i, i)
	}
}

// genPaddedTables writes a vLLM log of n requests, each a stage table
// alone (unfinished: held until the log ends), whose two rows are padded
// to 100 kB lines: what a request holds of its lines is a few bytes of
// each.
func genPaddedTables(w io.Writer, n int) {
	pad := strings.Repeat(" ", 100_000)
	const p = "INFO 11-30 05:10:44 [stats.py:560] "
	for i := range n {
		fmt.Fprintf(w, "%s[StageRequestStats [request_id=padded-%d]]\n%s+-------+-------+\n%s| Field | 0:dit |\n%s+-------+-------+\n", p, i, p, p, p)
		fmt.Fprintf(w, "%s| forward_time_ms | 5%s|\n%s| padded_key | v%s|\n%s+-------+-------+\n", p, pad, p, pad, p)
	}
}

// genRecords writes n of this project's JSON-lines records.
func genRecords(w io.Writer, n int) {
	for i := range n {
		fmt.Fprintf(w, `{"request_id": "chatcmpl-%016x", "model": "Qwen/Qwen-Image", "arrival_time": %d.125, "modality": "image", "num_inference_steps": 50, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": %d.127, "stage_gen_time_ms": 2310.5, "diffusion_metrics": {"scheduler_queue_wait_ms": 12.0, "diffusion_engine_exec_time_ms": 2100.0, "postprocess_time_ms": 45.2}}]}`+"\n", i, 1796000000+i, 1796000000+i)
	}
}

// otlpSpan is one span of an OTLP/JSON document as import -out writes it.
func otlpSpan(trace, span, parent uint64, name string, start, end int64, attrs string) string {
	p := ""
	if parent != 0 {
		p = fmt.Sprintf(`"parentSpanId":"%016x",`, parent)
	}
	return fmt.Sprintf(`{"traceId":"%032x","spanId":"%016x",%s"name":"%s","kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s{"key":"omni.timing.reconstructed","value":{"boolValue":true}}],"status":{}}`,
		trace, span, p, name, start, end, attrs)
}

// genOTLP writes what import -out writes for n single-stage requests: six
// spans each, a document of about 500 spans a line, the request span of
// each after its phases.
func genOTLP(w io.Writer, n int) {
	var batch []string
	flush := func() {
		fmt.Fprintf(w, `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"omnitrace"}}]},"scopeSpans":[{"scope":{"name":"otelomni"},"spans":[%s]}]}]}`+"\n", strings.Join(batch, ","))
		batch = batch[:0]
	}
	for i := range n {
		trace := uint64(i + 1)
		t0 := int64(1796000000000000000) + int64(i)*1e7
		root := trace<<8 | 1
		for k, ph := range []string{"queue_wait", "preprocess", "exec", "postprocess"} {
			batch = append(batch, otlpSpan(trace, trace<<8|uint64(k+2), root, "omni.diffusion."+ph, t0+int64(k)*1e6, t0+int64(k+1)*1e6,
				fmt.Sprintf(`{"key":"omni.phase","value":{"stringValue":"%s"}},`, ph)))
		}
		batch = append(batch, otlpSpan(trace, trace<<8|6, root, "omni.output", t0+4e6, t0+5e6, ""))
		batch = append(batch, otlpSpan(trace, root, 0, "omni.request", t0, t0+5e6,
			fmt.Sprintf(`{"key":"omni.request.id","value":{"stringValue":"chatcmpl-%016x"}},{"key":"omni.stage.name","value":{"stringValue":"dit"}},{"key":"omni.stage.type","value":{"stringValue":"diffusion"}},{"key":"omni.diffusion.num_inference_steps","value":{"intValue":"50"}},`, i)))
		if len(batch) >= 500 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// genOTLPDistinct writes n single-stage requests as genOTLP does, each
// of its own model (1 KiB names) with a phase of its own name (1 KiB):
// far more rows than a diff keeps.
func genOTLPDistinct(w io.Writer, n int) {
	var batch []string
	flush := func() {
		fmt.Fprintf(w, `{"resourceSpans":[{"scopeSpans":[{"spans":[%s]}]}]}`+"\n", strings.Join(batch, ","))
		batch = batch[:0]
	}
	long := strings.Repeat("m", 1<<10)
	for i := range n {
		trace := uint64(i + 1)
		t0 := int64(1796000000000000000) + int64(i)*1e7
		root := trace<<8 | 1
		batch = append(batch, otlpSpan(trace, trace<<8|2, root, "omni.diffusion.exec", t0, t0+3e6, ""))
		batch = append(batch, otlpSpan(trace, trace<<8|3, root, fmt.Sprintf("phase-%d-%s", i, long), t0+1e6, t0+2e6, ""))
		batch = append(batch, otlpSpan(trace, root, 0, "omni.request", t0, t0+5e6,
			fmt.Sprintf(`{"key":"gen_ai.request.model","value":{"stringValue":"model-%d-%s"}},{"key":"omni.output.modality","value":{"stringValue":"image-%d-%s"}},`, i, long, i, long)))
		if len(batch) >= 300 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// genOneTrace writes one trace of a request and n phase spans under it,
// in documents of 500 spans.
func genOneTrace(w io.Writer, n int) {
	var batch []string
	flush := func() {
		fmt.Fprintf(w, `{"resourceSpans":[{"scopeSpans":[{"spans":[%s]}]}]}`+"\n", strings.Join(batch, ","))
		batch = batch[:0]
	}
	t0 := int64(1796000000000000000)
	for i := range n {
		batch = append(batch, otlpSpan(1, uint64(i+2), 1, "omni.diffusion.postprocess", t0+int64(i)*1e3, t0+int64(i+1)*1e3,
			`{"key":"omni.phase","value":{"stringValue":"postprocess"}},`))
		if len(batch) >= 500 {
			flush()
		}
	}
	batch = append(batch, otlpSpan(1, 1, 0, "omni.request", t0, t0+int64(n+1)*1e3, `{"key":"omni.request.id","value":{"stringValue":"one"}},{"key":"omni.stage.name","value":{"stringValue":"dit"}},{"key":"omni.stage.type","value":{"stringValue":"diffusion"}},`))
	flush()
}
