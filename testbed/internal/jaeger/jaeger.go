// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package jaeger starts a real Jaeger v2 (built from the tools module) on
// loopback for tests and demos, and reads traces back through its HTTP API
// (/api/v3). Jaeger's built-in configuration binds a dozen fixed ports, so
// this package gives it a configuration of its own: in-memory storage, the
// OTLP receivers and the query API only, all on free loopback ports, so that
// several can run at once.
package jaeger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/otelomni/otelomni/omnitrace/jaegerquery"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RootModule is the module path of the repository root.
const RootModule = "github.com/otelomni/otelomni"

// Binary returns the path of the Jaeger binary: $OTELOMNI_JAEGER, or
// tools/bin/jaeger under the repository root (built by `make jaeger-bin`).
func Binary() (string, error) {
	if p := os.Getenv("OTELOMNI_JAEGER"); p != "" {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "tools", "bin", "jaeger")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("jaeger: %s not built (run `make jaeger-bin`): %w", p, err)
	}
	return p, nil
}

// RepoRoot finds the repository root: the nearest directory up from the
// working directory whose go.mod declares RootModule.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+RootModule+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("jaeger: repository root not found above the working directory")
		}
		dir = parent
	}
}

// Jaeger is a running Jaeger process.
type Jaeger struct {
	// OTLPGRPC and OTLPHTTP are the OTLP receivers' host:port.
	OTLPGRPC, OTLPHTTP string
	// Query is the query API's host:port.
	Query string
	// Health is the health check's host:port (GET /status).
	Health    string
	queryGRPC string

	cmd  *exec.Cmd
	dir  string
	logs *syncBuffer
	done chan struct{}
	stop sync.Once
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    # No traces of its own: they would go to the OTLP default, 127.0.0.1:4317,
    # which is not this Jaeger's, and stopping would wait on their export.
    enable_tracing: false
    storage:
      traces: mem
    http:
      endpoint: %[1]s
    grpc:
      endpoint: %[2]s
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %[3]s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[4]s
      http:
        endpoint: %[5]s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Start starts Jaeger from bin on free loopback ports and waits until it is
// healthy (at most 60 s). Stop it with [Jaeger.Stop].
func Start(ctx context.Context, bin string) (*Jaeger, error) {
	var lastErr error
	// A free port can be taken between choosing it and Jaeger binding it:
	// try a few times.
	for attempt := 0; attempt < 3; attempt++ {
		j, err := start(ctx, bin)
		if err == nil {
			return j, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// Ports are the loopback addresses a Jaeger listens on.
type Ports struct {
	Query, QueryGRPC, Health, OTLPGRPC, OTLPHTTP string
}

// FreePorts picks free loopback ports, for a Jaeger to start on later (a
// test whose collector comes up after the engine does).
func FreePorts() (Ports, error) {
	p, err := freePorts(5)
	if err != nil {
		return Ports{}, err
	}
	return Ports{Query: p[0], QueryGRPC: p[1], Health: p[2], OTLPGRPC: p[3], OTLPHTTP: p[4]}, nil
}

func start(ctx context.Context, bin string) (*Jaeger, error) {
	p, err := FreePorts()
	if err != nil {
		return nil, err
	}
	return StartOn(ctx, bin, p)
}

// StartOn starts Jaeger from bin on the given ports and waits until it is
// healthy (at most 60 s).
func StartOn(ctx context.Context, bin string, p Ports) (*Jaeger, error) {
	return startOn(ctx, bin, p, nil)
}

// startOn is StartOn with env added to Jaeger's environment.
func startOn(ctx context.Context, bin string, p Ports, env []string) (*Jaeger, error) {
	j := &Jaeger{
		Query: p.Query, Health: p.Health, OTLPGRPC: p.OTLPGRPC, OTLPHTTP: p.OTLPHTTP, queryGRPC: p.QueryGRPC,
		logs: &syncBuffer{}, done: make(chan struct{}),
	}
	var err error
	j.dir, err = os.MkdirTemp("", "otelomni-jaeger-")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(j.dir, "config.yaml")
	cfg := fmt.Sprintf(config, p.Query, p.QueryGRPC, p.Health, p.OTLPGRPC, p.OTLPHTTP)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	j.cmd = exec.Command(bin, "--config", "file:"+cfgPath)
	j.cmd.Env = append(append(jaegerEnv(), "JAEGER_LISTEN_HOST=127.0.0.1"), env...)
	j.cmd.Stdout, j.cmd.Stderr = j.logs, j.logs
	// Its own process group, so that Stop reaches it alone.
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := j.cmd.Start(); err != nil {
		_ = os.RemoveAll(j.dir)
		return nil, fmt.Errorf("jaeger: starting %s: %w", bin, err)
	}
	go func() { _ = j.cmd.Wait(); close(j.done) }()

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-j.done:
			_ = os.RemoveAll(j.dir)
			return nil, fmt.Errorf("jaeger exited during start-up:\n%s", j.logs.String())
		case <-ctx.Done():
			j.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if j.healthy() {
			return j, nil
		}
	}
	j.Stop()
	return nil, fmt.Errorf("jaeger not healthy after 60s:\n%s", j.logs.String())
}

func (j *Jaeger) healthy() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + j.Health + "/status")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	// The query API must answer too.
	resp, err = c.Get("http://" + j.Query + "/api/v3/services")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop stops Jaeger (SIGTERM, then SIGKILL after 10 s) and removes its
// configuration. It is safe to call more than once.
func (j *Jaeger) Stop() {
	j.stop.Do(func() {
		if j.cmd.Process != nil {
			_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-j.done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
				<-j.done
			}
		}
		_ = os.RemoveAll(j.dir)
	})
}

// Kill kills Jaeger at once, as a crash would; for fault tests.
func (j *Jaeger) Kill() {
	j.stop.Do(func() {
		if j.cmd.Process != nil {
			_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
			<-j.done
		}
		_ = os.RemoveAll(j.dir)
	})
}

// Pid returns Jaeger's process id.
func (j *Jaeger) Pid() int { return j.cmd.Process.Pid }

// Logs returns what Jaeger printed.
func (j *Jaeger) Logs() string { return j.logs.String() }

// Ports returns the addresses this Jaeger listens on, to start another on
// the same ones after this one stopped.
func (j *Jaeger) Ports() Ports {
	return Ports{Query: j.Query, QueryGRPC: j.queryGRPC, Health: j.Health, OTLPGRPC: j.OTLPGRPC, OTLPHTTP: j.OTLPHTTP}
}

// OTLPEndpoint returns the OTLP endpoint URL for protocol "grpc" or
// "http/protobuf", as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
func (j *Jaeger) OTLPEndpoint(protocol string) string { return j.Ports().OTLPEndpoint(protocol) }

// OTLPEndpoint returns the OTLP endpoint URL for protocol "grpc" or
// "http/protobuf".
func (p Ports) OTLPEndpoint(protocol string) string {
	if protocol == "grpc" {
		return "http://" + p.OTLPGRPC
	}
	return "http://" + p.OTLPHTTP
}

// jaegerEnv is this process's environment without the OTEL_* variables:
// Jaeger traces itself with the OpenTelemetry SDK, and would otherwise take
// a test's OTEL_SERVICE_NAME and store its own spans under it.
func jaegerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil // enough to diagnose; never grow without bound
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Client returns a client of j's query API.
func (j *Jaeger) Client() *jaegerquery.Client { return &jaegerquery.Client{Base: "http://" + j.Query} }

// WaitTraces searches until at least want request traces (traces that
// hold an omni.request span) of service are there, or the deadline passes
// (the batch processors on both sides delay arrival), and returns the
// request traces it found last. Traces of the engine's own (its start, its
// batches) are left out.
func (j *Jaeger) WaitTraces(ctx context.Context, service string, from, to time.Time, want int, within time.Duration) (map[string][]traceview.Span, error) {
	deadline := time.Now().Add(within)
	var last map[string][]traceview.Span
	for {
		ss, err := j.Client().Search(ctx, service, from, to, want*2+50)
		if err != nil {
			return last, err
		}
		last = RequestTraces(traceview.ByTrace(ss))
		if len(last) >= want || time.Now().After(deadline) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// RequestTraces returns the traces that hold an omni.request span.
func RequestTraces(traces map[string][]traceview.Span) map[string][]traceview.Span {
	out := make(map[string][]traceview.Span, len(traces))
	for id, tr := range traces {
		for _, s := range tr {
			if s.Name == spans.RequestSpanName {
				out[id] = tr
				break
			}
		}
	}
	return out
}
