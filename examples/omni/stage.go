// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// dieEnv is a hook for the end-to-end tests, read by this example only:
// the stage process it names kills itself with SIGKILL (as the OOM killer
// would) in the middle of its first denoising loop, mid-request.
const dieEnv = "OTELOMNI_EXAMPLE_DIE_STAGE"

func dieHere(stage string) {
	if os.Getenv(dieEnv) == stage {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // until the signal lands
	}
}

// encoder writes one message per line, from many goroutines.
type encoder struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *encoder) send(m pipeline.Message) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enc.Encode(m)
}

// showEnv tells a stage process that the gateway shows waterfalls while
// exporting, so its spans go to the gateway as well.
const showEnv = "OTELOMNI_OMNI_SHOW"

// spanPipe is the span exporter of a stage process in the embedded mode:
// it sends the spans to the gateway, which shows every process's spans
// together.
type spanPipe struct{ out *encoder }

func (p spanPipe) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	var b bytes.Buffer
	if err := traceview.WriteOTLPJSON(&b, traceview.FromSDK(ss)); err != nil {
		return err
	}
	return p.out.send(pipeline.Message{Type: "spans", OTLP: b.Bytes()})
}

func (spanPipe) Shutdown(context.Context) error { return nil }

// runStage is a stage process: it serves the messages on stdin, one
// goroutine each, and answers on stdout.
func runStage(pipe, name string, seed uint64) error {
	var st pipeline.Stage
	stages := pipeline.Pipelines[pipe]
	for _, s := range stages {
		if s.Name == name {
			st = s
		}
	}
	if st.Name == "" {
		return fmt.Errorf("no stage %q in pipeline %q", name, pipe)
	}
	out := &encoder{enc: json.NewEncoder(os.Stdout)}
	ctx := context.Background()
	opts := []otelsetup.Option{otelsetup.WithServiceName("omni-" + name), otelsetup.WithFallbackExporter(spanPipe{out})}
	if os.Getenv(showEnv) == "1" {
		// -waterfall while exporting: send the spans to the gateway too.
		opts = append(opts, otelsetup.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(spanPipe{out})))
	}
	tel, err := otelsetup.Setup(ctx, opts...)
	if err != nil {
		return err
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	s := &stageServer{in: in, st: st, last: st.ID == stages[len(stages)-1].ID, out: out, seed: seed}

	var wg sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m pipeline.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			_ = out.send(pipeline.Message{Type: "error", Error: "bad message: " + err.Error()})
			continue
		}
		wg.Go(func() { s.serve(m) })
	}
	wg.Wait()
	if err := tel.Shutdown(ctx); err != nil {
		// A trace-only backend (Jaeger) refuses metrics; the spans went.
		fmt.Fprintf(os.Stderr, "stage %s: shutdown: %v\n", name, err)
	}
	return nil
}

type stageServer struct {
	in   *otelomni.Instrumenter
	st   pipeline.Stage
	last bool
	out  *encoder
	seed uint64
}

func (s *stageServer) serve(m pipeline.Message) {
	rng := rand.New(rand.NewPCG(s.seed, uint64(len(m.ID))*7919+uint64(s.st.ID)))
	for _, c := range m.ID {
		rng = rand.New(rand.NewPCG(rng.Uint64(), uint64(c)))
	}
	sleep := func(lo, hi float64) {
		time.Sleep(time.Duration((lo + rng.Float64()*(hi-lo)) * float64(time.Millisecond)))
	}

	// The request span lives in the gateway's process: the stage message
	// carries its context.
	ctx := s.in.Extract(context.Background(), m.Trace)
	sctx, st := s.in.StartStage(ctx, otelomni.StageInfo{
		ID: s.st.ID, Name: s.st.Name, Type: s.st.Type, ReplicaID: s.st.Name + "-0", Model: s.st.Model,
	})
	if m.Transfer != nil {
		rxStart := time.Now()
		sleep(1, 3) // receive and decode the payload
		_ = st.RecordTransfer(m.Transfer.Record(s.st.ID, rxStart, time.Now()))
	}
	if s.fail(st, m) {
		return
	}

	switch s.st.Type {
	case attrs.StageLLM:
		// The scheduler's events, each a time: a phase is recorded when
		// both its ends were seen.
		var queued, scheduled time.Time
		if !(m.Special == pipeline.NoQueuedEvent && s.st.Name == "talker") {
			queued = time.Now()
			sleep(2, 10)
			s.hold(m, atQueue)
			scheduled = time.Now()
			_ = st.RecordPhase(spans.LLMQueue, spans.Between(queued, scheduled), nil)
		}
		sleep(15, 35)
		first := time.Now()
		if !scheduled.IsZero() {
			_ = st.RecordPhase(spans.LLMPrefill, spans.Between(scheduled, first), nil)
		}
		sleep(40, 90)
		s.hold(m, atDecode)
		_ = st.RecordPhase(spans.LLMDecode, spans.Between(first, time.Now()), nil)
		st.SetUsage(200+rng.IntN(400), 64+rng.IntN(192))
	case attrs.StageDiffusion:
		exec := st.StartPhase(sctx, spans.Exec)
		accepted := time.Now()
		sleep(0, 4)
		s.hold(m, atQueue)
		_ = st.RecordPhase(spans.QueueWait, spans.Between(accepted, time.Now()), nil)
		kv := time.Now()
		sleep(3, 8)
		_ = st.RecordPhase(spans.KVRecv, spans.Between(kv, time.Now()), nil)
		fwd := st.StartPhase(exec.Context(), spans.Forward)
		sleep(40, 60)
		dieHere(s.st.Name)
		sleep(40, 60)
		fwd.End(nil)
		vae := st.StartPhase(exec.Context(), spans.VAEDecode)
		sleep(10, 25)
		vae.End(nil)
		exec.End(nil)
		post := st.StartPhase(sctx, spans.Postprocess)
		sleep(3, 8)
		post.End(nil)
	default:
		// code2wav: about 80 ms of audio per codec frame, streamed in chunks.
		for i := 0; i < pipeline.AudioChunks; i++ {
			sleep(10, 20)
			_ = st.MarkOutput(i == pipeline.AudioChunks-1, time.Now())
		}
	}

	reply := pipeline.Message{Type: "result", ID: m.ID, Pipeline: m.Pipeline, Special: m.Special}
	if !s.last {
		txStart := time.Now()
		sleep(1, 4) // serialise and send
		size := int64(2<<20 + rng.IntN(1<<20))
		if s.st.Connector == "mooncake" {
			size = int64(48<<20 + rng.IntN(16<<20)) // a KV cache
		}
		h := pipeline.Transfer{FromStage: s.st.ID, Connector: s.st.Connector, Bytes: size}
		if m.Special != pipeline.NoTxTimes {
			// Sent on: the sender's wall clock, read once per edge.
			h.TxStart = txStart.UnixNano()
			h.TxEnd = txStart.Add(time.Since(txStart)).UnixNano()
		}
		reply.Transfer = &h
	}
	st.End(nil)
	// Forward the request's context, not the stage's: the next stage hangs
	// under omni.request.
	reply.Trace = propagation.MapCarrier{}
	s.in.Inject(ctx, reply.Trace)
	_ = s.out.send(reply)
}
