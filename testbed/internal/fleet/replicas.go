// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// Traffic is what the replicas of the multi-stage example serve.
type Traffic struct {
	// Replicas is how many copies of the example run at once, each a
	// gateway and one process per stage of both pipelines.
	Replicas int
	// Requests and Concurrency are per replica.
	Requests, Concurrency int
	// Mix is the example's -mix cycle; Slow and QueueWait its -slow and
	// -queue-wait.
	Mix             string
	Slow, QueueWait time.Duration
	// Service is the gateway's service.name; its stages are Service-NAME.
	Service string
	// Seed is the first replica's -seed (0 is 1), the next ones' follow:
	// two runs into one tier need seeds of their own, hence request ids.
	Seed int
	// Env is set in every replica's processes on top of ReplicaEnv: the
	// collector's OMNI_* thresholds, which the engines' exemplars follow.
	Env map[string]string
}

// Request is one request a replica served, as its manifest tells.
type Request struct {
	ID, Pipeline string
	Special      pipeline.Special
}

// Scenario is the request's scenario in a mixed run.
func (r Request) Scenario() pipeline.Special {
	switch r.Special {
	case pipeline.Slow, pipeline.Saturated, pipeline.Failing:
		return r.Special
	}
	return pipeline.Normal
}

// BuildExample builds the multi-stage example into dir and returns the
// binary's path.
func BuildExample(ctx context.Context, dir string) (string, error) {
	root, err := jaeger.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "omni")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./examples/omni")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the omni example: %w\n%s", err, b)
	}
	return out, nil
}

// maxOutput bounds what a replica's output error quotes.
const maxOutput = 4 << 10

// RunReplicas runs tr.Replicas copies of the example binary bin at once,
// exporting spans and metrics over OTLP/HTTP to endpoint, and returns every
// request they served. Each replica has its own seed, hence its own request
// ids. Files go to dir.
func RunReplicas(ctx context.Context, bin, endpoint, dir string, tr Traffic) ([]Request, error) {
	var (
		mu   sync.Mutex
		all  []Request
		errs []error
		wg   sync.WaitGroup
	)
	for r := range tr.Replicas {
		wg.Go(func() {
			reqs, err := runReplica(ctx, bin, endpoint, dir, r, tr)
			mu.Lock()
			defer mu.Unlock()
			all = append(all, reqs...)
			if err != nil {
				errs = append(errs, fmt.Errorf("replica %d: %w", r, err))
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return all, errs[0]
	}
	return all, nil
}

func runReplica(ctx context.Context, bin, endpoint, dir string, r int, tr Traffic) ([]Request, error) {
	manifest := filepath.Join(dir, fmt.Sprintf("replica-%d.jsonl", r))
	cmd := exec.CommandContext(ctx, bin,
		"-requests", strconv.Itoa(tr.Requests), "-concurrency", strconv.Itoa(tr.Concurrency),
		"-seed", strconv.Itoa(max(tr.Seed, 1)+r), "-manifest", manifest,
		"-mix", tr.Mix, "-slow", tr.Slow.String(), "-queue-wait", tr.QueueWait.String())
	cmd.Env = ReplicaEnv(endpoint, tr.Service)
	for k, v := range tr.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > maxOutput {
			out = out[len(out)-maxOutput:]
		}
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return readManifest(manifest)
}

// ReplicaEnv is a replica's environment: this process's, less its OTEL_*
// variables, exporting spans and metrics to endpoint. The span batch delay
// is short, since it adds to what the collector's decision wait must cover.
func ReplicaEnv(endpoint, service string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME="+service,
		"OTEL_METRICS_EXPORTER=otlp",
		"OTEL_BSP_SCHEDULE_DELAY=200")
}

func readManifest(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m struct{ ID, Pipeline, Special string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", path, err)
		}
		out = append(out, Request{ID: m.ID, Pipeline: m.Pipeline, Special: pipeline.Special(m.Special)})
	}
	return out, sc.Err()
}
