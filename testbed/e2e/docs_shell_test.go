// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// TestDocsShellBlocks runs every command of the docs' shell blocks that the
// inventory runs, in the order of the docs, in one fresh clone of this
// working tree, against one Jaeger; then checks each TraceQL query and
// diagram against the spans the examples exported there.
func TestDocsShellBlocks(t *testing.T) {
	ws := theWorkspace(t)
	root := repoRoot(t)
	byKey := map[string]docBlock{}
	for _, b := range readBlocks(t, root, docFiles(t, root)) {
		byKey[b.key] = b
	}
	j := jaegertest.Start(t)
	prom := freePort(t)
	s := &docSession{
		ws: ws, ctx: testContext(t), jaeger: j,
		// The only changes made to a command: the default ports of a
		// collector endpoint or of Jaeger's query API, moved to the test's (other programs may
		// hold the defaults).
		rewrites: []rewrite{
			{"http://127.0.0.1:4318", j.OTLPEndpoint("http/protobuf")},
			{"http://127.0.0.1:4317", j.OTLPEndpoint("grpc")},
			{"OTEL_EXPORTER_PROMETHEUS_PORT=9464", "OTEL_EXPORTER_PROMETHEUS_PORT=" + prom},
			{"127.0.0.1:9464", "127.0.0.1:" + prom},
			{"http://127.0.0.1:16686", "http://" + j.Query},
		},
		spans: map[string][]traceview.Span{},
		state: map[string]any{},
	}
	t.Cleanup(s.stopAll)
	inv := docsInventory()
	for _, e := range inv {
		if e.cmds == nil && (e.check == nil || entryFor(inv, e.after) == nil || entryFor(inv, e.after).cmds == nil) {
			continue
		}
		b, ok := byKey[e.key]
		if !ok {
			t.Errorf("%s: no such block (TestDocsInventory)", e.key)
			continue
		}
		s.key = e.key
		t.Run(subtestName(e.key), func(t *testing.T) {
			if e.check != nil {
				runCheck(t, s, e, b)
				return
			}
			cmds := shellCommands(b.lang, b.text)
			if len(cmds) != len(e.cmds) {
				t.Fatalf("%d commands, %d in the entry (TestDocsInventory)", len(cmds), len(e.cmds))
			}
			for i, c := range e.cmds {
				if c.run != nil {
					c.run(t, s, cmds[i])
				} else {
					t.Logf("not run: %s: %s (%s)", firstLine(cmds[i]), c.covered.reason, strings.Join(c.covered.tests, ", "))
				}
			}
		})
	}
}

// runCheck checks a query or diagram against what its block exported.
func runCheck(t *testing.T, s *docSession, e docEntry, b docBlock) {
	t.Helper()
	ss := s.spans[e.after]
	if len(ss) == 0 {
		t.Fatalf("no spans of %s, which it is checked against (did it run?)", e.after)
	}
	e.check(t, s, b, ss)
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// fixedPort matches a default endpoint left in a command after the
// rewrites: it would reach whatever else on this machine holds the port.
var fixedPort = regexp.MustCompile(`(127\.0\.0\.1|localhost):(4317|4318|4417|8888|8889|9464|13133|16686)\b`)

// envIn returns the value command c gives variable k (K=v before the
// program), or "".
func envIn(c, k string) string {
	m := regexp.MustCompile(`(?:^|\s)` + regexp.QuoteMeta(k) + `=(\S+)`).FindStringSubmatch(c)
	if m == nil {
		return ""
	}
	return m[1]
}

// flagIn returns the value command c gives flag f, or "".
func flagIn(c, f string) string {
	m := regexp.MustCompile(`\s` + regexp.QuoteMeta(f) + `[ =](\S+)`).FindStringSubmatch(c)
	if m == nil {
		return ""
	}
	return m[1]
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// requestTraces waits until want request traces of service started since
// from are in the test's Jaeger, and returns them; Jaeger holding another
// number fails t.
func (s *docSession) requestTraces(t *testing.T, service string, from time.Time, want int) map[string][]traceview.Span {
	t.Helper()
	traces, err := s.jaeger.WaitTraces(s.ctx, service, from, time.Now().Add(time.Minute), want, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != want {
		t.Fatalf("Jaeger holds %d request traces of %s, want %d", len(traces), service, want)
	}
	return traces
}

// allSpans returns every span of service that started since from: request
// traces and the engine's own (its start, its batches).
func (s *docSession) allSpans(t *testing.T, service string, from time.Time) []traceview.Span {
	t.Helper()
	ss, err := s.jaeger.Client().Search(s.ctx, service, from, time.Now().Add(time.Minute), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// noErrorLines fails t for each line of out that reports an error, but the
// simulated engines' own logs of the failures their scenarios ask for.
func noErrorLines(t *testing.T, c, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "time=") && strings.Contains(l, " msg=") && strings.Contains(l, " trace_id=") {
			continue // the simulated engine's log records of its scenarios' failures
		}
		low := strings.ToLower(l)
		if strings.Contains(low, "error") && !strings.Contains(low, "ended with an error") && !strings.Contains(low, "error.type=") ||
			strings.HasPrefix(low, "shutdown") || strings.Contains(low, "refused") || strings.Contains(low, "failed to") {
			t.Errorf("%s printed %q", firstLine(c), l)
		}
	}
}

// ---------------------------------------------------------------------------
// Outcomes of the commands.

var servedRe = regexp.MustCompile(`(?m)^served (\d+) requests \((\d+) ended with an error, as their scenarios ask\)`)

// runDemo runs `make demo`: a waterfall per request, then a summary per
// phase; nothing exported, no server needed; the engine's start first,
// batches, and the engine's warnings on stderr with their trace and span.
func runDemo(t *testing.T, s *docSession, c string) {
	out, errOut := s.run(t, c)
	// The demo's second part: a request that kills its engine, and the
	// waterfalls its crash journal recovers at the restart.
	crash := strings.Index(out, "\ncrash demo: ")
	if crash < 0 {
		t.Fatalf("%s: no crash demo after the main one:\n%s", c, tail(out))
	}
	out, crashOut := out[:crash], out[crash:]
	checkCrashDemo(t, c, crashOut)
	if !strings.Contains(out, "traces to this terminal (no OTLP endpoint set); metrics to none") {
		t.Errorf("%s: the demo does not say it exports nothing:\n%s", c, firstLine(out))
	}
	m := servedRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no `served N requests` line:\n%s", c, tail(out))
	}
	served := atoi(t, m[1])
	waterfalls := lines(out, `omni.request "`)
	if len(waterfalls) != served || served < 24 {
		t.Errorf("%s: %d waterfalls for %d requests served; want one each, of a few dozen", c, len(waterfalls), served)
	}
	for _, modality := range []string{" image ", " video "} {
		if len(lines(strings.Join(waterfalls, "\n"), modality)) == 0 {
			t.Errorf("%s: no%srequest", c, modality)
		}
	}
	if len(lines(out, "not measured")) == 0 {
		t.Errorf("%s: no phase shown as `not measured`", c)
	}
	summary := strings.Index(out, "summary per phase")
	if summary < 0 || summary < strings.LastIndex(out, `omni.request "`) {
		t.Errorf("%s: no summary per phase after the waterfalls", c)
	} else {
		for _, phase := range []string{"queue_wait", "preprocess", "exec", "postprocess"} {
			if !regexp.MustCompile(`(?m)^` + phase + ` +\d+/` + m[1] + ` `).MatchString(out[summary:]) {
				t.Errorf("%s: the summary has no row for %s", c, phase)
			}
		}
	}
	// docs/engine.md: the engine's start trace first, batches, each
	// member's exec naming its batch, warnings with trace and span.
	if first := regexp.MustCompile(`(?m)^omni\.\S+`).FindString(out); first != "omni.engine.start" {
		t.Errorf("%s: the first trace shown is %q, want the engine's start", c, first)
	}
	// How many batches a run makes depends on its timing; each one shown
	// is linked to its members' execs, and each of them names it.
	batches := regexp.MustCompile(`(?m)^omni\.batch "([^"]+)" of (\d+) requests .*, linked to (\d+) member execs$`).FindAllStringSubmatch(out, -1)
	if len(batches) != len(lines(out, "omni.batch ")) {
		t.Errorf("%s: a batch line reads otherwise:\n%s", c, strings.Join(lines(out, "omni.batch "), "\n"))
	}
	for _, b := range batches {
		if n := len(lines(out, " exec in "+b[1]+" ")); b[2] != b[3] || strconv.Itoa(n) != b[2] {
			t.Errorf("%s: batch %s of %s requests, linked to %s execs, %d of which name it", c, b[1], b[2], b[3], n)
		}
	}
	t.Logf("%d batches", len(batches))
	if len(lines(errOut, "level=WARN")) == 0 || len(lines(errOut, " trace_id=")) == 0 || len(lines(errOut, " span_id=")) == 0 {
		t.Errorf("%s: no warning with its trace and span on stderr:\n%s", c, tail(errOut))
	}
}

var recoveredRe = regexp.MustCompile(`(?m)^recovered (\d+) spans \(ExportStats\.Recovered = (\d+)\)`)

// checkCrashDemo checks the crash part of `make demo`: the engine killed
// with SIGKILL, then, after the restart, the recovered requests each shown
// as a waterfall ended with status Error by the process's death, and the
// count of recovered spans.
func checkCrashDemo(t *testing.T, c, out string) {
	t.Helper()
	killed := strings.Index(out, "was killed with SIGKILL")
	restart := strings.Index(out, "\nrestarting on the same journal directory")
	if killed < 0 || restart < killed {
		t.Fatalf("%s: the crash demo does not kill its engine and restart it:\n%s", c, tail(out))
	}
	died := lines(out[restart:], "ERROR process_died: the process died while the span was open")
	if len(died) == 0 || len(died) != len(lines(out[restart:], `omni.request "`)) {
		t.Errorf("%s: after the restart, %d recovered waterfalls of %d end with the process's death", c, len(died), len(lines(out[restart:], `omni.request "`)))
	}
	m := recoveredRe.FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || atoi(t, m[1]) < len(died) {
		t.Errorf("%s: no count of recovered spans of at least the %d requests shown:\n%s", c, len(died), tail(out))
	}
}

// runSendDemo runs a command that sends the diffusion demo's traces to a
// Jaeger: it ends clean, and Jaeger holds one trace per request.
func runSendDemo(t *testing.T, s *docSession, c string) {
	from := time.Now()
	out, errOut := s.run(t, c)
	noErrorLines(t, c, out+errOut)
	service, n := envIn(c, "OTEL_SERVICE_NAME"), flagIn(c, "-requests")
	if service == "" || n == "" {
		t.Fatalf("%s: names no OTEL_SERVICE_NAME or no -requests: the traces to look for are unknown", c)
	}
	s.requestTraces(t, service, from, atoi(t, n))
	s.spans[s.key] = append(s.spans[s.key], s.allSpans(t, service, from)...)
}

// grpcVariant: "For gRPC use port 4317 and OTEL_EXPORTER_OTLP_PROTOCOL=grpc".
func grpcVariant(c string) string {
	c = strings.ReplaceAll(c, "http://127.0.0.1:4318", "http://127.0.0.1:4317")
	return strings.ReplaceAll(c, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
}

var loadSpansRe = regexp.MustCompile(`(?m)^spans: +(\d+) ended = [\d.]+/s; exported (\d+), failed to export (\d+), dropped (\d+)$`)

// runLoad: the load tool accounts for every span: ended = exported +
// failed + dropped, and it exits 0 exactly when it reports no loss at the
// asked rate.
func runLoad(t *testing.T, s *docSession, c string) {
	p := s.start(t, "", c)
	err := p.wait(s.ctx)
	out := p.out()
	m := loadSpansRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no span accounting (%v)\n%s\n%s", c, err, tail(out), tail(p.errOut()))
	}
	ended, exported, failed, dropped := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3]), atoi(t, m[4])
	if ended == 0 || ended != exported+failed+dropped {
		t.Errorf("%s: %d spans ended, %d exported + %d failed + %d dropped: not every span is counted", c, ended, exported, failed, dropped)
	}
	result := lines(out, "RESULT: ")
	if len(result) != 1 {
		t.Fatalf("%s: no RESULT line\n%s", c, tail(out))
	}
	if sustained := strings.HasPrefix(result[0], "RESULT: sustained"); sustained != (err == nil) {
		t.Errorf("%s: %q, exit %v", c, result[0], err)
	}
}

// vllmLog is a vLLM-Omni log of one request, for `omnitrace import vllm.log`.
const vllmLog = "INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=7 total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]\n"

// runImport: `omnitrace import vllm.log` with no OTEL_* set prints the
// request's spans on the console.
func runImport(t *testing.T, s *docSession, c string) {
	if err := writeFile(s.ws.clone, "vllm.log", vllmLog); err != nil {
		t.Fatal(err)
	}
	out, errOut := s.run(t, c)
	if !strings.Contains(errOut, "imported 1, skipped 0") {
		t.Errorf("%s: %s", c, errOut)
	}
	// With no endpoint set, the spans go to the console as OTLP/JSON.
	ss, err := readOTLPJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("%s: the console output is not OTLP/JSON: %v", c, err)
	}
	found := false
	for _, sp := range ss {
		if sp.Name == "omni.request" && sp.Str("omni.request.id") == "7" {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: no omni.request span of request 7 on the console:\n%s", c, tail(out))
	}
}

// keptJaeger is what `make jaeger KEEP=1` leaves running.
type keptJaeger struct {
	p              *docProc
	query, traceID string
	from           string
	pid            int
	requests       int
}

var (
	readBackRe = regexp.MustCompile(`(?m)^read back from Jaeger's /api/v3: (\d+) traces of (\d+) requests sent$`)
	keepRe     = regexp.MustCompile(`curl 'http://([0-9.:]+)/api/v3/traces/([0-9a-f]{32})'`)
	keepFromRe = regexp.MustCompile(`query\.start_time_min=([^&']+)`)
	jaegerPID  = regexp.MustCompile(`Jaeger is up \(pid (\d+)\)`)
)

// runMakeJaeger: `make jaeger` reads every trace back and prints it.
func runMakeJaeger(t *testing.T, s *docSession, c string) {
	out, _ := s.run(t, c)
	checkReadBack(t, c, out)
}

func checkReadBack(t *testing.T, c, out string) int {
	t.Helper()
	m := readBackRe.FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("%s: every trace is not read back:\n%s", c, tail(out))
	}
	if n := len(regexp.MustCompile(`(?m)^trace [0-9a-f]{32}$`).FindAllString(out, -1)); strconv.Itoa(n) != m[1] {
		t.Errorf("%s: %d traces printed, %s read back", c, n, m[1])
	}
	return atoi(t, m[1])
}

// runMakeJaegerKeep: `make jaeger KEEP=1` does the same, then keeps Jaeger
// running and prints how to query it; the next block queries it.
func runMakeJaegerKeep(t *testing.T, s *docSession, c string) {
	p := s.start(t, "", c)
	p.waitFor(t, s.ctx, "Ctrl-C stops it.")
	out := p.out()
	n := checkReadBack(t, c, out)
	m, f, pid := keepRe.FindStringSubmatch(out), keepFromRe.FindStringSubmatch(out), jaegerPID.FindStringSubmatch(out)
	if m == nil || f == nil || pid == nil {
		t.Fatalf("%s: no query to run:\n%s", c, tail(out))
	}
	s.state["keep"] = &keptJaeger{p: p, query: m[1], traceID: m[2], from: f[1], pid: atoi(t, pid[1]), requests: n}
}

// runCurlKept runs a curl of the docs against the kept Jaeger, with the
// placeholders (PORT, <trace-id>, <RFC 3339 time>) filled, and checks that
// it returns the traces asked for.
func runCurlKept(t *testing.T, s *docSession, c string) {
	k, ok := s.state["keep"].(*keptJaeger)
	if !ok {
		t.Fatal("no Jaeger kept running by `make jaeger KEEP=1`")
	}
	_, port, _ := strings.Cut(k.query, ":")
	times := []string{k.from, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	filled := strings.NewReplacer("PORT", port, "<trace-id>", k.traceID).Replace(c)
	for _, tm := range times {
		filled = strings.Replace(filled, "<RFC 3339 time>", tm, 1)
	}
	if strings.ContainsAny(filled, "<>") {
		t.Fatalf("%s: a placeholder left unfilled: %s", c, filled)
	}
	out, _ := s.run(t, filled)
	var body struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &body); err != nil || len(body.Result) == 0 {
		t.Fatalf("%s: not a result of the query API (%v):\n%s", filled, err, tail(out))
	}
	ss, err := readOTLPJSON(strings.NewReader(string(body.Result)))
	if err != nil {
		t.Fatal(err)
	}
	traces := jaeger.RequestTraces(traceview.ByTrace(ss))
	if strings.Contains(c, "<trace-id>") {
		if len(traces) != 1 || traces[k.traceID] == nil {
			t.Errorf("%s: %d request traces, want the one asked for", filled, len(traces))
		}
		return
	}
	if want := min(k.requests, atoi(t, regexp.MustCompile(`num_traces=(\d+)`).FindStringSubmatch(c)[1])); len(traces) != want {
		t.Errorf("%s: %d request traces, want the demo's %d", filled, len(traces), want)
	}
}

// sendMore runs the command `make jaeger KEEP=1` prints to send more, as
// printed: it ends clean, and the kept Jaeger then holds its requests too.
func sendMore(t *testing.T, s *docSession) {
	k, ok := s.state["keep"].(*keptJaeger)
	if !ok {
		t.Fatal("no Jaeger kept running by `make jaeger KEEP=1`")
	}
	m := regexp.MustCompile(`(?m)^Send more: (.+)$`).FindStringSubmatch(k.p.out())
	if m == nil {
		t.Fatalf("`make jaeger KEEP=1` prints no command to send more:\n%s", tail(k.p.out()))
	}
	out, errOut := s.run(t, m[1])
	noErrorLines(t, m[1], out+errOut)
	served := servedRe.FindStringSubmatch(out)
	if served == nil {
		t.Fatalf("%s: no `served N requests`:\n%s", m[1], tail(out))
	}
	from, err := time.Parse(time.RFC3339, k.from)
	if err != nil {
		t.Fatal(err)
	}
	want := k.requests + atoi(t, served[1])
	traces, err := (&jaeger.Jaeger{Query: k.query}).WaitTraces(s.ctx, "omni-diffusion-demo", from, time.Now().Add(time.Minute), want, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != want {
		t.Errorf("the kept Jaeger holds %d request traces, want %d", len(traces), want)
	}
}

// stopKept: "Ctrl-C stops it": an interrupt ends `make jaeger KEEP=1` and
// its Jaeger.
func stopKept(t *testing.T, s *docSession) {
	k, ok := s.state["keep"].(*keptJaeger)
	if !ok {
		return
	}
	k.p.signal(interrupt)
	if err := k.p.wait(s.ctx); err != nil {
		t.Logf("after Ctrl-C: %v", err)
	}
	for processAlive(k.pid) {
		select {
		case <-s.ctx.Done():
			t.Fatalf("Jaeger (pid %d) still runs after Ctrl-C", k.pid)
		case <-time.After(100 * time.Millisecond):
		}
	}
	delete(s.state, "keep")
}

// lingering is the demo the metrics page leaves serving its histograms.
type lingering struct{ p *docProc }

// runLinger starts the demo with a Prometheus endpoint, and waits until it
// says it lingers: its requests are done.
func runLinger(t *testing.T, s *docSession, c string) {
	p := s.start(t, "", c)
	p.waitFor(t, s.ctx, "lingering")
	s.state["linger"] = &lingering{p: p}
}

var promCountRe = regexp.MustCompile(`(?m)^omni_phase_duration_seconds_count\{([^}]*)\} (\d+)$`)

// runScrape scrapes the lingering demo, and checks the counts against
// the page's statement: for a run of N requests, M had a pre-processor.
func runScrape(t *testing.T, s *docSession, c string) {
	l, ok := s.state["linger"].(*lingering)
	if !ok {
		t.Fatal("no demo lingering")
	}
	defer func() {
		l.p.signal(interrupt)
		_ = l.p.wait(s.ctx)
		delete(s.state, "linger")
	}()
	out, _ := s.run(t, c)
	perPhase := map[string]int{}
	for _, m := range promCountRe.FindAllStringSubmatch(out, -1) {
		ph := regexp.MustCompile(`omni_phase="([^"]+)"`).FindStringSubmatch(m[1])
		if ph != nil {
			perPhase[ph[1]] += atoi(t, m[2])
		}
	}
	if len(perPhase) == 0 {
		t.Fatalf("%s: no count:\n%s", c, tail(out))
	}
	md := readDoc(t, "docs/metrics.md")
	m := regexp.MustCompile(`For a run of (\d+) requests \(seed 1\), (\d+) had a pre-processor:\s+the preprocess count is (\d+), not (\d+)`).FindStringSubmatch(md)
	if m == nil {
		t.Fatal("docs/metrics.md no longer says how many of a run's requests had a pre-processor")
	}
	if cmdN := flagIn(l.p.text, "-requests"); cmdN != m[1] {
		t.Fatalf("the page's run is of %s requests, its command of %s", m[1], cmdN)
	}
	if got := strconv.Itoa(perPhase["preprocess"]); got != m[2] || m[2] != m[3] || m[4] != m[1] {
		t.Errorf("preprocess count %s; docs/metrics.md says %s of %s", got, m[3], m[1])
	}
	if perPhase["exec"] == 0 || perPhase["queue_wait"] == 0 {
		t.Errorf("%s: no exec or queue wait count: %v", c, perPhase)
	}
}

// runOmniLocal: the multi-stage example with no server prints every
// process's spans together, one tree per request.
func runOmniLocal(t *testing.T, s *docSession, c string) {
	out, errOut := s.run(t, c)
	n := flagIn(c, "-requests")
	if !strings.Contains(out, "served "+n+" requests (0 failed)") {
		t.Errorf("%s:\n%s", c, tail(out))
	}
	groups := regexp.MustCompile(`\((\d+) spans from (\d+) processes\)`).FindAllStringSubmatch(out, -1)
	if len(groups) != atoi(t, n) {
		t.Errorf("%s: %d requests shown, want %s", c, len(groups), n)
	}
	for _, g := range groups {
		if atoi(t, g[2]) < 3 {
			t.Errorf("%s: a request's spans from %s processes, want those of its gateway and stages", c, g[2])
		}
	}
	noErrorLines(t, c, errOut)
}

// runOmniJaeger: "five traces in your Jaeger", each one tree across the
// processes, complete.
func runOmniJaeger(t *testing.T, s *docSession, c string) {
	from := time.Now()
	out, errOut := s.run(t, c)
	noErrorLines(t, c, out+errOut)
	n := atoi(t, flagIn(c, "-requests"))
	want := 0
	for i := range n {
		for _, k := range expectOmni(i) {
			want += k
		}
	}
	// Spans from several processes arrive apart: wait for all of them.
	var traces map[string][]traceview.Span
	deadline := time.Now().Add(2 * time.Minute)
	for {
		traces = s.requestTraces(t, "omni-gateway", from, n)
		got := 0
		for _, tr := range traces {
			got += len(tr)
		}
		if got >= want || time.Now().After(deadline) {
			if got != want {
				t.Fatalf("%d spans in %d traces, want %d", got, len(traces), want)
			}
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for id, tr := range traces {
		if roots, _ := traceview.Trees(tr); len(roots) != 1 {
			t.Errorf("trace %s has %d roots, want one omni.request", id, len(roots))
		}
		checkTree(t, id, tr, multiStageParent)
		s.spans[s.key] = append(s.spans[s.key], tr...)
	}
}

// ---------------------------------------------------------------------------
// Queries and diagrams against what the examples exported.

var (
	selectorRe = regexp.MustCompile(`\{([^{}]*)\}`)
	condName   = regexp.MustCompile(`^name\s*=\s*"([^"]+)"$`)
	condAttr   = regexp.MustCompile(`^span\.([\w.]+)\s*(=|!=|>=|<=|>|<)\s*("[^"]*"|-?[\d.]+)$`)
	condDur    = regexp.MustCompile(`^duration\s*(=|!=|>=|<=|>|<)\s*\d+(\.\d+)?(ns|us|ms|s|m|h)?$`)
	pipeSelect = regexp.MustCompile(`^\|\s*select\(([^)]*)\)$`)
	pipeAgg    = regexp.MustCompile(`^\|\s*(avg|min|max|sum)\(duration\)\s*(=|>=|<=|>|<)\s*\d+(\.\d+)?(ns|us|ms|s|m|h)$`)
)

// checkTraceQL reads each query of a TraceQL block and checks it against
// the spans an example exported: every span it names is among them, every
// attribute it compares or selects is on those spans, and every equality
// matches one of them. Durations are an engine's to exceed; they are read,
// not compared.
func checkTraceQL(t *testing.T, _ *docSession, b docBlock, ss []traceview.Span) {
	for _, q := range strings.Split(strings.TrimSpace(b.text), "\n") {
		q = strings.TrimSpace(q)
		sels := selectorRe.FindAllStringSubmatchIndex(q, -1)
		if len(sels) == 0 {
			t.Errorf("%q: no span selector", q)
			continue
		}
		rest := q
		for i := len(sels) - 1; i >= 0; i-- {
			rest = rest[:sels[i][0]] + "\x00" + rest[sels[i][1]:]
		}
		var matched []traceview.Span
		for _, sel := range sels {
			matched = matchSelector(t, q, q[sel[2]:sel[3]], ss)
		}
		// Between selectors only &&; after the last, pipelines.
		parts := strings.Split(rest, "\x00")
		for _, between := range parts[1 : len(parts)-1] {
			if strings.TrimSpace(between) != "&&" {
				t.Errorf("%q: cannot read %q between selectors", q, between)
			}
		}
		if p := strings.TrimSpace(parts[0]); p != "" {
			t.Errorf("%q: cannot read %q", q, p)
		}
		for _, p := range splitPipes(parts[len(parts)-1]) {
			switch m := pipeSelect.FindStringSubmatch(p); {
			case m != nil:
				for _, a := range strings.Split(m[1], ",") {
					key, ok := strings.CutPrefix(strings.TrimSpace(a), "span.")
					if !ok || !anyHas(matched, key) {
						t.Errorf("%q: no span it selects carries %s", q, a)
					}
				}
			case pipeAgg.MatchString(p):
			default:
				t.Errorf("%q: cannot read %q", q, p)
			}
		}
	}
}

func splitPipes(s string) []string {
	var out []string
	for _, p := range strings.Split(s, "|") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, "| "+p)
		}
	}
	return out
}

// matchSelector returns the spans one selector's name and equalities
// match; none fails t.
func matchSelector(t *testing.T, q, sel string, ss []traceview.Span) []traceview.Span {
	t.Helper()
	m := ss
	var compared []string
	for _, c := range strings.Split(sel, "&&") {
		c = strings.TrimSpace(c)
		switch {
		case condName.MatchString(c):
			name := condName.FindStringSubmatch(c)[1]
			m = filterSpans(m, func(s traceview.Span) bool { return s.Name == name })
			if len(m) == 0 {
				t.Errorf("%q: no span named %s", q, name)
				return nil
			}
		case condAttr.MatchString(c):
			a := condAttr.FindStringSubmatch(c)
			if a[2] != "=" {
				compared = append(compared, a[1]) // a threshold: the attribute must be there
				continue
			}
			m = filterSpans(m, func(s traceview.Span) bool { return attrEquals(s.Attrs[a[1]], a[3]) })
			if len(m) == 0 {
				t.Errorf("%q: no span matches %s", q, c)
				return nil
			}
		case condDur.MatchString(c):
		default:
			t.Errorf("%q: cannot read %q", q, c)
		}
	}
	for _, key := range compared {
		if !anyHas(m, key) {
			t.Errorf("%q: no span it selects carries %s", q, key)
		}
	}
	return m
}

func filterSpans(ss []traceview.Span, keep func(traceview.Span) bool) []traceview.Span {
	var out []traceview.Span
	for _, s := range ss {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func anyHas(ss []traceview.Span, key string) bool {
	for _, s := range ss {
		if _, ok := s.Attrs[key]; ok {
			return true
		}
	}
	return false
}

func attrEquals(v attribute.Value, lit string) bool {
	if s, ok := strings.CutPrefix(lit, `"`); ok {
		return v.Type() == attribute.STRING && v.AsString() == strings.TrimSuffix(s, `"`)
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false
	}
	switch v.Type() {
	case attribute.INT64:
		return float64(v.AsInt64()) == f
	case attribute.FLOAT64:
		return v.AsFloat64() == f
	}
	return false
}

// treeNode is one span of a tree diagram.
type treeNode struct {
	name, note string
	parent     *treeNode
}

// parseTree reads a diagram drawn with ├── └── │: a line without a prefix
// is a root, one whose prefix ends in "── " a child of the nearest line
// above it one level up, any other line the note of the line above; "..."
// stands for more of the same. "a.b.c / d / e" is a.b.c, a.b.d and a.b.e.
func parseTree(text string) ([]*treeNode, error) {
	var nodes []*treeNode
	var stack []*treeNode // the last node at each depth
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		r := []rune(line)
		i := 0
		for i < len(r) && strings.ContainsRune("│├└─ ", r[i]) {
			i++
		}
		prefix, content := string(r[:i]), strings.TrimSpace(string(r[i:]))
		child := strings.HasSuffix(prefix, "── ")
		if prefix != "" && !child {
			if len(nodes) == 0 {
				return nil, fmt.Errorf("%q: a note before any span", line)
			}
			nodes[len(nodes)-1].note += " " + content
			continue
		}
		depth := 0
		if child {
			depth = i / 4
		}
		if content == "..." {
			continue
		}
		name, note, _ := strings.Cut(content, " ")
		names := []string{name}
		note = strings.TrimSpace(note)
		for strings.HasPrefix(note, "/ ") {
			var next string
			next, note, _ = strings.Cut(note[2:], " ")
			note = strings.TrimSpace(note)
			names = append(names, name[:strings.LastIndex(name, ".")+1]+next)
		}
		if depth > len(stack) {
			return nil, fmt.Errorf("%q: deeper than the line above", line)
		}
		stack = stack[:depth]
		var parent *treeNode
		if depth > 0 {
			parent = stack[depth-1]
		}
		for _, n := range names {
			nodes = append(nodes, &treeNode{name: n, note: note, parent: parent})
		}
		stack = append(stack, nodes[len(nodes)-len(names)])
	}
	return nodes, nil
}

// treeEdges are a diagram's span -> parent pairs.
func treeEdges(nodes []*treeNode) map[[2]string]bool {
	e := map[[2]string]bool{}
	for _, n := range nodes {
		p := ""
		if n.parent != nil {
			p = n.parent.name
		}
		e[[2]string{n.name, p}] = true
	}
	return e
}

// spanEdges are a trace's span -> parent pairs.
func spanEdges(tr []traceview.Span) map[[2]string]bool {
	byID := map[string]string{}
	for _, s := range tr {
		byID[s.SpanID] = s.Name
	}
	e := map[[2]string]bool{}
	for _, s := range tr {
		e[[2]string{s.Name, byID[s.ParentID]}] = true
	}
	return e
}

// checkEdges fails t for an edge of a trace the diagram does not draw, and
// for an edge the diagram draws that no trace has.
func checkEdges(t *testing.T, what string, diagram map[[2]string]bool, traces [][]traceview.Span) {
	t.Helper()
	union := map[[2]string]bool{}
	for _, tr := range traces {
		for e := range spanEdges(tr) {
			union[e] = true
			if !diagram[e] {
				t.Errorf("%s: the diagram does not show %s under %q", what, e[0], e[1])
			}
		}
	}
	for e := range diagram {
		if !union[e] {
			t.Errorf("%s: the diagram shows %s under %q; no trace has it", what, e[0], e[1])
		}
	}
}

var (
	stageNote    = regexp.MustCompile(`^\((\d+), (\w+), (\w+)\)`)
	transferNote = regexp.MustCompile(`^\((\d+) -> (\d+)\)`)
)

// checkPipelineTree checks a multi-stage diagram against the example's
// traces of that pipeline (those with the diagram's first stage): the
// same tree, the stages with the id, name and type drawn, the transfers
// between the stages drawn, and the attributes noted on a transfer.
func checkPipelineTree(t *testing.T, _ *docSession, b docBlock, ss []traceview.Span) {
	nodes, err := parseTree(b.text)
	if err != nil {
		t.Fatal(err)
	}
	var stages, transfers [][]string
	var transferNotes []string
	for _, n := range nodes {
		if m := stageNote.FindStringSubmatch(n.note); n.name == "omni.stage" && m != nil {
			stages = append(stages, m[1:])
		}
		if m := transferNote.FindStringSubmatch(n.note); n.name == "omni.transfer" && m != nil {
			transfers = append(transfers, m[1:])
			transferNotes = append(transferNotes, n.note)
		}
	}
	if len(stages) == 0 {
		t.Fatal("the diagram draws no stage (id, name, type)")
	}
	var traces [][]traceview.Span
	for _, tr := range traceview.ByTrace(ss) {
		for _, sp := range tr {
			if sp.Name == "omni.stage" && sp.Str("omni.stage.name") == stages[0][1] {
				traces = append(traces, tr)
				break
			}
		}
	}
	if len(traces) == 0 {
		t.Fatalf("no trace of the example has a stage %s", stages[0][1])
	}
	checkEdges(t, b.key, treeEdges(nodes), traces)
	for _, tr := range traces {
		var got, gotT [][]string
		for _, sp := range tr {
			if sp.Name == "omni.stage" {
				id, _ := sp.Int("omni.stage.id")
				got = append(got, []string{strconv.FormatInt(id, 10), sp.Str("omni.stage.name"), sp.Str("omni.stage.type")})
			}
			if sp.Name == "omni.transfer" {
				from, _ := sp.Int("omni.transfer.from_stage")
				to, _ := sp.Int("omni.transfer.to_stage")
				gotT = append(gotT, []string{strconv.FormatInt(from, 10), strconv.FormatInt(to, 10)})
			}
		}
		if fmt.Sprint(sortedRows(got)) != fmt.Sprint(sortedRows(stages)) || fmt.Sprint(sortedRows(gotT)) != fmt.Sprint(sortedRows(transfers)) {
			t.Errorf("a trace has stages %v and transfers %v; the diagram draws %v and %v", got, gotT, stages, transfers)
		}
		// The attributes a transfer's note names, and their values where
		// it gives one.
		for _, note := range transferNotes {
			for _, kv := range regexp.MustCompile(`(omni\.[\w.]*\w)(?: = (\w+))?`).FindAllStringSubmatch(note, -1) {
				for _, sp := range tr {
					v, ok := sp.Attrs[kv[1]]
					if sp.Name == "omni.transfer" && (!ok || kv[2] != "" && v.String() != kv[2]) {
						t.Errorf("a transfer has %s = %q; the diagram notes %s", kv[1], v.String(), kv[0])
					}
				}
			}
		}
	}
}

func sortedRows(rows [][]string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(r, ",")
	}
	slicesSort(out)
	return out
}
