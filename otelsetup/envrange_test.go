// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

// The tests of this file walk every variable of the table: for each value,
// either Setup warns about it once, naming the variable, keeps tracing on
// and the variable's default takes effect, or it accepts it without a
// word and the value that takes effect in the SDK is the value as
// written, each observed in the SDK itself (spans held, batches exported,
// limits applied, timers fired on a synctest clock), never by timing.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"
)

// unsetOTel unsets every OTEL_* variable for the test.
func unsetOTel(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "OTELOMNI_JOURNAL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// oddValues are what an operator, an env file or an attacker may write
// where a number is wanted.
var oddValues = []string{
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "1e30", "100000000000",
	"9223372036855", // milliseconds that overflow a time.Duration
	"20000000", "-1", "-5", "0", " 5", "5 ", "\t5", " ", "５", "5\u00a0", "\u00a05", "\u20075",
	"0x10", "010", "0o10", "0b1", "1_000", "+5", "5.0", "5e0", "5ms", "soon", "yes", "05", "-0",
	"\"5\"", "'5'", "5,5", "5 5", strings.Repeat("9", 4096), strings.Repeat("1", maxEnvValue+1),
}

// wantNumber is the rule the table promises for a number: decimal digits
// without sign, spaces or leading zeros, from lo to hi.
func wantNumber(v string, lo, hi int64) (int64, bool) {
	if v == "" || len(v) > 19 || (len(v) > 1 && v[0] == '0') {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= lo && n <= hi
}

// rangeOf is the range of a number variable as the tests see it: the
// table's, with a batch size bounded by its queue's default.
func rangeOf(v envVar) (lo, hi int64) {
	lo, hi = v.lo, v.hi
	switch v.name {
	case "OTEL_BSP_MAX_EXPORT_BATCH_SIZE":
		hi = min(hi, defaultSpanQueue)
	case "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE":
		hi = min(hi, defaultLogQueue)
	}
	return lo, hi
}

// warnedOnce checks that errs hold exactly one warning of otelsetup, and
// that it names name, in one line of at most 512 bytes.
func warnedOnce(t *testing.T, name string, errs []error) {
	t.Helper()
	var ws []*EnvError
	for _, err := range errs {
		var w *EnvError
		if errors.As(err, &w) {
			ws = append(ws, w)
		}
	}
	if len(ws) != 1 || ws[0].Name != name {
		t.Fatalf("warnings %v, want one, naming %s", errs, name)
	}
	if msg := ws[0].Error(); strings.ContainsAny(msg, "\r\n") || len(msg) > 512 {
		t.Errorf("a warning of %d bytes or more than one line: %q", len(msg), msg)
	}
}

// keptErrors sets an OpenTelemetry error handler that keeps what it gets,
// for the test.
func keptErrors(t *testing.T) func() []error {
	t.Helper()
	var (
		mu   sync.Mutex
		errs []error
	)
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

// defaultNumber is what takes effect for a number variable when it is
// unset or ignored, with every other variable unset.
func defaultNumber(t *testing.T, v envVar) int64 {
	t.Helper()
	if v.name == envJournalSync {
		return 0 // never
	}
	n, err := strconv.ParseInt(v.using(&environ{nums: map[string]int64{}, vals: map[string]string{}}), 10, 64)
	if err != nil {
		t.Fatalf("%s: no default number: %v", v.name, err)
	}
	return n
}

// TestEveryNumberTakesEffectAsWrittenOrIsIgnored walks every variable of
// the table with each odd value: each is accepted, and then the value
// that takes effect is the value written, or it is warned about once,
// tracing stays on, and the default takes effect.
func TestEveryNumberTakesEffectAsWrittenOrIsIgnored(t *testing.T) {
	for _, v := range envVars {
		values := oddValues
		if v.hi > 0 {
			lo, hi := rangeOf(v)
			values = append(values[:len(values):len(values)], fmt.Sprint(lo), fmt.Sprint(lo+6), fmt.Sprint(hi),
				fmt.Sprint(lo+(hi-lo)/3), fmt.Sprint(lo-1), fmt.Sprint(hi+1))
			if v.name == "OTEL_EXPORTER_PROMETHEUS_PORT" {
				values = append(values, freePort(t))
			}
		}
		t.Run(v.name, func(t *testing.T) {
			observed, ignored := 0, 0
			for _, val := range values {
				unsetOTel(t)
				t.Setenv(v.name, val)
				want, accept := int64(0), false
				switch {
				case v.hi > 0:
					lo, hi := rangeOf(v)
					want, accept = wantNumber(val, lo, hi)
				case v.name == "OTEL_SERVICE_NAME":
					// Any text is a name, once written without spaces
					// around it or control characters, in 255 bytes.
					accept = strings.TrimSpace(val) == val && !strings.ContainsFunc(val, unicode.IsControl) && len(val) <= 255
				}
				errs := keptErrors(t)
				tel, err := Setup(context.Background(), WithoutGlobal(), WithFallbackExporter(discardExporter{}), WithoutMetrics())
				if err != nil || !tel.Enabled() {
					t.Fatalf("%s=%.40q: Setup = %v, enabled %v: want tracing on", v.name, val, err, tel.Enabled())
				}
				_ = tel.Shutdown(context.Background())
				if !accept {
					// Setup is called: a value the check lets through
					// would cost gigabytes or a panic.
					warnedOnce(t, v.name, errs())
					ignored++
					if v.hi > 0 {
						want = defaultNumber(t, v)
					}
				} else if len(errs()) != 0 {
					t.Errorf("%s=%.40q: %v, want no warning", v.name, val, errs())
					continue
				}
				if obs, ok := observers[v.name]; ok && (accept || v.hi > 0) {
					obs(t, v.name, val, want)
					observed++
				} else if v.hi > 0 {
					t.Fatalf("%s is a number and no test observes what it sets", v.name)
				}
			}
			if v.hi > 0 && (observed < 3 || ignored < 3) {
				t.Errorf("%s: %d values observed, %d ignored, want at least 3 of each (its bounds and one between; out of range)", v.name, observed, ignored)
			}
		})
	}
}

// TestNoValueCarriesANUL: a NUL cannot reach a variable at all, so no
// check needs to see one.
func TestNoValueCarriesANUL(t *testing.T) {
	unsetOTel(t)
	if err := os.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "5\x00"); err == nil {
		os.Unsetenv("OTEL_BSP_MAX_QUEUE_SIZE")
		t.Fatal("a value with a NUL was set")
	}
}

// TestTheDocumentedRangeIsTheChecked: every number of the table has its
// range in the environment table of docs/reliability.md, every variable of
// the table is there, and every variable there is in the table.
func TestTheDocumentedRangeIsTheChecked(t *testing.T) {
	b, err := os.ReadFile("../docs/reliability.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## The environment")
	end := strings.Index(doc[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/reliability.md has no environment section")
	}
	rows := strings.Split(doc[start:start+1+end], "\n")
	known := map[string]bool{"OTEL_TRACES_SAMPLER_ARG": true}
	for _, v := range envVars {
		known[v.name] = true
	}
	for _, r := range rows {
		if !strings.HasPrefix(r, "| `OTEL_") {
			continue
		}
		cell, _, _ := strings.Cut(r[1:], "|")
		for _, n := range regexp.MustCompile("`(OTEL_[A-Z0-9_]+)`").FindAllStringSubmatch(cell, -1) {
			if !known[n[1]] {
				t.Errorf("docs/reliability.md documents %s, which is not in the table", n[1])
			}
		}
	}
	for _, v := range envVars {
		var row string
		for _, r := range rows {
			if strings.HasPrefix(r, "|") && strings.Contains(r, "`"+v.name+"`") {
				row = r
				break
			}
		}
		if row == "" {
			t.Errorf("%s is not in the environment table of docs/reliability.md", v.name)
			continue
		}
		if v.hi > 0 {
			if rng := fmt.Sprintf("%d to %d", v.lo, v.hi); !strings.Contains(row, rng) {
				t.Errorf("the row of %s does not say its range, %s: %s", v.name, rng, row)
			}
		}
	}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// observers set up what a variable configures, with the variable set as
// given, and check that what takes effect is want, the value as written.
var observers = map[string]func(t *testing.T, name, val string, want int64){
	"OTEL_SERVICE_NAME":              observeServiceName,
	"OTEL_BSP_MAX_QUEUE_SIZE":        observeSpanQueue,
	"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": observeSpanBatch,
	"OTEL_BSP_SCHEDULE_DELAY":        observeSpanDelay,
	"OTEL_BSP_EXPORT_TIMEOUT":        observeSpanExportTimeout,

	"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT":      observeSpanLimit,
	"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": observeSpanLimit,
	"OTEL_ATTRIBUTE_COUNT_LIMIT":             observeSpanLimit,
	"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT":        observeSpanLimit,
	"OTEL_SPAN_EVENT_COUNT_LIMIT":            observeSpanLimit,
	"OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT":       observeSpanLimit,
	"OTEL_SPAN_LINK_COUNT_LIMIT":             observeSpanLimit,
	"OTEL_LINK_ATTRIBUTE_COUNT_LIMIT":        observeSpanLimit,

	"OTEL_BLRP_MAX_QUEUE_SIZE":                    observeLogQueue,
	"OTEL_BLRP_MAX_EXPORT_BATCH_SIZE":             observeLogBatch,
	"OTEL_BLRP_SCHEDULE_DELAY":                    observeLogDelay,
	"OTEL_BLRP_EXPORT_TIMEOUT":                    observeLogExportTimeout,
	"OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT": observeLogLimit,
	"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT":        observeLogLimit,

	"OTEL_METRIC_EXPORT_INTERVAL":   observeMetricReader,
	"OTEL_METRIC_EXPORT_TIMEOUT":    observeMetricReader,
	"OTEL_GO_X_CARDINALITY_LIMIT":   observeCardinality,
	"OTEL_EXPORTER_PROMETHEUS_PORT": observePrometheusPort,

	"OTEL_EXPORTER_OTLP_TIMEOUT":         observeOTLPTimeout,
	"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":  observeOTLPTimeout,
	"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": observeOTLPTimeout,
	"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT":    observeOTLPTimeout,
}

func setupT(t *testing.T, opts ...Option) *Telemetry {
	t.Helper()
	tel, err := Setup(context.Background(), append([]Option{WithoutGlobal(), WithFallbackExporter(nil)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tel
}

func observeServiceName(t *testing.T, _, val string, _ int64) {
	exp := tracetest.NewInMemoryExporter()
	tel := setupT(t, WithSpanExporter(exp), WithServiceName("from-code"))
	_, s := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
	s.End()
	_ = tel.ForceFlush(context.Background())
	got := exp.GetSpans()
	_ = tel.Shutdown(context.Background())
	if v, _ := got[0].Resource.Set().Value("service.name"); v.AsString() != val {
		t.Errorf("service.name %q, want %q", v.AsString(), val)
	}
}

// gated is an exporter whose exports wait until it is opened, and which
// records what it got.
type gated struct {
	open    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	batches []int
	got     chan int // each batch's size, as it arrives
}

func newGated(open bool) *gated {
	g := &gated{open: make(chan struct{}), got: make(chan int, 1<<16)}
	if open {
		g.release()
	}
	return g
}

func (g *gated) release() { g.once.Do(func() { close(g.open) }) }

func (g *gated) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	g.got <- len(ss)
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	g.batches = append(g.batches, len(ss))
	g.mu.Unlock()
	return nil
}

func (g *gated) Shutdown(context.Context) error { return nil }

// first waits for the first export and returns its size.
func (g *gated) first(t *testing.T) int {
	t.Helper()
	select {
	case n := <-g.got:
		return n
	case <-time.After(2 * time.Minute):
		t.Fatal("no export")
		return 0
	}
}

func endSpans(tel *Telemetry, n int) {
	tr := tel.TracerProvider().Tracer("t")
	for range n {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
}

// sdkBatchConfig is the configuration the SDK's batch span processor
// reports of itself.
func sdkBatchConfig(t *testing.T, tel *Telemetry) sdktrace.BatchSpanProcessorOptions {
	t.Helper()
	m, ok := tel.queue.bsp.(interface{ MarshalLog() any })
	if !ok {
		t.Fatal("the SDK's batch processor reports no configuration")
	}
	return reflect.ValueOf(m.MarshalLog()).FieldByName("Config").Interface().(sdktrace.BatchSpanProcessorOptions)
}

// observeSpanQueue: with the collector hung, the export path holds the
// queue's size plus one batch, exactly, and drops (and counts) the rest.
func observeSpanQueue(t *testing.T, _, _ string, want int64) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", strconv.Itoa(maxMillis)) // no timer: batches leave full
	g := newGated(false)
	tel := setupT(t, WithSpanExporter(g), WithShutdownTimeout(time.Minute))
	defer tel.Shutdown(context.Background())
	batch := min(want, defaultSpanBatch)
	if c := sdkBatchConfig(t, tel); tel.queue.limit != want+batch || int64(c.MaxQueueSize) != want+batch+1 {
		t.Fatalf("holds %d spans in a channel of %d, want %d", tel.queue.limit, c.MaxQueueSize, want+batch)
	}
	if want > 5000 {
		return // the limit above is what admits spans; a smaller queue is filled
	}
	const extra = 3
	endSpans(tel, int(want+batch+extra))
	if d := tel.counts.dropped.Load(); d != extra {
		t.Errorf("%d spans dropped with the collector hung, want %d: the path holds %d of %d", d, extra,
			want+batch+extra-int64(d), want+batch)
	}
	g.release()
	_ = tel.Shutdown(context.Background())
	if st := tel.ExportStats(); int64(st.Exported) != want+batch {
		t.Errorf("%+v: want the %d spans held exported", st, want+batch)
	}
}

// observeSpanBatch: the first batch exported holds the batch size.
func observeSpanBatch(t *testing.T, _, _ string, want int64) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", strconv.Itoa(maxMillis))
	g := newGated(true)
	tel := setupT(t, WithSpanExporter(g))
	defer tel.Shutdown(context.Background())
	endSpans(tel, int(want))
	if n := g.first(t); int64(n) != want {
		t.Errorf("a batch of %d spans, want %d", n, want)
	}
}

// observeSpanDelay: on a synctest clock, a lone span is exported at the
// schedule delay, not a nanosecond earlier.
func observeSpanDelay(t *testing.T, _, _ string, want int64) {
	synctest.Test(t, func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		tel := setupT(t, WithSpanExporter(exp))
		endSpans(tel, 1)
		time.Sleep(time.Duration(want)*time.Millisecond - 1)
		synctest.Wait()
		if n := len(exp.GetSpans()); n != 0 {
			t.Errorf("exported before the delay of %d ms", want)
		}
		time.Sleep(time.Nanosecond) // the last nanosecond of the delay
		synctest.Wait()
		if n := len(exp.GetSpans()); n != 1 {
			t.Errorf("not exported at the delay of %d ms", want)
		}
		_ = tel.Shutdown(context.Background())
	})
}

// waiting is an exporter whose export waits for its context's end, and
// records how long it waited.
type waiting struct{ waited atomic.Int64 }

func (w *waiting) wait(ctx context.Context) error {
	start := time.Now()
	<-ctx.Done()
	w.waited.Store(int64(time.Since(start)))
	return ctx.Err()
}

func (w *waiting) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	return w.wait(ctx)
}
func (w *waiting) Export(ctx context.Context, _ []sdklog.Record) error { return w.wait(ctx) }
func (*waiting) Shutdown(context.Context) error                        { return nil }
func (*waiting) ForceFlush(context.Context) error                      { return nil }

// observeSpanExportTimeout: on a synctest clock, an export to a hung
// collector is given up after the timeout, exactly.
func observeSpanExportTimeout(t *testing.T, _, _ string, want int64) {
	// A batch of one span is exported by the processor's own goroutine,
	// at once: nothing else waits on the SDK's locks, which synctest's
	// clock would not see through.
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
	synctest.Test(t, func(t *testing.T) {
		w := &waiting{}
		tel := setupT(t, WithSpanExporter(w))
		endSpans(tel, 1)
		time.Sleep(time.Duration(want)*time.Millisecond + 1)
		synctest.Wait()
		if got := time.Duration(w.waited.Load()); got != time.Duration(want)*time.Millisecond {
			t.Errorf("the export was given up after %v, want %d ms", got, want)
		}
		_ = tel.Shutdown(context.Background())
	})
}

// observeSpanLimit: a span given one more than the limit keeps the limit.
func observeSpanLimit(t *testing.T, name, _ string, want int64) {
	exp := tracetest.NewInMemoryExporter()
	tel := setupT(t, WithSpanExporter(exp))
	n := int(want) + 1
	kvs := func() []attribute.KeyValue {
		kv := make([]attribute.KeyValue, n)
		for i := range kv {
			kv[i] = attribute.Int("k"+strconv.Itoa(i), i)
		}
		return kv
	}
	tr := tel.TracerProvider().Tracer("t")
	var got func(tracetest.SpanStub) int
	switch name {
	case "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT":
		_, s := tr.Start(context.Background(), "s", trace.WithAttributes(attribute.String("v", strings.Repeat("x", n))))
		s.End()
		got = func(s tracetest.SpanStub) int { return len(s.Attributes[0].Value.AsString()) }
	case "OTEL_ATTRIBUTE_COUNT_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT":
		_, s := tr.Start(context.Background(), "s", trace.WithAttributes(kvs()...))
		s.End()
		got = func(s tracetest.SpanStub) int { return len(s.Attributes) }
	case "OTEL_SPAN_EVENT_COUNT_LIMIT":
		_, s := tr.Start(context.Background(), "s")
		for range n {
			s.AddEvent("e")
		}
		s.End()
		got = func(s tracetest.SpanStub) int { return len(s.Events) }
	case "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT":
		_, s := tr.Start(context.Background(), "s")
		s.AddEvent("e", trace.WithAttributes(kvs()...))
		s.End()
		got = func(s tracetest.SpanStub) int { return len(s.Events[0].Attributes) }
	case "OTEL_SPAN_LINK_COUNT_LIMIT":
		links := make([]trace.Link, n)
		for i := range links {
			links[i] = trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(i), byte(i >> 8), byte(i >> 16), 1}})}
		}
		_, s := tr.Start(context.Background(), "s", trace.WithLinks(links...))
		s.End()
		got = func(s tracetest.SpanStub) int { return len(s.Links) }
	case "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT":
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
		_, s := tr.Start(context.Background(), "s", trace.WithLinks(trace.Link{SpanContext: sc, Attributes: kvs()}))
		s.End()
		got = func(s tracetest.SpanStub) int { return len(s.Links[0].Attributes) }
	default:
		t.Fatalf("no observer for %s", name)
	}
	_ = tel.ForceFlush(context.Background())
	ss := exp.GetSpans()
	_ = tel.Shutdown(context.Background())
	if len(ss) != 1 {
		t.Fatalf("%d spans exported", len(ss))
	}
	if g := got(ss[0]); int64(g) != want {
		t.Errorf("%s=%d: the span keeps %d", name, want, g)
	}
	if name == "OTEL_ATTRIBUTE_COUNT_LIMIT" || name == "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" {
		// The general limits bound log records too.
		observeLogLimit(t, name, "", want)
	}
}

// logs is a log exporter that keeps what it got.
type logs struct {
	mu      sync.Mutex
	records []sdklog.Record
	batches []int
}

func (l *logs) Export(_ context.Context, rs []sdklog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		l.records = append(l.records, r.Clone())
	}
	l.batches = append(l.batches, len(rs))
	return nil
}
func (*logs) Shutdown(context.Context) error   { return nil }
func (*logs) ForceFlush(context.Context) error { return nil }

func (l *logs) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.records)
}

// loggerProvider builds the logger provider as Setup does, with exp.
func loggerProvider(t *testing.T, exp sdklog.Exporter) (*sdklog.LoggerProvider, *sdklog.BatchProcessor) {
	t.Helper()
	env, _ := readEnv()
	return newLoggerProvider(exp, resource.Empty(), env)
}

func emit(lp *sdklog.LoggerProvider, n int, kvs ...attribute.KeyValue) {
	l := lp.Logger("t")
	for range n {
		var r otellog.Record
		r.SetBody(attribute.StringValue("m"))
		r.AddAttributes(kvs...)
		l.Emit(context.Background(), r)
	}
}

// field finds the field called name in v, looking through pointers,
// interfaces, struct fields and the first elements of slices, for the
// settings the SDK keeps to itself.
func field(v reflect.Value, name string, depth int) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	if depth > 6 {
		return v, false
	}
	if v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
		for i := range min(v.Len(), 4) {
			if f, ok := field(v.Index(i), name, depth+1); ok {
				return f, true
			}
		}
		return v, false
	}
	if v.Kind() != reflect.Struct {
		return v, false
	}
	if f := v.FieldByName(name); f.IsValid() {
		return f, true
	}
	for i := range v.NumField() {
		if f, ok := field(v.Field(i), name, depth+1); ok {
			return f, true
		}
	}
	return v, false
}

func intField(t *testing.T, v any, name string) int64 {
	t.Helper()
	f, ok := field(reflect.ValueOf(v), name, 0)
	if !ok {
		t.Fatalf("%T holds no %s: has the SDK changed?", v, name)
	}
	return f.Int()
}

// observeLogQueue: the SDK's queue of log records has the size, and
// allocates it whole at Setup (see TestLogQueueMemoryIsItsFormula).
func observeLogQueue(t *testing.T, _, _ string, want int64) {
	_, bp := loggerProvider(t, &logs{})
	defer bp.Shutdown(context.Background())
	if got := intField(t, bp, "cap"); got != want {
		t.Errorf("a log queue of %d records, want %d", got, want)
	}
}

// observeLogBatch: a flush exports the records in batches of the size.
func observeLogBatch(t *testing.T, _, _ string, want int64) {
	exp := &logs{}
	lp, _ := loggerProvider(t, exp)
	emit(lp, int(want))
	_ = lp.ForceFlush(context.Background())
	_ = lp.Shutdown(context.Background())
	if len(exp.batches) == 0 || int64(exp.batches[0]) != want {
		t.Errorf("batches %v, want the first of %d", exp.batches, want)
	}
}

// observeLogDelay: on a synctest clock, a lone record is exported at the
// schedule delay, not a nanosecond earlier.
func observeLogDelay(t *testing.T, _, _ string, want int64) {
	synctest.Test(t, func(t *testing.T) {
		exp := &logs{}
		lp, _ := loggerProvider(t, exp)
		emit(lp, 1)
		time.Sleep(time.Duration(want)*time.Millisecond - 1)
		synctest.Wait()
		if exp.count() != 0 {
			t.Errorf("exported before the delay of %d ms", want)
		}
		time.Sleep(time.Nanosecond) // the last nanosecond of the delay
		synctest.Wait()
		if exp.count() != 1 {
			t.Errorf("not exported at the delay of %d ms", want)
		}
		_ = lp.Shutdown(context.Background())
	})
}

func observeLogExportTimeout(t *testing.T, _, _ string, want int64) {
	synctest.Test(t, func(t *testing.T) {
		w := &waiting{}
		lp, _ := loggerProvider(t, w)
		emit(lp, 1)
		_ = lp.ForceFlush(context.Background())
		if got := time.Duration(w.waited.Load()); got != time.Duration(want)*time.Millisecond {
			t.Errorf("the export was given up after %v, want %d ms", got, want)
		}
		_ = lp.Shutdown(context.Background())
	})
}

// observeLogLimit: a record given one more than the limit keeps the limit.
func observeLogLimit(t *testing.T, name, _ string, want int64) {
	exp := &logs{}
	lp, _ := loggerProvider(t, exp)
	n := int(want) + 1
	value := strings.Contains(name, "VALUE_LENGTH")
	if value {
		emit(lp, 1, attribute.String("v", strings.Repeat("x", n)))
	} else {
		kvs := make([]attribute.KeyValue, n)
		for i := range kvs {
			kvs[i] = attribute.Int("k"+strconv.Itoa(i), i)
		}
		emit(lp, 1, kvs...)
	}
	_ = lp.Shutdown(context.Background())
	if len(exp.records) != 1 {
		t.Fatalf("%d records exported", len(exp.records))
	}
	r := exp.records[0]
	got := r.AttributesLen()
	if value {
		r.WalkAttributes(func(kv attribute.KeyValue) bool { got = len(kv.Value.AsString()); return false })
	}
	if int64(got) != want {
		t.Errorf("%s=%d: the record keeps %d", name, want, got)
	}
}

// metrics is a metric exporter that records when it exported, and waits
// for its context's end when told to.
type metrics struct {
	hang    bool
	exports chan time.Time
	waiting
}

func (m *metrics) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}
func (m *metrics) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}
func (m *metrics) Export(ctx context.Context, _ *metricdata.ResourceMetrics) error {
	if m.hang {
		return m.wait(ctx)
	}
	m.exports <- time.Now()
	return nil
}

// observeMetricReader: the periodic reader, built with the options Setup
// gives it (the SDK reads these variables itself, and an option wins),
// exports on a synctest clock at the interval, and gives up a hung export
// after the timeout.
func observeMetricReader(t *testing.T, name, _ string, want int64) {
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	env, _ := readEnv()
	rs := metricReaders(context.Background(), &config{}, env, &Telemetry{})
	if len(rs) != 1 {
		t.Fatalf("readers %v", rs)
	}
	if _, ok := rs[0].(*sdkmetric.PeriodicReader); !ok {
		t.Fatalf("the reader is a %T", rs[0])
	}
	_ = rs[0].Shutdown(canceled())
	d := time.Duration(want) * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		m := &metrics{exports: make(chan time.Time, 4), hang: name == "OTEL_METRIC_EXPORT_TIMEOUT"}
		start := time.Now()
		r := sdkmetric.NewPeriodicReader(m, periodicOptions(env, nil)...)
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
		if m.hang {
			_ = mp.ForceFlush(context.Background())
			synctest.Wait() // ForceFlush may return as the export does
			if got := time.Duration(m.waited.Load()); got != d {
				t.Errorf("the export was given up after %v, want %v", got, d)
			}
		} else {
			time.Sleep(d)
			synctest.Wait()
			select {
			case at := <-m.exports:
				if at.Sub(start) != d {
					t.Errorf("exported after %v, want %v", at.Sub(start), d)
				}
			default:
				t.Errorf("not exported after the interval of %v", d)
			}
		}
		_ = mp.Shutdown(context.Background())
	})
}

// observeCardinality: an instrument keeps at most the limit's series.
func observeCardinality(t *testing.T, _, _ string, want int64) {
	r := sdkmetric.NewManualReader()
	tel := setupT(t, WithMetricReader(r))
	defer tel.Shutdown(context.Background())
	if want > 4096 {
		// What the SDK's pipeline holds; a smaller limit is filled.
		if got := intField(t, tel.mp, "cardinalityLimit"); got != want {
			t.Errorf("a cardinality limit of %d, want %d", got, want)
		}
		return
	}
	c, _ := tel.MeterProvider().Meter("t").Int64Counter("c")
	for i := range want + 5 {
		c.Add(context.Background(), 1, metric.WithAttributes(attribute.Int64("i", i)))
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if n := len(rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64]).DataPoints); int64(n) != want {
		t.Errorf("%d series, want %d", n, want)
	}
}

// observePrometheusPort: the exporter serves on the port, when it is free
// (a bound beyond 1023 or a port in use is the listener's to refuse).
func observePrometheusPort(t *testing.T, _, val string, want int64) {
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	tel, err := Setup(context.Background(), WithoutGlobal(), WithFallbackExporter(nil))
	if err != nil {
		if val != freePortOrEmpty(val) {
			t.Logf("port %s: %v", val, err)
			return
		}
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", want))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics: %s", resp.Status)
	}
}

// freePortOrEmpty returns val when nothing listens there and it can be
// bound by this process, else "".
func freePortOrEmpty(val string) string {
	l, err := net.Listen("tcp", "127.0.0.1:"+val)
	if err != nil {
		return ""
	}
	l.Close()
	return val
}

// observeOTLPTimeout: the gRPC exporter of the signal takes the timeout,
// read by the exporter itself.
func observeOTLPTimeout(t *testing.T, name, _ string, want int64) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	wantD := time.Duration(want) * time.Millisecond
	check := func(what string, v any) {
		if got := time.Duration(intField(t, v, "exportTimeout")); got != wantD {
			t.Errorf("%s: the %s exporter's timeout is %v, want %v", name, what, got, wantD)
		}
	}
	signal := strings.TrimSuffix(strings.TrimPrefix(name, "OTEL_EXPORTER_OTLP_"), "TIMEOUT")
	t.Setenv("OTEL_LOGS_EXPORTER", "otlp")
	env, _ := readEnv()
	if signal == "" || signal == "TRACES_" {
		exp, err := spanExporter(context.Background(), &config{}, env, &Telemetry{})
		if err != nil {
			t.Fatal(err)
		}
		check("span", exp)
		_ = exp.Shutdown(canceled())
	}
	if signal == "" || signal == "METRICS_" {
		rs := metricReaders(context.Background(), &config{}, env, &Telemetry{})
		if len(rs) != 1 {
			t.Fatal(rs)
		}
		check("metric", rs[0])
		_ = rs[0].Shutdown(canceled())
	}
	if signal == "" || signal == "LOGS_" {
		exp, err := newLogExporter(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		check("log", exp)
		_ = exp.Shutdown(canceled())
	}
}

// canceled is a context already done: a shutdown that exports nothing.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestEveryVariableTheSDKReadsIsInTheTable reads the sources of every
// OpenTelemetry module go.mod requires, from the module cache, and finds
// every OTEL_* variable they read: named in full, by the OTLP exporters'
// envconfig under OTEL_EXPORTER_OTLP_, or as an experimental OTEL_GO_X_
// feature. Each must be in the table, so that a new SDK version cannot add
// a variable that escapes the check.
func TestEveryVariableTheSDKReadsIsInTheTable(t *testing.T) {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			t.Skipf("go env: %v: no module cache to read the SDK's sources from", err)
		}
		cache = strings.TrimSpace(string(out))
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{
		"OTEL_TRACES_SAMPLER_ARG": true, // checked with the sampler that reads it
	}
	for _, v := range envVars {
		inTable[v.name] = true
	}
	full := regexp.MustCompile(`"(OTEL_[A-Z0-9_]*[A-Z0-9])"`)
	otlp := regexp.MustCompile(`(?:envconfig\.With\w+|WithEnv\w+|withEnv\w+)\(\s*"([A-Z_]+)"`)
	otlpPair := regexp.MustCompile(`envconfig\.WithClientCert\(\s*"([A-Z_]+)",\s*"([A-Z_]+)"`)
	feature := regexp.MustCompile(`newFeature\(\s*\[\]string\{([^}]*)\}`)
	quoted := regexp.MustCompile(`"([A-Z_]+)"`)
	read, modules := map[string]string{}, 0
	required := regexp.MustCompile(`(?m)^\s*(go\.opentelemetry\.io/(?:otel|contrib)\S*)\s+(v\S+)`)
	for _, m := range required.FindAllStringSubmatch(string(mod), -1) {
		dir := filepath.Join(cache, m[1]+"@"+m[2])
		if _, err := os.Stat(dir); err != nil {
			t.Skipf("%s is not in the module cache", dir)
		}
		modules++
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			// semconv is generated constants, 29 MB of them: it reads no
			// variable.
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "semconv") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			src, where := string(b), m[1]+" "+strings.TrimPrefix(p, dir+string(filepath.Separator))
			if !strings.Contains(src, "OTEL_") && !strings.Contains(src, "nvconfig") && !strings.Contains(src, "newFeature(") {
				return nil
			}
			for _, f := range full.FindAllStringSubmatch(src, -1) {
				read[f[1]] = where
			}
			for _, f := range otlp.FindAllStringSubmatch(src, -1) {
				read["OTEL_EXPORTER_OTLP_"+f[1]] = where
			}
			for _, f := range otlpPair.FindAllStringSubmatch(src, -1) {
				read["OTEL_EXPORTER_OTLP_"+f[1]], read["OTEL_EXPORTER_OTLP_"+f[2]] = where, where
			}
			for _, f := range feature.FindAllStringSubmatch(src, -1) {
				for _, q := range quoted.FindAllStringSubmatch(f[1], -1) {
					read["OTEL_GO_X_"+q[1]] = where
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if modules < 10 || len(read) < 40 {
		t.Fatalf("read %d variables from %d modules: the scan finds nothing", len(read), modules)
	}
	for name, where := range read {
		switch {
		case name == "OTEL_GO_X_" || name == "OTEL_EXPORTER_OTLP":
			// The prefixes the names above are built on.
		case !inTable[name]:
			t.Errorf("%s, read by %s, is not in the table", name, where)
		}
	}
}

// flaky is an exporter that fails every third export.
type flaky struct{ n atomic.Int64 }

func (f *flaky) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	if f.n.Add(1)%3 == 0 {
		return errors.New("refused")
	}
	return nil
}
func (*flaky) Shutdown(context.Context) error { return nil }

// TestEachLossIsReportedOnceWhileSpansRace: spans end on several
// goroutines into a small queue, with exports failing and spans refused,
// while ForceFlush runs again and again: the losses the flushes report add
// up to exactly those counted, and every span is accounted for.
func TestEachLossIsReportedOnceWhileSpansRace(t *testing.T) {
	unsetOTel(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "64")
	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	tel := setupT(t, WithSpanExporter(&flaky{}), WithShutdownTimeout(time.Minute))
	tr := tel.TracerProvider().Tracer("t")
	var reported atomic.Uint64
	flush := func() {
		var loss *LossError
		if err := tel.ForceFlush(context.Background()); errors.As(err, &loss) {
			reported.Add(loss.since.total())
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range rounds / 20 {
			flush()
		}
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range rounds / 4 {
				var opts []trace.SpanStartOption
				if i%97 == 0 {
					opts = append(opts, trace.WithTimestamp(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)))
				}
				_, s := tr.Start(context.Background(), "s"+strconv.Itoa(g), opts...)
				s.End()
			}
		})
	}
	wg.Wait()
	<-done
	flush()
	c := tel.counts
	lost := c.dropped.Load() + c.failed.Load() + c.refused.Load()
	t.Logf("%d spans: %d dropped, %d failed, %d refused", rounds, c.dropped.Load(), c.failed.Load(), c.refused.Load())
	if got := reported.Load(); got != lost || lost == 0 {
		t.Errorf("the flushes reported %d lost, %d were (%d dropped, %d failed, %d refused)", got, lost,
			c.dropped.Load(), c.failed.Load(), c.refused.Load())
	}
	_ = tel.Shutdown(context.Background())
	if st := tel.ExportStats(); st.Ended != uint64(rounds) || st.Exported+st.Failed+st.Refused+st.Pending != st.Ended ||
		st.Pending != c.dropped.Load() {
		t.Errorf("stats %+v, %d dropped: every span accounted for", st, c.dropped.Load())
	}
}

// FuzzEnvironmentValue sets a variable of the table to any value: the
// check never panics, a number it accepts is written as the table says
// and is in range, and headers it accepts are ones HTTP and gRPC both
// carry, as the exporters decode them. Run with
// go test -fuzz FuzzEnvironmentValue ./otelsetup.
func FuzzEnvironmentValue(f *testing.F) {
	for i, v := range oddValues {
		f.Add(uint16(i), v)
	}
	f.Add(uint16(0), "api-key=abc%20def, x=y")
	f.Add(uint16(0), `"api-key"=x`)
	f.Add(uint16(0), "a=%C3%A9")
	f.Fuzz(func(t *testing.T, i uint16, v string) {
		if v == "" || strings.IndexByte(v, 0) >= 0 {
			return // unset; no variable can hold a NUL
		}
		unsetOTel(t)
		for _, name := range []string{envVars[int(i)%len(envVars)].name, "OTEL_EXPORTER_OTLP_HEADERS"} {
			os.Unsetenv("OTEL_EXPORTER_OTLP_HEADERS")
			t.Setenv(name, v)
			env, _ := readEnv()
			if _, ok := env.vals[name]; !ok {
				if _, ok := env.nums[name]; !ok {
					continue
				}
			}
			if n, ok := env.nums[name]; ok && strconv.FormatInt(n, 10) != v {
				t.Fatalf("%s=%q accepted as %d", name, v, n)
			}
			if name != "OTEL_EXPORTER_OTLP_HEADERS" {
				continue
			}
			// As the exporters decode it.
			for _, pair := range strings.Split(v, ",") {
				k, val, _ := strings.Cut(pair, "=")
				k = strings.ToLower(strings.TrimSpace(k))
				d, _ := url.PathUnescape(val)
				d = strings.TrimSpace(d)
				for _, c := range []byte(k) {
					if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
						t.Fatalf("header name %q accepted: gRPC does not carry it", k)
					}
				}
				if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(d) {
					t.Fatalf("header %q: %q accepted: HTTP does not carry it", k, d)
				}
				for _, c := range []byte(d) {
					if c < 0x20 || c > 0x7e {
						t.Fatalf("header value %q accepted: gRPC does not carry it", d)
					}
				}
			}
		}
	})
}
