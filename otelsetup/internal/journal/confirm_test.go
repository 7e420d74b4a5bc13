// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// provider returns a tracer provider with the journal before a batcher
// over exp, wrapped by the journal; batches are sent only on ForceFlush.
func provider(j *Journal, exp sdktrace.SpanExporter, opts ...sdktrace.TracerProviderOption) (*sdktrace.TracerProvider, *exporter) {
	w := j.WrapExporter(exp).(*exporter)
	opts = append([]sdktrace.TracerProviderOption{
		sdktrace.WithSpanProcessor(j.SpanProcessor()),
		sdktrace.WithBatcher(w, sdktrace.WithBatchTimeout(1<<40), sdktrace.WithMaxQueueSize(1<<16), sdktrace.WithMaxExportBatchSize(1<<16)),
	}, opts...)
	return sdktrace.NewTracerProvider(opts...), w
}

func spans(tr trace.Tracer, prefix string, n int) []trace.Span {
	var out []trace.Span
	for i := range n {
		_, s := tr.Start(context.Background(), fmt.Sprintf("%s-%d", prefix, i))
		out = append(out, s)
	}
	return out
}

func endAll(ss []trace.Span) {
	for _, s := range ss {
		s.End()
	}
}

func TestConfirmedSpansAreNeverSentAgain(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	live := &memExporter{}
	tp, _ := provider(j, live)
	tr := tp.Tracer("t")
	ctx := context.Background()

	endAll(spans(tr, "confirmed", 100))
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	live.setFailing(true)
	failed := spans(tr, "failed", 30)
	endAll(failed)
	_ = tp.ForceFlush(ctx) // refused: never confirmed
	queued := spans(tr, "queued", 20)
	endAll(queued) // in the batcher's queue at the death
	open := spans(tr, "open", 10)
	j.die()

	rep, exp := recoverT(t, dir)
	got := byID(t, exp.stubs())
	if rep.Ended != 50 || rep.Open != 10 || len(got) != 60 {
		t.Fatalf("report %+v, %d spans; want 50 ended and 10 open", rep, len(got))
	}
	for _, s := range live.stubs() {
		if _, again := got[[8]byte(s.SpanContext.SpanID())]; again {
			t.Errorf("confirmed span %s sent again", s.Name)
		}
	}
	for _, group := range [][]trace.Span{failed, queued, open} {
		for _, s := range group {
			if _, ok := got[[8]byte(s.SpanContext().SpanID())]; !ok {
				t.Errorf("span %s not recovered", s.SpanContext().SpanID())
			}
		}
	}
}

// A batch the collector accepted, whose confirmation the death prevented,
// is sent again at recovery, with the same ids and content; the batches
// confirmed before it are not.
func TestABatchSentButNotConfirmedIsSentAgainWithTheSameIDs(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	live := &memExporter{}
	tp, w := provider(j, live)
	tr := tp.Tracer("t")
	ctx := context.Background()

	endAll(spans(tr, "confirmed", 10))
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	var window []sdktrace.ReadOnlySpan
	w.afterExport = func(ss []sdktrace.ReadOnlySpan) {
		window = append(window, ss...)
		j.die() // the process dies after the collector said yes
	}
	endAll(spans(tr, "window", 7))
	_ = tp.ForceFlush(ctx)
	if len(window) != 7 {
		t.Fatalf("%d spans in the window, want 7", len(window))
	}

	rep, exp := recoverT(t, dir)
	got := byID(t, exp.stubs())
	if rep.Ended != 7 || len(got) != 7 {
		t.Fatalf("report %+v, want the 7 spans of the window", rep)
	}
	for _, s := range window {
		g, ok := got[[8]byte(s.SpanContext().SpanID())]
		if !ok {
			t.Errorf("span %s of the window not sent again", s.Name())
			continue
		}
		if !g.SpanContext.Equal(s.SpanContext()) || g.Name != s.Name() || !g.StartTime.Equal(s.StartTime()) || !g.EndTime.Equal(s.EndTime()) {
			t.Errorf("span %s sent again as %+v", s.Name(), g)
		}
	}
	// Once: a second Recover finds nothing.
	if again, exp2 := recoverT(t, dir); again.Files != 0 || len(exp2.stubs()) != 0 {
		t.Errorf("second Recover: %+v", again)
	}
}

// recordOnly samples nothing but records everything.
type recordOnly struct{}

func (recordOnly) ShouldSample(sdktrace.SamplingParameters) sdktrace.SamplingResult {
	return sdktrace.SamplingResult{Decision: sdktrace.RecordOnly}
}
func (recordOnly) Description() string { return "recordOnly" }

func TestUnsampledSpansAreNotJournalled(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	tp, _ := provider(j, &memExporter{}, sdktrace.WithSampler(recordOnly{}))
	tr := tp.Tracer("t")
	endAll(spans(tr, "ended", 10))
	_ = spans(tr, "open", 10)
	j.die()
	if rep, exp := recoverT(t, dir); len(exp.stubs()) != 0 || rep.Files != 1 || rep.Removed != 1 {
		t.Errorf("report %+v, %d spans: unsampled spans were journalled", rep, len(exp.stubs()))
	}
}

// With the journal's processor registered after the batcher, an export
// may be confirmed before the end is journalled: the span is not
// recovered as open.
func TestAConfirmationBeforeTheEndIsKept(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	s := newFakeSpan(1)
	p := j.SpanProcessor()
	p.OnStart(context.Background(), s)
	j.confirm([]sdktrace.ReadOnlySpan{s})
	p.OnEnd(s)
	j.die()
	if rep, exp := recoverT(t, dir); len(exp.stubs()) != 0 {
		t.Errorf("report %+v: a confirmed span was recovered", rep)
	}
}

// A span whose export was confirmed before its end reached the journal
// (its processor registered after the batcher) is not recovered as open
// when the process dies before the end does: it was exported.
func TestAConfirmationBeforeTheEndOutlivesADeathBeforeTheEnd(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	s := newFakeSpan(1)
	p := j.SpanProcessor()
	p.OnStart(context.Background(), s)
	j.confirm([]sdktrace.ReadOnlySpan{s})
	j.die()
	if rep, exp := recoverT(t, dir); len(exp.stubs()) != 0 || rep.Open != 0 {
		t.Errorf("report %+v: a confirmed span was recovered", rep)
	}
}

func TestCleanCloseRemovesTheFileWhenEverythingWasConfirmed(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	tp, _ := provider(j, &memExporter{})
	tr := tp.Tracer("t")
	endAll(spans(tr, "ended", 10))
	neverEnded := spans(tr, "open", 3)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.OpenAtClose != 3 {
		t.Errorf("OpenAtClose %d, want 3", st.OpenAtClose)
	}
	if rep, _ := recoverT(t, dir); rep.Files != 0 {
		t.Errorf("file left after a clean close: %+v", rep)
	}
	endAll(neverEnded) // after Shutdown: the provider calls no processor
}

func TestCleanCloseKeepsWhatWasNotConfirmed(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	live := &memExporter{failing: true}
	tp, _ := provider(j, live)
	tr := tp.Tracer("t")
	endAll(spans(tr, "ended", 10))
	_ = spans(tr, "open", 3)
	_ = tp.Shutdown(context.Background()) // the export fails
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	rep, exp := recoverT(t, dir)
	if rep.Ended != 10 || rep.Open != 0 || len(exp.stubs()) != 10 {
		t.Errorf("report %+v: want the 10 ended spans the exporter refused, and no open one", rep)
	}
}

// A death between a confirmation's marks of a span's start and of its end
// (the at-least-once window) sends the span again as it ended, with the
// attributes its end left to its start record: the same span, not one
// without its attributes.
func TestADeathBetweenAConfirmationsMarksSendsTheWholeSpanAgain(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	s := newFakeSpan(1)
	p := j.SpanProcessor()
	p.OnStart(context.Background(), s)
	p.OnEnd(s)
	k := liveKey(s.SpanContext().SpanID())
	start, end, ok := j.records(k)
	if !ok || start == 0 || end == 0 {
		t.Fatalf("records %d %d %v: want the end to leave the attributes to the start", start, end, ok)
	}
	j.confirm([]sdktrace.ReadOnlySpan{s})
	// The death came after the start's mark, before the end's.
	sh := j.shard(k)
	sh.mu.Lock()
	*j.word32(int(end) + recState) = stateLive
	sh.mu.Unlock()
	j.die()
	rep, exp := recoverT(t, dir)
	got := exp.stubs()
	if len(got) != 1 || rep.Ended != 1 {
		t.Fatalf("report %+v, %d spans: want the span sent again", rep, len(got))
	}
	if want := append(s.Attributes(), RecoveredKey.Bool(true)); !sameAttrs(got[0].Attributes, want) {
		t.Errorf("attributes %v, want %v", got[0].Attributes, want)
	}
}

// A recovery that dies after marking some of a batch's records (one write
// a record) leaves no ended span to be sent again as open: it marks a
// span's start before its end.
func TestARecoveryDyingAmidItsMarksSendsNoEndedSpanAsOpen(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	s := newFakeSpan(1)
	p := j.SpanProcessor()
	p.OnStart(context.Background(), s)
	p.OnEnd(s)
	j.die()
	errDied := errors.New("died")
	func() {
		defer func() {
			if r := recover(); r != errDied {
				panic(r)
			}
		}()
		afterMark = func() { panic(errDied) }
		defer func() { afterMark = nil }()
		_, _ = Recover(context.Background(), dir, &memExporter{})
	}()
	rep, exp := recoverT(t, dir)
	got := exp.stubs()
	if len(got) != 1 || rep.Ended != 1 || got[0].Status.Code == codes.Error {
		t.Fatalf("report %+v, %+v: want the span sent again as it ended", rep, got)
	}
	if want := append(s.Attributes(), RecoveredKey.Bool(true)); !sameAttrs(got[0].Attributes, want) {
		t.Errorf("attributes %v, want %v", got[0].Attributes, want)
	}
}
