// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/otelsetup"
)

const (
	richChildEnv = "OMNITRACE_RECOVER_RICH_CHILD"
	// richLiveEnv names the directory the rich child writes what its live
	// path sent in.
	richLiveEnv = "OMNITRACE_RECOVER_RICH_LIVE"
)

// everyType is an attribute of each type the API has (and so the journal
// records), nested ones among them.
func everyType(prefix string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.Bool(prefix+"bool", true),
		attribute.Int64(prefix+"int", -1<<62),
		attribute.Float64(prefix+"float", -1.5e300),
		attribute.String(prefix+"string", "héllo"),
		attribute.BoolSlice(prefix+"bools", []bool{true, false}),
		attribute.Int64Slice(prefix+"ints", []int64{0, -1, 7}),
		attribute.Float64Slice(prefix+"floats", []float64{0.25, -2}),
		attribute.StringSlice(prefix+"strings", []string{"a", "", "ü"}),
		attribute.ByteSlice(prefix+"bytes", []byte{0, 1, 0xff}),
		attribute.Slice(prefix+"slice", attribute.IntValue(1), attribute.StringValue("two"),
			attribute.SliceValue(attribute.BoolValue(true)), attribute.ByteSliceValue([]byte("b"))),
		attribute.Map(prefix+"map", attribute.String("k", "v"),
			attribute.Map("inner", attribute.Float64("f", 2), attribute.ByteSlice("raw", []byte{9}))),
		{Key: attribute.Key(prefix + "empty")},
	}
}

// farFuture is a time OTLP cannot carry: past 2262, its nanoseconds since
// 1970 overflow 64 bits.
var farFuture = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)

// TestRecoverChildRichEngine is an engine, run as a child: it journals
// spans with every attribute type, events, links, two scopes, ended and
// open spans and one that ends in the year 3000 into the directory
// OMNITRACE_RECOVER_RICH_CHILD names, says R and waits to be killed. Its
// collector never answers: nothing is confirmed.
func TestRecoverChildRichEngine(t *testing.T) {
	dir := os.Getenv(richChildEnv)
	if dir == "" {
		t.Skip("run by the recover tests as a child")
	}
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	live, err := os.Create(filepath.Join(os.Getenv(richLiveEnv), "live.json"))
	if err != nil {
		t.Fatal(err)
	}
	otlp, err := newFileExporter(context.Background(), live)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(),
		otelsetup.WithFallbackExporter(downAfterSending{otlp}), otelsetup.WithJournal(dir), otelsetup.WithServiceName("rich-engine"))
	if err != nil {
		t.Fatal(err)
	}
	tp := tel.TracerProvider()
	tr := tp.Tracer("rich", trace.WithInstrumentationVersion("v1.2.3"), trace.WithSchemaURL("https://opentelemetry.io/schemas/1.26.0"),
		trace.WithInstrumentationAttributes(attribute.String("scope.k", "v")))
	other := tp.Tracer("other")
	start := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)
	ts, _ := trace.ParseTraceState("vendor=value")
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	ctx, root := tr.Start(ctx, "root", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start),
		trace.WithAttributes(everyType("")...), trace.WithLinks(trace.Link{SpanContext: remote, Attributes: everyType("link.")}),
		// Strings an OTLP exporter refuses a whole batch for, nested.
		trace.WithAttributes(attribute.Slice("bad.slice", attribute.StringValue("bad \xff")), attribute.Map("bad.map", attribute.String("k\xfe", "v"))))
	root.AddEvent("an event", trace.WithTimestamp(start.Add(time.Millisecond)), trace.WithAttributes(everyType("event.")...))
	for i, k := range []trace.SpanKind{trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindInternal} {
		_, c := other.Start(ctx, fmt.Sprint("child ", i), trace.WithSpanKind(k), trace.WithTimestamp(start.Add(time.Duration(i)*time.Second)))
		switch i {
		case 0:
			c.SetStatus(codes.Error, "it failed")
		case 1:
			c.SetStatus(codes.Ok, "")
		}
		c.End(trace.WithTimestamp(start.Add(time.Duration(i)*time.Second + time.Microsecond)))
	}
	_, far := tr.Start(ctx, "ends in the year 3000", trace.WithTimestamp(start))
	far.End(trace.WithTimestamp(farFuture))
	_, open := tr.Start(ctx, "open at the death", trace.WithAttributes(everyType("open.")...))
	_ = open
	root.SetStatus(codes.Error, "root failed")
	root.End(trace.WithTimestamp(start.Add(time.Hour)))
	// The ended spans go out live, and fail: they stay in the journal.
	_ = tel.ForceFlush(context.Background())
	fmt.Println("R")
	select {}
}

// downAfterSending writes each batch as the SDK's OTLP exporter sends it,
// and then fails, as a collector that went down before it answered: the
// spans stay in the journal, and the file shows what the live path sent.
type downAfterSending struct{ otlp sdktrace.SpanExporter }

func (d downAfterSending) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	if err := d.otlp.ExportSpans(ctx, ss); err != nil {
		return err
	}
	return errors.New("the collector went away before it answered")
}

func (d downAfterSending) Shutdown(ctx context.Context) error { return d.otlp.Shutdown(ctx) }

// richJournal runs TestRecoverChildRichEngine on a new directory, kills it
// once ready, and returns the directory and the file of what its live
// path sent.
func richJournal(t *testing.T) (dir, live string) {
	t.Helper()
	dir, liveDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRecoverChildRichEngine$")
	cmd.Env = []string{richChildEnv + "=" + dir, richLiveEnv + "=" + liveDir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := false
	for !ready && sc.Scan() {
		ready = sc.Text() == "R"
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if !ready {
		t.Fatalf("the child engine ended before it was ready: %s", stderr.String())
	}
	if n := len(journalFiles(t, dir)); n != 1 {
		t.Fatalf("%d journal files after the kill, want 1", n)
	}
	return dir, filepath.Join(liveDir, "live.json")
}

// richSpans is what TestRecoverChildRichEngine journals that OTLP can
// carry: the root, four children, the open span.
const richSpans = 6

// copyJournal copies the journals of dir into a new directory: a dead
// process's journal is a file like any other.
func copyJournal(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	for _, f := range journalFiles(t, dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// readOut reads an OTLP/JSON file of recover -out: one TracesData a line.
func readOut(t *testing.T, path string) []ptrace.Traces {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ptrace.Traces
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			td, uerr := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
			if uerr != nil {
				t.Fatalf("%s: a line that is not OTLP/JSON: %v", path, uerr)
			}
			out = append(out, td)
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// arrived is one span as it arrived, with its resource and scope.
type arrived struct {
	res                    pcommon.Resource
	resSchema, scopeSchema string
	scope                  pcommon.InstrumentationScope
	span                   ptrace.Span
}

// bySpanID flattens what arrived, by span id; a span that arrived twice
// fails the test.
func bySpanID(t *testing.T, way string, tds []ptrace.Traces) map[pcommon.SpanID]arrived {
	t.Helper()
	m := map[pcommon.SpanID]arrived{}
	for _, td := range tds {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if _, dup := m[s.SpanID()]; dup {
						t.Errorf("%s: span %s (%s) arrived twice", way, s.SpanID(), s.Name())
					}
					m[s.SpanID()] = arrived{rs.Resource(), rs.SchemaUrl(), ss.SchemaUrl(), ss.Scope(), s}
				}
			}
		}
	}
	return m
}

// diffArrived lists the fields in which a and b differ.
func diffArrived(a, b arrived) []string {
	var d []string
	check := func(field string, same bool) {
		if !same {
			d = append(d, field)
		}
	}
	check("resource attributes", a.res.Attributes().Equal(b.res.Attributes()))
	check("resource dropped attributes", a.res.DroppedAttributesCount() == b.res.DroppedAttributesCount())
	check("resource schema", a.resSchema == b.resSchema)
	check("scope name", a.scope.Name() == b.scope.Name())
	check("scope version", a.scope.Version() == b.scope.Version())
	check("scope attributes", a.scope.Attributes().Equal(b.scope.Attributes()))
	check("scope schema", a.scopeSchema == b.scopeSchema)
	x, y := a.span, b.span
	check("trace id", x.TraceID() == y.TraceID())
	check("parent span id", x.ParentSpanID() == y.ParentSpanID())
	check("trace state", x.TraceState().AsRaw() == y.TraceState().AsRaw())
	check("flags", x.Flags() == y.Flags())
	check("name", x.Name() == y.Name())
	check("kind", x.Kind() == y.Kind())
	check("start", x.StartTimestamp() == y.StartTimestamp())
	check("end", x.EndTimestamp() == y.EndTimestamp())
	check("attributes", x.Attributes().Equal(y.Attributes()))
	check("dropped attributes", x.DroppedAttributesCount() == y.DroppedAttributesCount())
	check("events", x.Events().Len() == y.Events().Len() && func() bool {
		for i := range x.Events().Len() {
			e, f := x.Events().At(i), y.Events().At(i)
			if e.Name() != f.Name() || e.Timestamp() != f.Timestamp() || !e.Attributes().Equal(f.Attributes()) ||
				e.DroppedAttributesCount() != f.DroppedAttributesCount() {
				return false
			}
		}
		return true
	}())
	check("dropped events", x.DroppedEventsCount() == y.DroppedEventsCount())
	check("links", x.Links().Len() == y.Links().Len() && func() bool {
		for i := range x.Links().Len() {
			e, f := x.Links().At(i), y.Links().At(i)
			if e.TraceID() != f.TraceID() || e.SpanID() != f.SpanID() || e.TraceState().AsRaw() != f.TraceState().AsRaw() ||
				e.Flags() != f.Flags() || !e.Attributes().Equal(f.Attributes()) || e.DroppedAttributesCount() != f.DroppedAttributesCount() {
				return false
			}
		}
		return true
	}())
	check("dropped links", x.DroppedLinksCount() == y.DroppedLinksCount())
	check("status code", x.Status().Code() == y.Status().Code())
	check("status message", x.Status().Message() == y.Status().Message())
	return d
}

// wantValueTypes checks that every attribute of everyType arrived as the
// OTLP exporter sends it: each type as its own OTLP value.
func wantValueTypes(t *testing.T, way, what string, m pcommon.Map, prefix string) {
	t.Helper()
	want := map[string]pcommon.ValueType{
		"bool": pcommon.ValueTypeBool, "int": pcommon.ValueTypeInt, "float": pcommon.ValueTypeDouble,
		"string": pcommon.ValueTypeStr, "bools": pcommon.ValueTypeSlice, "ints": pcommon.ValueTypeSlice,
		"floats": pcommon.ValueTypeSlice, "strings": pcommon.ValueTypeSlice, "bytes": pcommon.ValueTypeBytes,
		"slice": pcommon.ValueTypeSlice, "map": pcommon.ValueTypeMap, "empty": pcommon.ValueTypeEmpty,
	}
	for k, typ := range want {
		v, ok := m.Get(prefix + k)
		if !ok || v.Type() != typ {
			t.Errorf("%s: %s attribute %q arrived as %v %q, want %v", way, what, prefix+k, v.Type(), v.AsString(), typ)
		}
	}
	if v, _ := m.Get(prefix + "bytes"); v.Type() == pcommon.ValueTypeBytes && !slices.Equal(v.Bytes().AsRaw(), []byte{0, 1, 0xff}) {
		t.Errorf("%s: %s bytes %v", way, what, v.Bytes().AsRaw())
	}
	if v, _ := m.Get(prefix + "map"); v.Type() == pcommon.ValueTypeMap {
		inner, _ := v.Map().Get("inner")
		raw, _ := inner.Map().Get("raw")
		if raw.Type() != pcommon.ValueTypeBytes {
			t.Errorf("%s: %s a map's nested bytes arrived as %v", way, what, raw.Type())
		}
	}
}

// wantRootTypes checks the attributes of the rich child's root span, its
// event's and its link's.
func wantRootTypes(t *testing.T, way string, root ptrace.Span) {
	t.Helper()
	wantValueTypes(t, way, "span", root.Attributes(), "")
	if root.Events().Len() != 1 || root.Links().Len() != 1 {
		t.Errorf("%s: the root span arrived with %d events and %d links, want 1 and 1", way, root.Events().Len(), root.Links().Len())
		return
	}
	wantValueTypes(t, way, "event", root.Events().At(0).Attributes(), "event.")
	wantValueTypes(t, way, "link", root.Links().At(0).Attributes(), "link.")
}

// TestRecoverOutWritesWhatTheOTLPExporterSends: recover -out writes each
// attribute type as the OTLP exporter sends it (bytes as bytes, slices as
// arrays, maps as key-value lists, an empty value as empty) and refuses,
// and counts, a span whose end OTLP cannot carry, as the other ways out do.
func TestRecoverOutWritesWhatTheOTLPExporterSends(t *testing.T) {
	clearEnv(t)
	dir, _ := richJournal(t)
	out := filepath.Join(t.TempDir(), "out.json")
	code, stdout, stderr := runCmd(t, "", "recover", "-out", out, dir)
	got := bySpanID(t, "-out", readOut(t, out))
	if len(got) != richSpans {
		t.Errorf("%d spans in the file, want %d", len(got), richSpans)
	}
	for _, a := range got {
		if a.span.EndTimestamp().AsTime().Before(a.span.StartTimestamp().AsTime()) {
			t.Errorf("%s: ends at %v, before its start %v", a.span.Name(), a.span.EndTimestamp(), a.span.StartTimestamp())
		}
		switch a.span.Name() {
		case "ends in the year 3000":
			t.Errorf("a span that ends in the year 3000 was written, ending %v", a.span.EndTimestamp().AsTime())
		case "root":
			wantRootTypes(t, "-out", a.span)
		}
	}
	if code != recoverPartial || !strings.Contains(stdout, "1 refused") {
		t.Errorf("exit %d, want %d with the refused span counted\n%s%s", code, recoverPartial, stdout, stderr)
	}
	if files := journalFiles(t, dir); len(files) != 0 {
		t.Errorf("journal files left: %v", files)
	}
}

// TestRecoverIntoACollectorThatRejectsASpan: a collector takes each batch
// and rejects one span of it (an OTLP partial success). The batch is done:
// each span is sent once, the rejected one is counted and the collector's
// reason said, and the journal is removed.
func TestRecoverIntoACollectorThatRejectsASpan(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			clearEnv(t)
			dir := t.TempDir()
			killedEngine(t, dir)
			c := newFakeCollector(t, 1)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint(protocol))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			code, stdout, stderr := runCmd(t, "", "recover", dir)
			if n := c.spanCount(); n != 9 {
				t.Errorf("the collector received %d spans, want the journal's 9, once", n)
			}
			if !strings.Contains(stdout, "recovered 9 spans") || !strings.Contains(stdout, "8 accepted, 1 rejected by the collector") ||
				!strings.Contains(stderr, "span too old for this collector") {
				t.Errorf("output:\n%s%s", stdout, stderr)
			}
			if code != recoverPartial {
				t.Errorf("exit %d, want %d: a span was lost", code, recoverPartial)
			}
			if files := journalFiles(t, dir); len(files) != 0 {
				t.Errorf("journal files left: %v", files)
			}
			// Again: nothing is sent twice.
			code, stdout, _ = runCmd(t, "", "recover", dir)
			if n := c.spanCount(); n != 9 || code != recoverOK || !strings.Contains(stdout, "recovered 0 spans") {
				t.Errorf("a second recover: exit %d, %d spans at the collector\n%s", code, n, stdout)
			}
		})
	}
}

// TestEveryWayOutDeliversTheSameSpans runs one journal through each way
// out: the engine's restart and `omnitrace recover`, each over OTLP/HTTP
// and gRPC to a collector on loopback, and `recover -out`. What arrives
// is the same, field by field: the same spans, the same resources and
// scopes, every attribute type as the OTLP exporter sends it, the span
// OTLP cannot carry refused and counted by each.
func TestEveryWayOutDeliversTheSameSpans(t *testing.T) {
	clearEnv(t)
	dir, live := richJournal(t)
	ctx := context.Background()
	got := map[string]map[pcommon.SpanID]arrived{}
	var ways []string
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		c := newFakeCollector(t, 0)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint(protocol))
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
		t.Setenv("OTEL_METRICS_EXPORTER", "none")

		way := "a restart over " + protocol
		restart := copyJournal(t, dir)
		tel, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithJournal(restart))
		if err != nil {
			t.Fatal(err)
		}
		if err := tel.ForceFlush(ctx); err != nil {
			t.Errorf("%s: %v", way, err)
		}
		st := tel.ExportStats()
		if err := tel.Shutdown(ctx); err != nil {
			t.Errorf("%s: %v", way, err)
		}
		if st.Recovered != richSpans || st.RecoveredRefused != 1 || st.RecoveredRejected != 0 || st.RecoveredFailed != 0 {
			t.Errorf("%s: ExportStats %+v, want %d recovered and 1 refused", way, st, richSpans)
		}
		got[way], ways = bySpanID(t, way, c.received()), append(ways, way)
		if left, _ := os.ReadDir(restart); len(left) != 0 {
			t.Errorf("%s: %d files left in the journal directory", way, len(left))
		}

		way = "omnitrace recover over " + protocol
		n := len(c.received())
		code, stdout, stderr := runCmd(t, "", "recover", copyJournal(t, dir))
		if code != recoverPartial || !strings.Contains(stdout, fmt.Sprintf("%d accepted, 0 rejected by the collector (its reason on stderr), 1 refused", richSpans)) {
			t.Errorf("%s: exit %d\n%s%s", way, code, stdout, stderr)
		}
		got[way], ways = bySpanID(t, way, c.received()[n:]), append(ways, way)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	way, out := "omnitrace recover -out", filepath.Join(t.TempDir(), "out.json")
	if code, stdout, stderr := runCmd(t, "", "recover", "-out", out, copyJournal(t, dir)); code != recoverPartial || !strings.Contains(stdout, "1 refused") {
		t.Errorf("%s: exit %d\n%s%s", way, code, stdout, stderr)
	}
	got[way], ways = bySpanID(t, way, readOut(t, out)), append(ways, way)

	ref := got[ways[0]]
	if len(ref) != richSpans {
		t.Fatalf("%s: %d spans arrived, want %d", ways[0], len(ref), richSpans)
	}
	for id, a := range ref {
		if v, _ := a.res.Attributes().Get("service.name"); v.Str() != "rich-engine" {
			t.Errorf("%s: span %s of service %q, want the dead engine's", ways[0], a.span.Name(), v.Str())
		}
		if a.span.Name() == "root" {
			bad, _ := a.span.Attributes().Get("bad.slice")
			badMap, _ := a.span.Attributes().Get("bad.map")
			if bad.AsString() != "[\"bad \uFFFD\"]" || badMap.AsString() != "{\"k\uFFFD\":\"v\"}" {
				t.Errorf("%s: nested strings that are not valid UTF-8 arrived as %s and %s, want them repaired", ways[0], bad.AsString(), badMap.AsString())
			}
			wantRootTypes(t, ways[0], a.span)
		}
		for _, way := range ways[1:] {
			b, ok := got[way][id]
			if !ok {
				t.Errorf("%s: span %s (%s) did not arrive", way, id, a.span.Name())
				continue
			}
			if d := diffArrived(a, b); len(d) > 0 {
				t.Errorf("span %s (%s): %s and %s differ in %s", id, a.span.Name(), ways[0], way, strings.Join(d, ", "))
			}
		}
	}
	for _, way := range ways[1:] {
		if len(got[way]) != len(ref) {
			t.Errorf("%s: %d spans arrived, %s %d", way, len(got[way]), ways[0], len(ref))
		}
	}
	// And each span that had ended arrives as the live path sent it
	// before the death, but for omni.recovered.
	sent := bySpanID(t, "the live path", readOut(t, live))
	if len(sent) != richSpans-1 { // all but the one still open
		t.Errorf("the live path sent %d spans, want %d", len(sent), richSpans-1)
	}
	for id, a := range sent {
		b, ok := ref[id]
		if !ok {
			t.Errorf("span %s (%s) was sent live and not recovered", id, a.span.Name())
			continue
		}
		if v, _ := b.span.Attributes().Get(string(recoveredKey)); !v.Bool() {
			t.Errorf("span %s (%s): recovered without omni.recovered", id, a.span.Name())
		}
		r := b
		r.span = ptrace.NewSpan()
		b.span.CopyTo(r.span)
		r.span.Attributes().Remove(string(recoveredKey))
		if d := diffArrived(a, r); len(d) > 0 {
			t.Errorf("span %s (%s): the live path and %s differ in %s", id, a.span.Name(), ways[0], strings.Join(d, ", "))
		}
	}
}
