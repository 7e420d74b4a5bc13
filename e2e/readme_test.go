package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/internal/jaeger"
	"github.com/otelomni/otelomni/internal/jaeger/jaegertest"
)

// TestReadmeJaegerCommandRunsClean runs the README's "send to your Jaeger"
// command as written, with only its endpoint's port moved to a test Jaeger:
// a command shown to a new user must end without an error.
func TestReadmeJaegerCommandRunsClean(t *testing.T) {
	root, err := jaeger.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The command: continuation lines joined, from the endpoint to go run.
	text := strings.ReplaceAll(string(readme), "\\\n", " ")
	line := regexp.MustCompile(`(?m)^OTEL_EXPORTER_OTLP_ENDPOINT=http://127\.0\.0\.1:4318 .*go run \./examples/diffusion.*$`).FindString(text)
	if line == "" {
		t.Fatal("README.md shows no command sending the demo to a Jaeger on 127.0.0.1:4318")
	}
	fields := strings.Fields(line)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	var args []string
	for i, f := range fields {
		if f == "go" {
			args = fields[i+3:] // after "go run ./examples/diffusion"
			break
		}
		env = append(env, f)
	}
	j := jaegertest.Start(t)
	service := ""
	for i, kv := range env {
		if strings.HasPrefix(kv, "OTEL_EXPORTER_OTLP_ENDPOINT=") {
			env[i] = "OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPEndpoint("http/protobuf")
		}
		if v, ok := strings.CutPrefix(kv, "OTEL_SERVICE_NAME="); ok {
			service = v
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	from := time.Now().Add(-time.Second)
	cmd := exec.CommandContext(ctx, bin["diffusion"], args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "time=") && strings.Contains(l, " msg=") && strings.Contains(l, " trace_id=") {
			continue // the simulated engine's own log records, of its scenarios' failures
		}
		if low := strings.ToLower(l); strings.Contains(low, "error") && !strings.Contains(low, "ended with an error") ||
			strings.HasPrefix(low, "shutdown") {
			t.Errorf("the README's command printed %q", l)
		}
	}
	traces, err := j.WaitTraces(ctx, service, from, time.Now().Add(time.Minute), 20, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 20 {
		t.Errorf("Jaeger holds %d traces of %s, want the 20 the command sends", len(traces), service)
	}
}
