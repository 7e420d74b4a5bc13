// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// The scenarios of a mixed run (the -mix flag): what a tail-sampling
// collector must keep whatever its sampling rate. A normal request keeps the
// special case that Plan gives it.
const (
	// Normal: nothing remarkable; kept only by the collector's baseline share.
	Normal Special = "normal"
	// Slow: the first stage decodes for the -slow time on top of its usual
	// work (a long answer), so the request lasts at least that long.
	Slow Special = "slow"
	// Saturated: the second stage's scheduler holds the request in its queue
	// for the -queue-wait time (omni.llm.queue at the talker,
	// omni.diffusion.queue_wait at the diffusion stage).
	Saturated Special = "saturated"
	// Failing: the last stage receives the hand-over, then fails; the
	// request ends with error.type stage_error.
	Failing Special = "failing"
)

// Mix is a repeating cycle of scenarios. The two pipelines alternate
// request by request, so each entry of the cycle serves two consecutive
// requests, one of each pipeline: every scenario reaches both pipelines.
type Mix []Special

// ParseMix reads a mix such as "normal=7,slow=1,saturated=1,failing=1":
// each scenario with its weight in the cycle, in that order.
func ParseMix(s string) (Mix, error) {
	var m Mix
	for _, part := range strings.Split(s, ",") {
		name, weight, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(weight)
		if !ok || err != nil || n < 0 || n > 1000 {
			return nil, fmt.Errorf("mix: %q is not scenario=weight (a weight from 0 to 1000)", part)
		}
		sp := Special(name)
		switch sp {
		case Normal, Slow, Saturated, Failing:
		default:
			return nil, fmt.Errorf("mix: unknown scenario %q (normal, slow, saturated, failing)", name)
		}
		for range n {
			m = append(m, sp)
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("mix: %q has no request", s)
	}
	return m, nil
}

// Plan says which pipeline serves request i and its scenario. A normal
// request keeps Plan's special case.
func (m Mix) Plan(i int) (string, Special) {
	pipe, special := Plan(i)
	if sc := m[(i/2)%len(m)]; sc != Normal {
		return pipe, sc
	}
	return pipe, special
}

// ExpectScenario is [Expect] for any request of a mixed run. A failing
// request's last stage does no work: no phase and no output span there.
func ExpectScenario(pipeline string, special Special) map[string]int {
	if special != Failing {
		return Expect(pipeline, special)
	}
	want := Expect(pipeline, "")
	switch pipeline {
	case "speech":
		delete(want, outputSpan)
	case "image":
		for _, p := range []spans.Phase{spans.QueueWait, spans.Exec, spans.KVRecv, spans.Forward, spans.VAEDecode, spans.Postprocess} {
			delete(want, p.SpanName())
		}
	}
	return want
}

// Modality is the output modality of a pipeline's requests.
func Modality(pipeline string) string {
	if pipeline == "image" {
		return attrs.ModalityImage
	}
	return attrs.ModalityAudio
}
