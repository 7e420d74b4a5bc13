// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package emit

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// recordInstrumenter returns an instrumenter whose spans go to tp, as
// recordPath uses it: ids told their span's name, no metrics.
func recordInstrumenter(tp trace.TracerProvider) *otelomni.Instrumenter {
	return otelomni.New(otelomni.WithTracerProvider(withSpanNames(tp)), otelomni.WithMeterProvider(metricnoop.NewMeterProvider()))
}

// recordPath makes r's trace as a program would with otelomni's record
// path (Instrumenter.Start, StartStage, RecordPhase, RecordTransfer,
// EndAt), through whatever tracer provider in has: the reference the
// import's own spans (Emitter.Emit) are held to. With a provider made
// by sdkProvider, its ids are the import's.
func recordPath(ctx context.Context, r *forms.Request, in *otelomni.Instrumenter, anchor time.Time) error {
	placed, end, err := plan(r, anchor)
	if err != nil {
		return err
	}
	ctx, ids := withIDs(ctx, traceKey(r, placed, end))
	info := otelomni.RequestInfo{
		ID: r.ID, Model: r.Model, Modality: r.Modality, NumInferenceSteps: r.Steps, GuidanceScale: r.Guidance,
		Height: r.Height, Width: r.Width, NumFrames: r.Frames, Start: r.Arrival,
		Attributes: append(make([]attribute.KeyValue, 0, len(r.Extra)+10), r.Extra...),
	}
	single := len(placed) == 1 && !placed[0].p.HasTransfer
	if !single {
		info.Attributes = forms.WithDroppedKeys(info.Attributes, r.DroppedKeys)
	}
	info.Attributes = append(info.Attributes, omniattr.Reconstructed(true))
	if r.Source != "" {
		info.Attributes = append(info.Attributes, forms.SourceKey.String(r.Source))
	}
	if r.Total != nil {
		info.Attributes = forms.QualityAttrs(info.Attributes, r.Total.Quality)
		if end.After(r.Arrival.Add(r.Total.D)) {
			// A stage ends after the measured end-to-end time: the span
			// reaches it, and the measurement is kept beside it.
			info.Attributes = append(info.Attributes, e2eAttr.Float64(float64(r.Total.D)/float64(time.Millisecond)))
		}
	}
	var errs []error
	if single {
		ps := &placed[0]
		st := ps.st
		info.Stage = otelomni.StageInfo{ID: st.ID, Name: st.Name, Type: stageType(st)}
		info.Attributes = append(info.Attributes, st.Extra...)
		info.Attributes = append(info.Attributes, st.RxExtra...) // no previous stage
		info.Attributes = forms.WithDroppedKeys(info.Attributes, r.DroppedKeys+st.DroppedKeys)
		info.Attributes = stageAttrs(info.Attributes, st)
		if st.GenTime != nil {
			// No omni.stage span carries the stage's own length here.
			info.Attributes = append(info.Attributes, genTimeAttr.Float64(float64(st.GenTime.D)/float64(time.Millisecond)))
		}
		_, req := in.Start(ctx, info)
		errs = append(errs, recordPhases(req, ps)...)
		errs = append(errs, req.EndAt(end, nil))
		return errors.Join(errs...)
	}
	rctx, req := in.Start(ctx, info)
	for i := range placed {
		ps := &placed[i]
		st := ps.st
		ids.stage = int64(st.ID)
		_, stage := in.StartStage(rctx, otelomni.StageInfo{ID: st.ID, Name: st.Name, Type: stageType(st), Model: r.Model, Start: st.Submit})
		switch {
		case ps.p.HasTransfer && (i > 0 || st.RxFrom != nil):
			ps.p.Transfer.FromStage = r.Stages[max(i-1, 0)].ID
			if st.RxFrom != nil {
				ps.p.Transfer.FromStage = *st.RxFrom
			}
			errs = append(errs, stage.RecordTransfer(ps.p.Transfer))
			stage.SetAttributes(transferQuality(st)...)
		case i == 0:
			stage.SetAttributes(st.RxExtra...) // no previous stage
		}
		errs = append(errs, recordPhases(stage, ps)...)
		stage.SetAttributes(st.Extra...)
		stage.SetAttributes(forms.WithDroppedKeys(nil, st.DroppedKeys)...)
		kv := stageAttrs(reconstructedOnly[:1:1], st)
		if !hasLength(st) {
			kv = append(kv, omnikeys.LengthUnmeasured.Bool(true))
		}
		stage.SetAttributes(kv...)
		errs = append(errs, stage.EndAt(ps.p.End, nil))
	}
	errs = append(errs, req.EndAt(end, nil))
	return errors.Join(errs...)
}

// recordPhases records each placed phase of a stage, with its quality.
func recordPhases(rec *otelomni.Request, ps *placedStage) []error {
	var errs []error
	for _, order := range [][]spans.Phase{diffusionOrder, llmOrder} {
		for _, ph := range order {
			iv := intervalOf(&ps.p, ph)
			if !iv.Measured() {
				continue
			}
			kv := reconstructedOnly
			if q := ps.st.Quality[ph]; q != (forms.Quality{}) {
				kv = forms.QualityAttrs([]attribute.KeyValue{omniattr.Reconstructed(true)}, q)
			}
			if err := rec.RecordPhase(ph, iv, nil, kv...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// idsKey holds, in the context of a request being recorded, its ids.
type idsKey struct{}

// namedIDs is a request's ids and the name of the span being started
// (see namingTracer).
type namedIDs struct {
	*idState
	name string
}

func withIDs(ctx context.Context, key [16]byte) (context.Context, *namedIDs) {
	st := &namedIDs{idState: &idState{}}
	st.reset(key)
	return context.WithValue(ctx, idsKey{}, st), st
}

// idGenerator derives the ids of a request being recorded as the import
// derives them; for spans made outside recordPath it draws random ids.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if st, ok := ctx.Value(idsKey{}).(*namedIDs); ok {
		return st.trace, st.next(st.name, trace.SpanID{})
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	return tid, sid
}

func (idGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if st, ok := ctx.Value(idsKey{}).(*namedIDs); ok && st.trace == tid {
		return st.next(st.name, trace.SpanContextFromContext(ctx).SpanID())
	}
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	return sid
}

// namingProvider hands out tracers that tell the request's idState the
// name of each span they start, before the SDK asks for its id.
type namingProvider struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

// withSpanNames wraps tp (see namingProvider); a no-op provider is kept
// as it is, so that nothing is started at all.
func withSpanNames(tp trace.TracerProvider) trace.TracerProvider {
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return tp
	}
	return namingProvider{tp: tp}
}

func (p namingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return namingTracer{t: p.tp.Tracer(name, opts...)}
}

type namingTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (t namingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if st, ok := ctx.Value(idsKey{}).(*namedIDs); ok {
		st.name = name
	}
	return t.t.Start(ctx, name, opts...)
}
