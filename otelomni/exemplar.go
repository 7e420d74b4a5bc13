// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/keep"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"
)

// Exemplars. A histogram's exemplar names the span under which a
// measurement was made; the SDK's default filter offers every measurement
// made under a sampled span, and most of those traces are then dropped by
// the collector tier's tail sampling. otelomni offers a measurement to the
// exemplar reservoir only when the engine can vouch that the tier keeps its
// trace: a span of the request failed, the request has already lasted
// longer than its modality's threshold, a queue wait passed the budget, or
// the trace id falls in the baseline share. It reads the thresholds from
// the variables the tier's collector reads (OMNI_SLOW_IMAGE_MS,
// OMNI_SLOW_VIDEO_MS, OMNI_SLOW_AUDIO_MS, OMNI_SLOW_OTHER_MS,
// OMNI_QUEUE_BUDGET_MS, OMNI_SAMPLE_PERCENT, OMNI_SAMPLE_SALT), with the
// same defaults. A stage process vouches for its own failures and queue
// waits and the baseline share: the request's length is the gateway's to
// know. Every measurement is still recorded; only the exemplar is chosen.
//
// OTELOMNI_EXEMPLARS=sampled offers every measurement under a sampled span
// instead (the SDK's choice), for a fleet without a tail tier.

// exemplarsVar chooses the exemplars: kept (the default) or sampled.
const exemplarsVar = "OTELOMNI_EXEMPLARS"

// noExemplar is the context a measurement is recorded with when its trace
// is not known to be kept: it holds no span, so no exemplar is taken.
var noExemplar = trace.ContextWithSpanContext(context.Background(), trace.SpanContext{})

// exemplarPolicy is the policy read at New; nil offers every measurement.
func exemplarPolicy() *keep.Policy {
	switch v := os.Getenv(exemplarsVar); v {
	case "sampled":
		return nil
	case "", "kept":
	default:
		otel.Handle(fmt.Errorf("otelomni: %s=%q: want kept or sampled; kept is used", exemplarsVar, clipEnv(v)))
	}
	p, err := keep.FromEnv(os.Getenv)
	if err != nil {
		otel.Handle(fmt.Errorf("otelomni: exemplars: %w; no trace is vouched for by that rule", err))
	}
	return &p
}

func clipEnv(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// vouchAtStart marks the request kept when its trace id falls in the
// baseline share.
func (r *Request) vouchAtStart(ctx context.Context) {
	p := r.in.keep
	if p == nil {
		return
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() && p.Baseline(sc.TraceID()) {
		r.kept.Store(true)
	}
}

// vouchPhase marks the request kept by a phase that ended at end, measured
// under ctx: a queue wait over the budget, or a request already longer
// than its threshold. Each counts only when the tier receives the span that
// shows it: a sampled one. A transfer's parts come from two hosts' clocks
// and the request does not end after them: they never show it slow.
func (r *Request) vouchPhase(ctx context.Context, p spans.Phase, d time.Duration, end time.Time) {
	pol := r.in.keep
	if pol == nil || r.kept.Load() {
		return
	}
	if (p == spans.QueueWait || p == plan.LLMQueue) && pol.Saturated(d) && trace.SpanContextFromContext(ctx).IsSampled() {
		r.kept.Store(true)
		return
	}
	if plan.ParentOf(p) != plan.UnderTransfer {
		r.vouchSlow(end.Sub(r.scopeStart()))
	}
}

// vouchSlow marks the request kept when it has lasted d, longer than its
// modality's threshold: at a phase's end (vouchPhase), or at its own
// (observeScope). It counts only for a request whose span the tier
// receives. A failure vouches in markError.
func (r *Request) vouchSlow(d time.Duration) {
	pol := r.in.keep
	if pol == nil {
		return
	}
	if r.kind == kindRequest && exported(r.span) && pol.Slow(r.modalityNow(), d) {
		r.kept.Store(true)
	}
}

// exemplarCtx is the context to record a measurement of the request with:
// ctx when the tier keeps its trace (or every measurement is offered),
// else one with no span.
func (r *Request) exemplarCtx(ctx context.Context) context.Context {
	if r.in.keep == nil || r.kept.Load() {
		return ctx
	}
	return noExemplar
}

// The modalities the tier's slow policies tell apart; every other value,
// and none, is the other one.
var modalities = [...]string{"", attrs.ModalityImage, attrs.ModalityVideo, attrs.ModalityAudio}

// modalityOf returns the index in modalities of an omni.output.modality.
func modalityOf(s string) int32 {
	for i := 1; i < len(modalities); i++ {
		if s == modalities[i] {
			return int32(i)
		}
	}
	return 0
}

// modalityNow is the omni.output.modality the request span carries now,
// as far as the tier's slow policies tell: the tier picks the slow
// threshold by it.
func (r *Request) modalityNow() string { return modalities[r.modality.Load()] }

// modalityIn returns the last omni.output.modality of kv, as the span
// keeps it: a value that is not a string is no modality the tier knows;
// ok is false when kv holds none.
func modalityIn(kv []attribute.KeyValue) (class int32, ok bool) {
	for i := len(kv) - 1; i >= 0; i-- {
		if kv[i].Key != attrs.OutputModalityKey {
			continue
		}
		if kv[i].Value.Type() == attribute.STRING {
			return modalityOf(kv[i].Value.AsString()), true
		}
		return 0, true
	}
	return 0, false
}

// withoutModality returns a copy of kv without omni.output.modality.
func withoutModality(kv []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kv))
	for _, a := range kv {
		if a.Key != attrs.OutputModalityKey {
			out = append(out, a)
		}
	}
	return out
}
