// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command omni runs two simulated multi-stage pipelines, each stage a
// separate OS process talking to a gateway over pipes, each process with
// its own tracer provider and exporter; every request is still one trace:
//
//   - speech: thinker (LLM) -> talker (LLM) -> code2wav (streams audio chunks);
//   - image: an autoregressive LLM stage -> a diffusion stage that receives
//     its KV cache.
//
// With none of OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// and OTEL_TRACES_EXPORTER set, the stage processes send their spans to the
// gateway, which prints each request's waterfall and a summary. With one
// set, every process exports over OTLP there.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
)

func main() {
	requests := flag.Int("requests", 6, "requests to serve (speech and image alternate)")
	concurrency := flag.Int("concurrency", 2, "requests in flight at once")
	seed := flag.Uint64("seed", 1, "seed of the simulated durations")
	waterfall := flag.Bool("waterfall", false, "print waterfalls and the summary even when exporting")
	manifest := flag.String("manifest", "", "write each request's id, pipeline and special case to this file (JSON lines)")
	flag.StringVar(&outFile, "out", "", "with no OTEL_* exporter set: also write every process's spans to this OTLP/JSON file")
	stage := flag.String("stage", "", "run as this stage's process (internal)")
	pipe := flag.String("pipeline", "", "the stage's pipeline (internal)")
	flag.Parse()
	log.SetFlags(0)
	err := parseScenario()
	if err != nil {
		log.Fatal(err)
	}
	if *stage != "" {
		err = runStage(*pipe, *stage, *seed)
	} else {
		err = runGateway(os.Stdout, *requests, *concurrency, *seed, *waterfall, *manifest)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func embedded() bool {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		if os.Getenv(k) != "" {
			return false
		}
	}
	return true
}

// child is one stage process.
type child struct {
	cmd     *exec.Cmd
	in      *encoder
	stdin   io.Closer
	mu      sync.Mutex
	pending map[string]chan pipeline.Message
	done    chan struct{}
}

func (c *child) call(m pipeline.Message) (pipeline.Message, error) {
	ch := make(chan pipeline.Message, 1)
	c.mu.Lock()
	c.pending[m.ID] = ch
	c.mu.Unlock()
	if err := c.in.send(m); err != nil {
		return pipeline.Message{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-c.done:
		return pipeline.Message{}, errors.New("stage process exited")
	case <-time.After(30 * time.Second):
		return pipeline.Message{}, errors.New("stage process did not answer in 30s")
	}
}

// outFile is -out: where the embedded mode also writes the spans.
var outFile string

// spanSink gathers every process's spans in the embedded mode.
type spanSink struct {
	mu    sync.Mutex
	spans []traceview.Span
}

func (s *spanSink) add(ss []traceview.Span) {
	s.mu.Lock()
	s.spans = append(s.spans, ss...)
	s.mu.Unlock()
}

func (s *spanSink) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	s.add(traceview.FromSDK(ss))
	return nil
}

func (s *spanSink) Shutdown(context.Context) error { return nil }

func runGateway(out io.Writer, requests, concurrency int, seed uint64, waterfall bool, manifest string) error {
	ctx := context.Background()
	show := waterfall || embedded()
	sink := &spanSink{}
	opts := []otelsetup.Option{otelsetup.WithServiceName("omni-gateway"), otelsetup.WithFallbackExporter(sink)}
	if waterfall && !embedded() {
		opts = append(opts, otelsetup.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(sink)))
	}
	tel, err := otelsetup.Setup(ctx, opts...)
	if err != nil {
		return err
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	dest := tel.Exporter()
	if embedded() {
		dest = "nowhere: no OTEL_* exporter or endpoint is set, so every process sends its spans to this one, which prints them"
	}
	fmt.Fprintf(out, "otelomni multi-stage demo: %d requests; exporting to %s\n", requests, dest)

	children, err := startChildren(seed, show, waterfall && !embedded(), sink)
	if err != nil {
		return err
	}
	var pids []int
	for _, c := range children {
		pids = append(pids, c.cmd.Process.Pid)
	}
	sort.Ints(pids)
	fmt.Fprintf(out, "gateway pid %d, stage processes %v\n\n", os.Getpid(), pids)

	var mf *json.Encoder
	if manifest != "" {
		f, err := os.Create(manifest)
		if err != nil {
			return err
		}
		defer f.Close()
		mf = json.NewEncoder(f)
	}
	ids := make([]string, requests)
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	failed := 0
	for w := 0; w < max(concurrency, 1); w++ {
		wg.Go(func() {
			for i := range jobs {
				pipe, special := plan(i)
				id := fmt.Sprintf("chatcmpl-%s-%04x%04x", pipe, seed, i)
				mu.Lock()
				ids[i] = id
				if mf != nil {
					_ = mf.Encode(map[string]string{"id": id, "pipeline": pipe, "special": string(special)})
				}
				mu.Unlock()
				if err := serve(ctx, in, children, id, pipe, special); err != nil && !failedOnPurpose(special) {
					mu.Lock()
					failed++
					mu.Unlock()
					fmt.Fprintf(out, "request %s: %v\n", id, err)
				}
			}
		})
	}
	for i := 0; i < requests; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	// Closing their input ends the stage processes; they flush their spans
	// first.
	for _, c := range children {
		_ = c.stdin.Close()
	}
	for _, c := range children {
		<-c.done
		_ = c.cmd.Wait()
	}
	_ = tel.Shutdown(ctx)
	fmt.Fprintf(out, "served %d requests (%d failed)\n", requests, failed)
	if outFile != "" && embedded() {
		if err := writeSpans(outFile, sink.spans); err != nil {
			return err
		}
	}

	if show {
		traces := traceview.ByTrace(sink.spans)
		byID := map[string][]traceview.Span{}
		for _, tr := range traces {
			for _, s := range tr {
				if s.ParentID == "" {
					byID[s.Str(string(attrs.RequestIDKey))] = tr
				}
			}
		}
		var summary traceview.Summary
		fmt.Fprintln(out)
		for _, id := range ids {
			tr := byID[id]
			pids := map[int64]bool{}
			for _, s := range tr {
				pids[s.PID] = true
			}
			fmt.Fprintf(out, "(%d spans from %d processes)\n", len(tr), len(pids))
			traceview.Waterfall(out, tr)
			summary.Add(tr)
		}
		fmt.Fprintln(out, "summary per phase (measured: requests that measured it / all; a phase not measured is not a 0):")
		summary.Write(out)
	}
	if failed > 0 {
		return fmt.Errorf("%d requests failed", failed)
	}
	return nil
}

// writeSpans writes the spans to an OTLP/JSON file.
func writeSpans(name string, ss []traceview.Span) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := traceview.WriteOTLPJSON(f, ss); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// serve sends one request through its pipeline's stages.
func serve(ctx context.Context, in *otelomni.Instrumenter, children map[string]*child, id, pipe string, special pipeline.Special) error {
	stages := pipeline.Pipelines[pipe]
	modality := attrs.ModalityAudio
	if pipe == "image" {
		modality = attrs.ModalityImage
	}
	ctx, req := in.Start(ctx, otelomni.RequestInfo{ID: id, Model: stages[0].Model, Modality: modality})
	msg := pipeline.Message{Type: "request", ID: id, Pipeline: pipe, Special: special, Trace: propagation.MapCarrier{}}
	in.Inject(ctx, msg.Trace)
	for _, st := range stages {
		reply, err := children[pipe+"/"+st.Name].call(msg)
		if err == nil && reply.Type == "error" {
			err = errors.New(reply.Error)
		}
		if err != nil {
			err = fmt.Errorf("stage %s: %w: %w", st.Name, otelomni.ErrStageError, err)
			req.End(err)
			return err
		}
		msg = pipeline.Message{Type: "request", ID: id, Pipeline: pipe, Special: special, Trace: reply.Trace, Transfer: reply.Transfer}
	}
	req.End(nil)
	return nil
}

func startChildren(seed uint64, show, alsoExporting bool, sink *spanSink) (map[string]*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	base := os.Getenv("OTEL_SERVICE_NAME")
	if base == "" {
		base = "omni"
	}
	children := map[string]*child{}
	for _, pipe := range []string{"speech", "image"} {
		for _, st := range pipeline.Pipelines[pipe] {
			cmd := exec.Command(self, append([]string{"-stage", st.Name, "-pipeline", pipe, "-seed", fmt.Sprint(seed)}, scenarioArgs()...)...)
			cmd.Env = append(os.Environ(), "OTEL_SERVICE_NAME="+base+"-"+st.Name)
			if alsoExporting {
				cmd.Env = append(cmd.Env, showEnv+"=1")
			}
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				return nil, err
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				return nil, err
			}
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			c := &child{cmd: cmd, in: &encoder{enc: json.NewEncoder(stdin)}, stdin: stdin,
				pending: map[string]chan pipeline.Message{}, done: make(chan struct{})}
			go c.read(stdout, show, sink)
			children[pipe+"/"+st.Name] = c
		}
	}
	return children, nil
}

// read delivers a stage process's answers, and its spans to the sink.
func (c *child) read(r io.Reader, show bool, sink *spanSink) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m pipeline.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		if m.Type == "spans" {
			if show {
				_ = traceview.ReadOTLPJSON(bytes.NewReader(m.OTLP), func(ss []traceview.Span) error {
					sink.add(ss)
					return nil
				})
			}
			continue
		}
		c.mu.Lock()
		ch := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}
