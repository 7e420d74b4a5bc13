// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelomni_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/omniattr"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/spans"
)

// fivePhases runs one request with the five phases of the benchmark, on the
// live path and the record path.
func fivePhases(in *otelomni.Instrumenter) {
	ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: "r", Model: "m"})
	pre := req.StartPhase(context.Background(), spans.Preprocess)
	pre.End(nil)
	exec := req.StartPhase(context.Background(), spans.Exec)
	req.StartPhase(context.Background(), spans.QueueWait).End(nil)
	exec.End(nil)
	req.StartPhase(context.Background(), spans.OutputReadyWait).End(nil)
	req.StartPhase(ctx, spans.Postprocess).End(nil)
	req.End(nil)
}

func TestNoopProviderStartsNothingAndAllocatesNothing(t *testing.T) {
	for name, in := range map[string]*otelomni.Instrumenter{
		"noop.NewTracerProvider": otelomni.New(otelomni.WithTracerProvider(noop.NewTracerProvider())),
	} {
		t.Run(name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, func() { fivePhases(in) }); n != 0 {
				t.Errorf("a request with its phases allocated %.0f times, want 0", n)
			}
		})
	}
}

// TestGlobalProviderBeforeAndAfterSDK runs in a child process: installing
// the global provider cannot be undone, and the nosdk benchmark and other
// tests need it untouched.
func TestGlobalProviderBeforeAndAfterSDK(t *testing.T) {
	if os.Getenv("OTELOMNI_CHILD") != t.Name() {
		runChild(t)
		return
	}
	in := otelomni.New()
	var zero otelomni.Instrumenter
	// The API's own cost: the global tracer's Start of a non-recording
	// span at a time read once (as every span otelomni makes starts), which
	// otelomni cannot avoid through the public API.
	tracer := otel.GetTracerProvider().Tracer("baseline")
	api := testing.AllocsPerRun(100, func() {
		_, s := tracer.Start(context.Background(), spans.RequestSpanName, trace.WithTimestamp(time.Now()))
		s.End()
	})
	for _, in := range []*otelomni.Instrumenter{in, &zero} {
		if n := testing.AllocsPerRun(100, func() { fivePhases(in) }); n > api {
			t.Errorf("before an SDK is installed: %.0f allocations per request, want at most the API's own %.0f", n, api)
		}
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	fivePhases(in)
	if got := len(byName(rec.Ended())[spans.RequestSpanName]); got != 1 {
		t.Fatalf("after otel.SetTracerProvider the same instrumenter should record: %d request spans", got)
	}
}

// runChild runs the calling test alone in a child process, which sees
// OTELOMNI_CHILD set to the test's name, and fails if the child fails.
func runChild(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), "OTELOMNI_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestUnsampledRequestStartsNoPhaseSpan(t *testing.T) {
	cp := &countingProvider{tp: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))}
	in := otelomni.New(otelomni.WithTracerProvider(cp))
	fivePhases(in)
	if n := cp.starts.Load(); n != 1 {
		t.Fatalf("Start was called %d times; want 1 (the request, for the sampling decision)", n)
	}
}

func TestManyConcurrentRequestsMakeCorrectTrees(t *testing.T) {
	r := newRecorded(t, otelomni.WithDenoiseSteps(true))
	const goroutines, perG = 16, 50
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: fmt.Sprintf("g%d-%d", g, i)})
				var wg2 sync.WaitGroup
				wg2.Add(1)
				// The scheduler reports the queue wait from another goroutine.
				go func() {
					defer wg2.Done()
					req.StartPhase(context.Background(), spans.QueueWait).End(nil)
				}()
				req.StartPhase(context.Background(), spans.Preprocess).End(nil)
				exec := req.StartPhase(context.Background(), spans.Exec)
				fwd := req.StartPhase(exec.Context(), spans.Forward)
				for s := 0; s < 3; s++ {
					req.StartPhase(fwd.Context(), spans.DenoiseStep, attrs.StepKey.Int(s)).End(nil)
				}
				fwd.End(nil)
				req.StartPhase(exec.Context(), spans.VAEDecode).End(nil)
				exec.End(nil)
				wg2.Wait()
				req.StartPhase(ctx, spans.Postprocess).End(nil)
				req.End(nil)
			}
		}(g)
	}
	wg.Wait()

	ended := r.rec.Ended()
	traces := map[[16]byte][]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		tid := s.SpanContext().TraceID()
		traces[tid] = append(traces[tid], s)
	}
	if len(traces) != goroutines*perG {
		t.Fatalf("%d traces, want %d", len(traces), goroutines*perG)
	}
	for _, ss := range traces {
		if len(ss) != 10 {
			t.Fatalf("a trace has %d spans, want 10: %v", len(ss), names(ss))
		}
		for _, s := range ss {
			if got := parentName(ss, s); got != wantParent[s.Name()] {
				t.Fatalf("%s: parent %q, want %q", s.Name(), got, wantParent[s.Name()])
			}
		}
	}
}

func TestMisuseDoesNotPanic(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "misuse"})

	p := req.StartPhase(context.Background(), spans.Preprocess)
	p.End(nil)
	p.End(nil) // ended twice

	late := req.StartPhase(context.Background(), spans.Exec)
	req.End(nil)
	req.End(nil)  // request ended twice
	late.End(nil) // a phase ended after its request (which ended it)
	req.StartPhase(context.Background(), spans.Postprocess).End(nil)
	if err := req.Record(fullRecord()); !errors.Is(err, otelomni.ErrRequestEnded) {
		t.Errorf("Record after End: %v, want ErrRequestEnded", err)
	}
	_ = req.EndAt(at(1), nil)
	req.StartPhase(context.Background(), spans.Phase(200)).End(nil)
	req.StartPhase(context.Background(), spans.Phase(0)).End(nil)

	// Zero values and nils.
	var zr otelomni.Request
	zr.StartPhase(context.Background(), spans.Exec).End(nil)
	zr.End(errors.New("x"))
	_ = zr.Record(fullRecord())
	var nr *otelomni.Request
	nr.StartPhase(context.Background(), spans.Exec).End(nil)
	nr.End(nil)
	nr.StartPhase(ctx, spans.Exec).End(nil)
	var za otelomni.ActivePhase
	za.End(nil)
	za.End(errors.New("x"))
	za.SetAttributes(omniattr.BatchSize(1))
	//lint:ignore SA1012 a nil context is the misuse under test
	_, nilCtxReq := r.in.Start(nil, otelomni.RequestInfo{ID: "nil-ctx"}) //nolint:staticcheck
	nilCtxReq.End(nil)
	_ = req.Record(nil)

	got := byName(r.rec.Ended())
	if len(got[spans.Preprocess.SpanName()]) != 1 {
		t.Error("preprocess ended twice must make one span")
	}
	if len(got[spans.Exec.SpanName()]) != 1 {
		t.Error("the exec still open at the request's end must be ended with it, once")
	}
	if len(got[spans.Postprocess.SpanName()]) != 0 {
		t.Error("a phase started after its request ended must make no span")
	}
	if len(got[spans.RequestSpanName]) != 2 {
		t.Errorf("%d request spans, want 2", len(got[spans.RequestSpanName]))
	}
	if s := r.in.Stats(); s.Misuse < 5 {
		t.Errorf("misuse counted %d times, want at least 5", s.Misuse)
	}
}

func TestOpenPhasesEndWithTheRequestChildrenFirst(t *testing.T) {
	r := newRecorded(t)
	_, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "disconnect"})
	exec := req.StartPhase(context.Background(), spans.Exec)
	req.StartPhase(exec.Context(), spans.Forward)
	req.End(otelomni.ErrClientDisconnect)
	ss := r.rec.Ended()
	if len(ss) != 3 {
		t.Fatalf("spans %v", names(ss))
	}
	if ss[0].Name() != spans.Forward.SpanName() || ss[1].Name() != spans.Exec.SpanName() || ss[2].Name() != spans.RequestSpanName {
		t.Errorf("end order %v, want forward, exec, request", names(ss))
	}
	if ss[1].EndTime().After(ss[2].EndTime()) {
		t.Error("exec ends after its request")
	}
}

func TestEndWithAnErrorMarksThePhaseFailed(t *testing.T) {
	r := newRecorded(t)
	ctx, req := r.in.Start(context.Background(), otelomni.RequestInfo{ID: "err"})
	boom := errors.New("preprocessor failed")
	pre := req.StartPhase(ctx, spans.Preprocess)
	inner := pre.Context()
	pre.End(boom)
	req.End(boom)
	s := one(t, r.rec.Ended(), spans.Preprocess.SpanName())
	if s.Status().Code != codes.Error || s.Status().Description != boom.Error() {
		t.Errorf("status %+v", s.Status())
	}
	if sc := traceSpanID(inner); sc != s.SpanContext().SpanID() {
		t.Error("fn's context Context should hold the phase span")
	}
}
