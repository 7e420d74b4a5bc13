// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command jaeger shows the diffusion demo's traces arriving in a real
// Jaeger: it starts Jaeger (built from tools/ by `make jaeger-bin`) on
// loopback, runs the demo exporting to it over OTLP, reads every trace back
// through Jaeger's HTTP API and prints its tree, then stops Jaeger, or, with
// -keep, leaves it running and says how to query it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

func main() {
	requests := flag.Int("requests", 12, "requests the demo sends")
	protocol := flag.String("protocol", "http/protobuf", "OTLP protocol: grpc or http/protobuf")
	keep := flag.Bool("keep", false, "keep Jaeger running after the demo (until Ctrl-C)")
	flag.Parse()
	log.SetFlags(0)
	if err := run(*requests, *protocol, *keep); err != nil {
		log.Fatal(err)
	}
}

func run(requests int, protocol string, keep bool) error {
	ctx := context.Background()
	root, err := jaeger.RepoRoot()
	if err != nil {
		return err
	}
	bin, err := jaeger.Binary()
	if err != nil {
		return err
	}
	j, err := jaeger.Start(ctx, bin)
	if err != nil {
		return err
	}
	defer j.Stop()
	fmt.Printf("Jaeger is up (pid %d): OTLP gRPC %s, OTLP HTTP %s, query API http://%s\n", j.Pid(), j.OTLPGRPC, j.OTLPHTTP, j.Query)

	const service = "omni-diffusion-demo"
	from := time.Now().Add(-time.Second)
	demo := exec.Command("go", "run", "./examples/diffusion", "-requests", strconv.Itoa(requests), "-quiet")
	demo.Dir = root
	demo.Env = append(os.Environ(),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPEndpoint(protocol),
		"OTEL_EXPORTER_OTLP_PROTOCOL="+protocol,
		"OTEL_METRICS_EXPORTER=none", // Jaeger takes traces only
		"OTEL_SERVICE_NAME="+service)
	demo.Stdout, demo.Stderr = os.Stdout, os.Stderr
	fmt.Printf("running the demo: OTEL_EXPORTER_OTLP_ENDPOINT=%s OTEL_EXPORTER_OTLP_PROTOCOL=%s OTEL_METRICS_EXPORTER=none go run ./examples/diffusion -requests %d\n\n",
		j.OTLPEndpoint(protocol), protocol, requests)
	if err := demo.Run(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	traces, err := j.WaitTraces(ctx, service, from, time.Now().Add(time.Minute), requests, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("\nread back from Jaeger's /api/v3: %d traces of %d requests sent\n\n", len(traces), requests)
	ids := make([]string, 0, len(traces))
	for id := range traces {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Printf("trace %s\n", id)
		printTree(traces[id])
		fmt.Println()
	}
	if len(traces) != requests {
		return fmt.Errorf("%d traces arrived, %d requests were sent", len(traces), requests)
	}
	if !keep {
		return nil
	}
	fmt.Printf("Jaeger keeps running. Query it:\n  curl 'http://%s/api/v3/services'\n  curl 'http://%s/api/v3/traces/%s'\n"+
		"  curl 'http://%s/api/v3/traces?query.service_name=%s&query.start_time_min=%s&query.start_time_max=%s'\n"+
		"Send more: OTEL_EXPORTER_OTLP_ENDPOINT=%s OTEL_EXPORTER_OTLP_PROTOCOL=%s OTEL_METRICS_EXPORTER=none go run ./examples/diffusion\nCtrl-C stops it.\n",
		j.Query, j.Query, ids[0], j.Query, service, from.UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		j.OTLPEndpoint(protocol), protocol)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}

// printTree prints a trace as Jaeger stored it: each span under its
// parent, with its duration.
func printTree(tr []traceview.Span) {
	var walk func(n *traceview.Node, depth int)
	walk = func(n *traceview.Node, depth int) {
		s := n.Span
		label := s.Name
		if id := s.Str(string(attrs.RequestIDKey)); id != "" {
			label += fmt.Sprintf(" %q", id)
		}
		status := ""
		if et := s.Str(string(semconv.ErrorTypeKey)); et != "" {
			status = "  error.type=" + et
		}
		fmt.Printf("  %-*s %10.3f ms%s\n", 44, indent(depth)+label, float64(s.Duration())/1e6, status)
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	roots, _ := traceview.Trees(tr)
	for _, r := range roots {
		walk(r, 0)
	}
}

func indent(n int) string {
	return fmt.Sprintf("%*s", 2*n, "")
}
