// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"

	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// Names of the omni.* instruments. Durations are in seconds, sizes in bytes,
// as the OpenTelemetry conventions ask. Where the GenAI conventions name a
// measurement (gen_ai.server.request.duration,
// gen_ai.server.time_to_first_token), genaiconv's instrument is used.
const (
	// phaseDurationName: one measurement per measured phase span, with
	// omni.phase, omni.stage.type and gen_ai.request.model.
	phaseDurationName = "omni.phase.duration"
	// stageDurationName: one measurement per stage of a multi-stage
	// pipeline, at its end.
	stageDurationName = "omni.stage.duration"
	// execPerStepName: a diffusion request's exec divided by its number of
	// inference steps: a ratio of one span, never a sum.
	execPerStepName = "omni.diffusion.exec_per_step"
	// transferSizeName: one measurement per hand-over between stages.
	transferSizeName = "omni.transfer.size"
)

// durationBuckets are the bucket boundaries (seconds) of every duration
// histogram: from 1 ms to 300 s, the range of the phases of an omni
// pipeline (a queue wait of a millisecond, a video's exec of minutes). A
// measured 0 lands in the first bucket; an unmeasured phase records nothing.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300}

// perStepBuckets are the bucket boundaries (seconds) of exec per step: a
// denoising step takes from a millisecond (a distilled image model) to
// seconds (a large video model).
var perStepBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// sizeBuckets are the bucket boundaries (bytes) of transfer sizes: from a
// KiB of hidden states to GiBs of KV cache.
var sizeBuckets = []float64{1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 4 << 30}

// instruments are the histograms of one meter.
type instruments struct {
	phase, stage, perStep metric.Float64Histogram
	request               genaiconv.ServerRequestDuration
	ttft                  genaiconv.ServerTimeToFirstToken
	size                  metric.Int64Histogram
}

func newInstruments(m metric.Meter) (*instruments, error) {
	var in instruments
	var err error
	dur := func(name, desc string, buckets []float64) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		return h
	}
	in.phase = dur(phaseDurationName, "Duration of one measured phase of a request; an unmeasured phase records nothing.", durationBuckets)
	in.stage = dur(stageDurationName, "Duration of one stage of a multi-stage pipeline serving a request.", durationBuckets)
	in.perStep = dur(execPerStepName, "A diffusion request's exec divided by its number of inference steps.", perStepBuckets)
	if err != nil {
		return nil, err
	}
	if in.request, err = genaiconv.NewServerRequestDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if in.ttft, err = genaiconv.NewServerTimeToFirstToken(m, metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	in.size, err = m.Int64Histogram(transferSizeName, metric.WithUnit("By"),
		metric.WithDescription("Size of one hand-over between two stages."),
		metric.WithExplicitBucketBoundaries(sizeBuckets...))
	if err != nil {
		return nil, err
	}
	return &in, nil
}

// seconds converts a duration to the instruments' unit.
func seconds(d time.Duration) float64 { return d.Seconds() }

// recordSet returns the record option of an attribute set. It copies kv
// first: attribute.NewSet sorts the slice it is given in place, and the
// phases' sets are built from one shared base.
func recordSet(kv ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(slices.Clone(kv)...))}
}

// observe records one measured phase in the phase histogram, and what
// derives from it: exec per step (divided by stepsRun when the steps run
// are known, else by the steps asked), and, unless the phase failed, the
// time to the first output.
func (r *Request) observe(ctx context.Context, p spans.Phase, start, end time.Time, output, stepsRun int, failed bool) {
	if r.met == nil {
		return
	}
	if ctx == nil {
		ctx = r.ctx
	}
	d := end.Sub(start)
	if d < 0 {
		return
	}
	secs := seconds(d)
	r.met.phase.Record(ctx, secs, r.tbl.rec.phase[p]...)
	if p == spans.Exec {
		steps := stepsRun
		if steps <= 0 {
			steps = r.steps
		}
		if steps > 0 {
			r.met.perStep.Record(ctx, secs/float64(steps), r.tbl.rec.scope...)
		}
	}
	// The first output: the first output's postprocess at a diffusion
	// stage, the first token at an LLM stage (the end of a prefill that did
	// not fail).
	if !failed && (p == spans.Postprocess && output == 0 || p == plan.LLMPrefill) {
		r.firstOutput(ctx, end)
	}
}
