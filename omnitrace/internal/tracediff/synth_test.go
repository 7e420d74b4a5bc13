// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// run is how a synthetic run's requests are drawn: per modality, each
// phase lognormal around its median with a log-space spread of 0.3, and
// absent at a fixed rate.
type run struct {
	// scale multiplies one phase's durations: "modality phase" -> factor.
	scale map[string]float64
	// presence overrides a phase's rate of being measured.
	presence map[string]float64
}

const logSD = 0.3

// phaseSpec is one phase of a synthetic pipeline.
type phaseSpec struct {
	name    string  // the phase id (and span name after "omni.")
	median  float64 // ms
	present float64 // the share of requests that measure it
}

// synth draws synthetic traces.
type synth struct {
	rng *rand.Rand
	run run
	n   int // spans made, for ids
	t   time.Time
}

// hexIDs are the ids of spans, made once.
var hexIDs = func() []string {
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = strconv.FormatInt(int64(i), 16)
	}
	return ids
}()

// hexID is n in hex: an id unique within a side's traces.
func hexID(n int) string {
	if n < len(hexIDs) {
		return hexIDs[n]
	}
	return strconv.FormatInt(int64(n), 16)
}

func newSynth(seed uint64, r run) *synth {
	return &synth{rng: rand.New(rand.NewPCG(seed, 7)), run: r, t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
}

func (s *synth) dur(modality string, p phaseSpec) time.Duration {
	f := p.median * math.Exp(logSD*s.rng.NormFloat64())
	if k, ok := s.run.scale[modality+" "+p.name]; ok {
		f *= k
	}
	return time.Duration(f * float64(time.Millisecond))
}

func (s *synth) present(modality string, p phaseSpec) bool {
	rate := p.present
	if r, ok := s.run.presence[modality+" "+p.name]; ok {
		rate = r
	}
	return s.rng.Float64() < rate
}

func (s *synth) span(tid, parent, name string, start, end time.Time, kv ...attribute.KeyValue) traceview.Span {
	s.n++
	sp := traceview.Span{TraceID: tid, SpanID: hexID(s.n), ParentID: parent, Name: name, Start: start, End: end}
	if len(kv) > 0 {
		sp.Attrs = make(map[string]attribute.Value, len(kv))
	}
	for _, a := range kv {
		sp.Attrs[string(a.Key)] = a.Value
	}
	return sp
}

var (
	diffusionPhases = []phaseSpec{
		{"preprocess", 8, 0.7}, {"queue_wait", 5, 0.95}, {"forward", 800, 0.85}, {"vae_decode", 60, 0.85},
		{"output_ready_wait", 3, 0.5}, {"postprocess", 20, 1},
	}
	llmPhases = []phaseSpec{{"llm.queue", 4, 0.9}, {"llm.prefill", 30, 1}, {"llm.decode", 120, 1}}
	xferParts = []phaseSpec{{"transfer.tx", 2, 1}, {"transfer.in_flight", 1, 0.8}, {"transfer.rx_decode", 3, 1}}
)

// diffusion draws a single-stage diffusion request of a modality (image,
// video) whose durations are scaled by k.
func (s *synth) diffusion(modality string, k float64) []traceview.Span {
	tid := hexID(s.n + 1)
	t := s.t
	s.t = s.t.Add(time.Second)
	ph := map[string]phaseSpec{}
	for _, p := range diffusionPhases {
		p.median *= k
		ph[p.name] = p
	}
	var out []traceview.Span
	reqID := hexID(s.n + 1)
	req := s.span(tid, "", "omni.request", t, t, attribute.String("omni.output.modality", modality), attribute.String("omni.stage.type", "diffusion"))
	cur := t
	phase := func(parent, name string, d time.Duration) {
		out = append(out, s.span(tid, parent, "omni.diffusion."+name, cur, cur.Add(d)))
		cur = cur.Add(d)
	}
	if p := ph["preprocess"]; s.present(modality, p) {
		phase(reqID, p.name, s.dur(modality, p))
	}
	execStart := cur
	execID := hexID(s.n + 1)
	out = append(out, s.span(tid, reqID, "omni.diffusion.exec", cur, cur)) // its end below
	execIdx := len(out) - 1
	if p := ph["queue_wait"]; s.present(modality, p) {
		phase(reqID, p.name, s.dur(modality, p))
	}
	cur = cur.Add(s.dur(modality, phaseSpec{"gap", 1 * k, 1}))
	if p := ph["forward"]; s.present(modality, p) {
		phase(execID, p.name, s.dur(modality, p))
		phase(execID, "vae_decode", s.dur(modality, ph["vae_decode"]))
	} else {
		cur = cur.Add(s.dur(modality, phaseSpec{"unprofiled", 860 * k, 1}))
	}
	out[execIdx].End = cur
	_ = execStart
	if p := ph["output_ready_wait"]; s.present(modality, p) {
		phase(reqID, p.name, s.dur(modality, p))
	}
	phase(reqID, "postprocess", s.dur(modality, ph["postprocess"]))
	req.End = cur.Add(s.dur(modality, phaseSpec{"slack", 2, 1}))
	return append([]traceview.Span{req}, out...)
}

// speech draws a two-stage audio request: a thinker LLM stage, a
// transfer, a code2wav stage streaming three chunks.
func (s *synth) speech() []traceview.Span {
	const modality = "audio"
	tid := hexID(s.n + 1)
	t := s.t
	s.t = s.t.Add(time.Second)
	reqID := hexID(s.n + 1)
	req := s.span(tid, "", "omni.request", t, t, attribute.String("omni.output.modality", modality))
	out := []traceview.Span{}
	cur := t
	stage := func(id int, name, typ string, body func(stageID string)) {
		stageID := hexID(s.n + 1)
		out = append(out, s.span(tid, reqID, "omni.stage", cur, cur,
			attribute.Int("omni.stage.id", id), attribute.String("omni.stage.name", name), attribute.String("omni.stage.type", typ)))
		i := len(out) - 1
		body(stageID)
		cur = cur.Add(s.dur(modality, phaseSpec{"stage slack", 1, 1}))
		out[i].End = cur
	}
	llm := func(prefix string) func(string) {
		return func(stageID string) {
			for _, p := range llmPhases {
				p.name = prefix + p.name
				if s.present(modality, p) {
					d := s.dur(modality, p)
					out = append(out, s.span(tid, stageID, "omni."+p.name[len(prefix):], cur, cur.Add(d)))
					cur = cur.Add(d)
				}
			}
		}
	}
	transfer := func(from, to int) {
		xID := hexID(s.n + 1)
		out = append(out, s.span(tid, reqID, "omni.transfer", cur, cur,
			attribute.Int("omni.transfer.from_stage", from), attribute.Int("omni.transfer.to_stage", to)))
		i := len(out) - 1
		for _, p := range xferParts {
			p.name = fmt.Sprintf("%d %s", from, p.name)
			if s.present(modality, p) {
				d := s.dur(modality, p)
				name := p.name[2:]
				out = append(out, s.span(tid, xID, "omni."+name, cur, cur.Add(d)))
				cur = cur.Add(d)
			}
		}
		out[i].End = cur
	}
	stage(0, "thinker", "llm", llm("thinker "))
	transfer(0, 1)
	stage(1, "code2wav", "other", func(stageID string) {
		for i := range 3 {
			d := s.dur(modality, phaseSpec{"output", 25, 1})
			out = append(out, s.span(tid, stageID, "omni.output", cur, cur.Add(d), attribute.Int("omni.output.index", i), attribute.Bool("omni.output.final", i == 2)))
			cur = cur.Add(d)
		}
	})
	req.End = cur.Add(s.dur(modality, phaseSpec{"slack", 2, 1}))
	return append([]traceview.Span{req}, out...)
}

// side draws n requests of each of the three modalities into a side,
// the modalities interleaved.
func (s *synth) side(n int) *Side {
	sd := NewSide(Settings{})
	for range n {
		sd.Add(s.diffusion("image", 1))
		sd.Add(s.diffusion("video", 4))
		sd.Add(s.speech())
	}
	return sd
}
