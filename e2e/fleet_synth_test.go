package e2e

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/fleet"
	"github.com/otelomni/otelomni/internal/jaeger/jaegertest"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// synthRequest is a request rebuilt from a timing record with chosen
// durations (otelomni's record path), so that which policy it crosses is
// known by construction, whatever the machine's speed. Image and video
// requests are single-stage diffusion requests (request, queue wait,
// exec); the others run one LLM stage (request, stage, queue, prefill,
// decode).
type synthRequest struct {
	modality string
	duration time.Duration
	queue    time.Duration
	err      error
}

// producer sends synthetic requests over OTLP through otelsetup, with trace
// ids from a seeded generator, and remembers how many spans each trace
// made.
type producer struct {
	tel *otelsetup.Telemetry
	in  *otelomni.Instrumenter
	rec *tracetest.SpanRecorder
	n   int
}

func newProducer(t *testing.T, endpoint, service string, seed uint64) *producer {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", service)
	p := &producer{rec: tracetest.NewSpanRecorder()}
	var err error
	p.tel, err = otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics(),
		otelsetup.WithIDGenerator(newSeededIDs(seed)), otelsetup.WithSpanProcessor(p.rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.tel.Shutdown(context.Background()) })
	p.in = otelomni.New(otelomni.WithTracerProvider(p.tel.TracerProvider()))
	return p
}

// send records r as one trace that ended a second ago, and returns its
// trace id.
func (p *producer) send(t *testing.T, r synthRequest) string {
	t.Helper()
	p.n++
	t0 := time.Now().Add(-r.duration - time.Second)
	info := otelomni.RequestInfo{ID: "synth-" + strconv.Itoa(p.n), Model: "synthetic", Modality: r.modality, Start: t0}
	diffusion := r.modality == attrs.ModalityImage || r.modality == attrs.ModalityVideo
	if diffusion {
		info.Stage = otelomni.StageInfo{ID: 0, Name: "dit", Type: attrs.StageDiffusion}
	}
	ctx, req := p.in.Start(context.Background(), info)
	end := t0.Add(r.duration)
	if diffusion {
		check(t, req.RecordPhase(spans.QueueWait, spans.Lasting(t0, r.queue)))
		check(t, req.RecordPhase(spans.Exec, spans.Between(t0, end)))
	} else {
		_, st := p.in.StartStage(ctx, otelomni.StageInfo{ID: 0, Name: "thinker", Type: attrs.StageLLM, Start: t0})
		prefill := t0.Add(r.queue)
		check(t, st.RecordLLM(&spans.LLMRecord{
			Queue:   spans.Between(t0, prefill),
			Prefill: spans.Between(prefill, prefill.Add((end.Sub(prefill))/4)),
			Decode:  spans.Between(prefill.Add((end.Sub(prefill))/4), end),
		}))
		check(t, st.EndAt(end, nil))
	}
	check(t, req.EndAt(end, r.err))
	return trace.SpanContextFromContext(ctx).TraceID().String()
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// flush exports every span so far; the test fails if one did not reach
// the collector (after a flush nothing is queued: a pending span was
// dropped from the full queue).
func (p *producer) flush(t *testing.T) {
	t.Helper()
	if err := p.tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := p.tel.ExportStats(); st.Lost() > 0 {
		t.Fatalf("the producer lost %d of its %d spans", st.Lost(), st.Ended)
	}
}

// spans returns how many spans each trace made.
func (p *producer) spans() map[string]int {
	out := map[string]int{}
	for _, s := range p.rec.Ended() {
		out[s.SpanContext().TraceID().String()]++
	}
	return out
}

// seededIDs draws trace and span ids from a seeded generator, so that a
// test's trace ids, and therefore the collector's hash-based baseline
// decisions on them, are the same on every run.
type seededIDs struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newSeededIDs(seed uint64) *seededIDs {
	return &seededIDs{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *seededIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[:8], g.rng.Uint64())
	binary.BigEndian.PutUint64(tid[8:], g.rng.Uint64())
	return tid, g.spanIDLocked()
}

func (g *seededIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spanIDLocked()
}

func (g *seededIDs) spanIDLocked() trace.SpanID {
	var sid trace.SpanID
	for sid == (trace.SpanID{}) {
		binary.BigEndian.PutUint64(sid[:], g.rng.Uint64())
	}
	return sid
}

var _ sdktrace.IDGenerator = (*seededIDs)(nil)

// startTier starts the shipped backend and collector for t, with settings,
// and stops them when t ends (printing their logs if it failed).
func startTier(t *testing.T, settings map[string]string) *fleet.Tier {
	t.Helper()
	bin := jaegertest.Binary(t)
	tier, err := fleet.StartTier(context.Background(), bin, t.TempDir(), settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tier.Stop()
		if t.Failed() {
			t.Logf("collector's log:\n%s", tier.Collector.Logs())
			t.Logf("backend's log:\n%s", tier.Backend.Logs())
		}
	})
	return tier
}
