package otelomni

import (
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Instrument names. Durations are in seconds, sizes in bytes, as the
// OpenTelemetry conventions ask.
const (
	// PhaseDurationName: one measurement per measured phase span, with
	// omni.phase, omni.stage.type and gen_ai.request.model.
	PhaseDurationName = "omni.phase.duration"
	// RequestDurationName: one measurement per request, at its end.
	RequestDurationName = "omni.request.duration"
	// StageDurationName: one measurement per stage of a multi-stage
	// pipeline, at its end.
	StageDurationName = "omni.stage.duration"
	// TimeToFirstOutputName: from the request's (or stage's) start to its
	// first output, for streaming requests.
	TimeToFirstOutputName = "omni.time_to_first_output"
	// ExecPerStepName: a diffusion request's exec divided by its number of
	// inference steps: a ratio of one span, never a sum.
	ExecPerStepName = "omni.diffusion.exec_per_step"
	// TransferSizeName: one measurement per hand-over between stages.
	TransferSizeName = "omni.transfer.size"
)

// DurationBuckets are the bucket boundaries (seconds) of every duration
// histogram: from 1 ms to 300 s, the range of DOMAIN.md's phases (a queue
// wait of a millisecond, a video's exec of minutes). A measured 0 lands in
// the first bucket; an unmeasured phase records nothing.
var DurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300}

// PerStepBuckets are the bucket boundaries (seconds) of exec per step: a
// denoising step takes from a millisecond (a distilled image model) to
// seconds (a large video model).
var PerStepBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// SizeBuckets are the bucket boundaries (bytes) of transfer sizes: from a
// KiB of hidden states to GiBs of KV cache.
var SizeBuckets = []float64{1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 4 << 30}

// instruments are the histograms of one meter.
type instruments struct {
	phase, request, stage, ttfo, perStep metric.Float64Histogram
	size                                 metric.Int64Histogram
}

// meterState is a meter provider, its instruments, and whether it records
// anything at all.
type meterState struct {
	provider   metric.MeterProvider
	comparable bool
	inst       *instruments
}

func newMeterState(mp metric.MeterProvider) *meterState {
	s := &meterState{provider: mp, comparable: reflect.TypeOf(mp).Comparable()}
	if isNoopMeter(mp) {
		return s
	}
	m := mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version))
	inst, err := newInstruments(m)
	if err != nil {
		otel.Handle(err)
		return s
	}
	s.inst = inst
	return s
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
	in.phase = dur(PhaseDurationName, "Duration of one measured phase of a request; an unmeasured phase records nothing.", DurationBuckets)
	in.request = dur(RequestDurationName, "Duration of a request, from arrival to its end.", DurationBuckets)
	in.stage = dur(StageDurationName, "Duration of one stage of a multi-stage pipeline serving a request.", DurationBuckets)
	in.ttfo = dur(TimeToFirstOutputName, "Time from a streaming request's start to its first output.", DurationBuckets)
	in.perStep = dur(ExecPerStepName, "A diffusion request's exec divided by its number of inference steps.", PerStepBuckets)
	if err != nil {
		return nil, err
	}
	in.size, err = m.Int64Histogram(TransferSizeName, metric.WithUnit("By"),
		metric.WithDescription("Size of one hand-over between two stages."),
		metric.WithExplicitBucketBoundaries(SizeBuckets...))
	if err != nil {
		return nil, err
	}
	return &in, nil
}

// meters returns the current meter state: the fixed one, or the global
// provider's, read now.
func (in *Instrumenter) meters() *meterState {
	if in.fixedMeter != nil {
		return in.fixedMeter
	}
	return in.globalMeters()
}

func (in *Instrumenter) globalMeters() *meterState {
	mp := otel.GetMeterProvider()
	if c := in.globalMeter.Load(); c != nil && c.comparable && c.provider == mp {
		return c
	}
	c := newMeterState(mp)
	in.globalMeter.Store(c)
	return c
}

func isNoopMeter(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case nil, noop.MeterProvider, *noop.MeterProvider:
		return true
	}
	return isGlobalMeterDelegate(mp)
}

// isGlobalMeterDelegate reports whether mp is the provider that
// otel.GetMeterProvider returns before otel.SetMeterProvider is called.
func isGlobalMeterDelegate(mp metric.MeterProvider) bool {
	t := reflect.TypeOf(mp)
	if t == nil || t.Kind() != reflect.Pointer {
		return false
	}
	e := t.Elem()
	return e.PkgPath() == "go.opentelemetry.io/otel/internal/global" && e.Name() == "meterProvider"
}

// seconds converts a duration to the instruments' unit.
func seconds(d time.Duration) float64 { return d.Seconds() }

// recordSet returns the record option of an attribute set.
func recordSet(kv ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}
