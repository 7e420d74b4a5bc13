// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// Config configures an Engine.
type Config struct {
	// Instrumenter makes the spans; nil uses otelomni.New() (the global
	// provider).
	Instrumenter *otelomni.Instrumenter
	// Slots is how many requests the scheduler runs at once (default 2);
	// the rest wait in its queue.
	Slots int
	// TimeScale multiplies every simulated duration (default 1).
	TimeScale float64
	// Replica names this engine replica.
	Replica string
	// BatchWindow is how long the first request of a batch waits for
	// others of its model (default 8 ms, scaled); a negative window runs
	// every request alone.
	BatchWindow time.Duration
	// Logger is what the engine logs through, with the context of the
	// request's phase: a handler that reads the span from the context
	// (the OpenTelemetry slog bridge, or the demo's own) ties each record
	// to its trace and phase. nil logs nothing.
	Logger *slog.Logger
}

// Engine is a simulated diffusion stage: a scheduler with a few slots, a
// worker that runs the denoising loop, and a server that post-processes
// outputs.
type Engine struct {
	in       *otelomni.Instrumenter
	slots    chan struct{}
	priority chan struct{}
	scale    float64
	replica  string
	batches  *batcher
	log      *slog.Logger
}

// New returns an engine.
func New(cfg Config) *Engine {
	if cfg.Instrumenter == nil {
		cfg.Instrumenter = otelomni.New()
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 2
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.Replica == "" {
		cfg.Replica = "dit-0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Engine{
		in: cfg.Instrumenter, slots: make(chan struct{}, cfg.Slots), priority: make(chan struct{}, priorityLane),
		scale: cfg.TimeScale, replica: cfg.Replica, log: cfg.Logger,
		batches: newBatcher(cfg.Instrumenter, cfg.BatchWindow, cfg.TimeScale, cfg.Slots),
	}
}

// Start simulates the engine's start: each model's weights loaded, a
// warm-up run, as one omni.engine.start trace of its own.
func (e *Engine) Start(ctx context.Context, models []string) {
	es := e.in.StartEngine(ctx, otelomni.EngineInfo{Model: models[0]})
	for i, m := range models {
		load := es.StartLoad(otelomni.LoadInfo{Model: m, WeightBytes: int64(8+4*i) << 30, DType: "bfloat16",
			DeviceKind: "cuda", DeviceCount: 1})
		time.Sleep(time.Duration(3 * e.scale * float64(time.Millisecond)))
		load.SetAcceleratorMemory(int64(10+5*i) << 30)
		load.End(nil)
	}
	warm := es.StartWarmup()
	time.Sleep(time.Duration(5 * e.scale * float64(time.Millisecond)))
	warm.End(nil)
	es.End(nil)
	e.log.InfoContext(ctx, "engine ready", "models", len(models), "replica", e.replica)
}

// priorityLane is how many priority requests run at once. They are small
// (a distilled model, two steps) and run in a lane of their own, which is
// never full in the demo: each is admitted in the step that accepts it.
const priorityLane = 64

// ErrOutOfMemory is the failure of the "failed" scenario.
var ErrOutOfMemory = errors.New("CUDA out of memory while denoising")

// Serve serves one request of scenario s, with id as its request id. seed
// makes its simulated durations repeatable.
func (e *Engine) Serve(ctx context.Context, id string, s Scenario, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x6f6d6e69))
	gs := s.Guidance
	info := otelomni.RequestInfo{
		ID: id, Model: s.Model, Modality: s.Modality, NumInferenceSteps: s.Steps, GuidanceScale: &gs,
		Height: s.Height, Width: s.Width, NumFrames: s.Frames,
		Stage: otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion, ReplicaID: e.replica},
	}
	ctx, req := e.in.Start(ctx, info)
	err := e.serve(ctx, req, s, rng)
	if err != nil {
		e.log.WarnContext(ctx, "request failed", "scenario", s.Name, "err", err)
	}
	req.End(err)
	return err
}

// within runs fn inside phase ph, just started: the phase ends when fn
// returns, failed with fn's error.
func within(ph otelomni.ActivePhase, fn func(context.Context) error) error {
	err := fn(ph.Context())
	ph.End(err)
	return err
}

func (e *Engine) serve(ctx context.Context, req *otelomni.Request, s Scenario, rng *rand.Rand) error {
	if s.Preprocessor {
		// The model's pre-processor: decode and resize the input image.
		if err := within(req.StartPhase(ctx, spans.Preprocess), e.cpu(rng, 6, 14)); err != nil {
			return err
		}
	}
	if s.AbortBeforeAdmission {
		// The client disconnects while the request waits for admission:
		// it is never scheduled, so it has no queue wait and no exec.
		return fmt.Errorf("request withdrawn before admission: %w", otelomni.ErrClientAbort)
	}

	exec := req.StartPhase(ctx, spans.Exec)
	release, err := e.admit(ctx, req, s)
	if err != nil {
		exec.End(err)
		return err
	}
	err = e.run(exec, req, s, rng)
	release()
	if err != nil {
		exec.End(err)
		return fmt.Errorf("%w: %w", otelomni.ErrStageError, err)
	}

	// Intermediate outputs of a streaming request arrive during exec; the
	// final one ends it.
	for i, o := range s.Outputs {
		last := i == len(s.Outputs)-1
		if last {
			exec.End(nil)
		}
		e.output(ctx, req, rng, o, i, last, len(s.Outputs) > 1)
		if !last {
			e.sleep(rng, 30, 60) // the next chunk's denoising
		}
	}
	return nil
}

// admit waits for a scheduler slot. The scheduler stamps the request when
// it accepts it and when it first runs it; a priority request is run in the
// step that accepts it, so both stamps are the same instant: a real 0.
func (e *Engine) admit(ctx context.Context, req *otelomni.Request, s Scenario) (func(), error) {
	if s.Priority {
		accepted := time.Now()
		select {
		case e.priority <- struct{}{}:
			// Run in the step that accepted it: one stamp for both.
			_ = req.RecordPhase(spans.QueueWait, spans.Between(accepted, accepted), nil)
		default:
			// The lane is full: a real wait, measured as such.
			select {
			case e.priority <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			_ = req.RecordPhase(spans.QueueWait, spans.Between(accepted, time.Now()), nil)
		}
		return func() { <-e.priority }, nil
	}
	accepted := time.Now()
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	_ = req.RecordPhase(spans.QueueWait, spans.Between(accepted, time.Now()), nil)
	return func() { <-e.slots }, nil
}

// run is the worker: receive upstream KV, run the denoising loop, decode
// latents. With the profiler off, forward and VAE decode still run but are
// not measured, so they make no span.
func (e *Engine) run(exec otelomni.ActivePhase, req *otelomni.Request, s Scenario, rng *rand.Rand) error {
	ctx := exec.Context()
	if s.UpstreamKV {
		start := time.Now()
		e.sleep(rng, 4, 9)
		_ = req.RecordPhase(spans.KVRecv, spans.Between(start, time.Now()), nil)
	}
	perStep := 6.0
	if s.Modality == attrs.ModalityVideo {
		perStep = 12
	}
	// denoise runs the steps in loop's context: each step hangs under
	// forward when the profiler measures it, else under exec.
	denoise := func(loop otelomni.ActivePhase) error {
		ctx := loop.Context()
		// Requests of one model that get here together run as one batch.
		leave := e.batches.join(req, s.Model)
		defer leave()
		for i := 0; i < s.Steps; i++ {
			step := req.StartPhase(ctx, spans.DenoiseStep, attrs.StepKey.Int(i))
			e.sleep(rng, perStep*0.9, perStep*1.1)
			step.End(nil)
			if s.Fail && i == s.Steps/2 {
				req.SetStepsRun(i + 1)
				e.log.ErrorContext(ctx, "out of memory while denoising", "step", i)
				return ErrOutOfMemory
			}
		}
		req.SetStepsRun(s.Steps)
		return nil
	}
	decode := e.sleepFn(rng, 15, 40)
	if !s.Profiler {
		if err := denoise(exec); err != nil {
			return err
		}
		return decode(ctx)
	}
	fwd := req.StartPhase(ctx, spans.Forward)
	if err := within(fwd, func(context.Context) error { return denoise(fwd) }); err != nil {
		return err
	}
	return within(req.StartPhase(ctx, spans.VAEDecode), decode)
}

// output hands one output back: wait for an asynchronous copy, then
// post-process. Each output's wait is its own: a synchronous output after
// an asynchronous one has none.
func (e *Engine) output(ctx context.Context, req *otelomni.Request, rng *rand.Rand, o Output, i int, final, streaming bool) {
	// A streaming request's phases say which output they belong to.
	start := func(p spans.Phase) otelomni.ActivePhase {
		if streaming {
			return req.StartPhase(ctx, p, attrs.OutputIndexKey.Int(i), attrs.OutputFinalKey.Bool(final))
		}
		return req.StartPhase(ctx, p)
	}
	if o == Async {
		w := start(spans.OutputReadyWait)
		e.sleep(rng, 2, 8)
		w.End(nil)
	}
	p := start(spans.Postprocess)
	_ = e.cpu(rng, 4, 12)(p.Context())
	p.End(nil)
}

// sleep waits a uniformly random time between lo and hi milliseconds,
// scaled.
func (e *Engine) sleep(rng *rand.Rand, lo, hi float64) {
	d := lo + rng.Float64()*(hi-lo)
	time.Sleep(time.Duration(d * e.scale * float64(time.Millisecond)))
}

func (e *Engine) sleepFn(rng *rand.Rand, lo, hi float64) func(context.Context) error {
	d := lo + rng.Float64()*(hi-lo)
	return func(context.Context) error {
		time.Sleep(time.Duration(d * e.scale * float64(time.Millisecond)))
		return nil
	}
}

// cpu burns CPU for about a third of the time (hashing, as image encoding
// would) and sleeps for the rest.
func (e *Engine) cpu(rng *rand.Rand, lo, hi float64) func(context.Context) error {
	d := time.Duration((lo + rng.Float64()*(hi-lo)) * e.scale * float64(time.Millisecond))
	return func(context.Context) error {
		end := time.Now().Add(d / 3)
		buf := make([]byte, 4096)
		for time.Now().Before(end) {
			sum := sha256.Sum256(buf)
			buf[0] = sum[0]
		}
		time.Sleep(d - d/3)
		return nil
	}
}
