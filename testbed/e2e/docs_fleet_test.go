// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	yaml "go.yaml.in/yaml/v3"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/testbed/internal/fleet"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// docs/fleet.md: its commands run in the clone, against the tier the page
// starts with the shipped files. The only changes to a command are the
// rewrites of addresses (the defaults may be held by other programs) and
// of the Badger folder under /var/lib (a test writes only to its own
// folders); the files' addresses are set through their OMNI_* variables,
// which the page lists as the way to move them.

const (
	fleetMakeKey    = "docs/fleet.md#a-fleet-the-collector-tier-tail-sampling-and-persistent-storage/1"
	fleetSampleKey  = "docs/fleet.md#running-it/4"
	fleetMetricsKey = "docs/fleet.md#metrics-that-count-every-request/1"
	fleetLayoutKey  = "docs/fleet.md#exemplars-prometheus-and-the-dashboard/1"
	fleetTopoKey    = "docs/fleet.md#topology/1"
)

// fleetBlock returns a block of docs/fleet.md by key.
func fleetBlock(t *testing.T, key string) docBlock {
	t.Helper()
	for _, b := range readBlocks(t, repoRoot(t), []string{"docs/fleet.md"}) {
		if b.key == key {
			return b
		}
	}
	t.Fatalf("no block %s", key)
	return docBlock{}
}

// startRewritten starts c with rw applied before the session's rewrites.
func (s *docSession) startRewritten(t *testing.T, rw []rewrite, c string, extra ...string) *docProc {
	t.Helper()
	saved := s.rewrites
	s.rewrites = append(append([]rewrite{}, rw...), saved...)
	defer func() { s.rewrites = saved }()
	return s.start(t, "", c, extra...)
}

// runRewritten runs c to its end with rw applied before the session's
// rewrites; a failed command fails t.
func (s *docSession) runRewritten(t *testing.T, rw []rewrite, c string, extra ...string) (stdout, stderr string) {
	t.Helper()
	p := s.startRewritten(t, rw, c, extra...)
	if err := p.wait(s.ctx); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", p.text, err, tail(p.out()), tail(p.errOut()))
	}
	return p.out(), p.errOut()
}

// ---------------------------------------------------------------------------
// make fleet, make fleet KEEP=1.

var (
	fleetServedRe  = regexp.MustCompile(`(?m)^served (\d+) requests in `)
	fleetRowRe     = regexp.MustCompile(`(?m)^ +(normal|slow|saturated|failing) +(\d+) +(\d+) +(\d+) +(\d+)$`)
	fleetBackendRe = regexp.MustCompile(`(?m)^backend: (\d+) traces; (\d+) not one whole request$`)
	fleetKeptRe    = regexp.MustCompile(`(?m)^collector: (\d+) traces, kept (\d+), dropped (\d+);`)
	fleetCountsRe  = regexp.MustCompile(`(?m)^metrics: the engines' gen_ai.server.request.duration counts (\d+) requests \(all\); span metrics count (\d+) request spans \(kept traces only\)$`)
	fleetExRe      = regexp.MustCompile(`(?m)^exemplars in Prometheus: (\d+) of otelomni's histograms, (\d+) naming a trace the backend holds whole$`)
	fleetMetricsRe = regexp.MustCompile(`(?m)^  metrics +(http://\S+/metrics) `)
	fleetDirRe     = regexp.MustCompile(`\(Badger in (\S+)\)`)
	fleetAllRe     = regexp.MustCompile(`(?m)^every kept trace:\n  (http://\S+)$`)
)

// fleetReport is what one `make fleet` printed, as counted.
type fleetReport struct {
	served, kept, engine, spans int
}

// checkFleetReport checks what `make fleet` prints: every failed, slow and
// saturated request kept whole, the backend holding the kept traces and
// nothing else, the engines counting every request and the span metrics
// the kept ones, and every exemplar leading to a kept trace.
func checkFleetReport(t *testing.T, c, out string) fleetReport {
	t.Helper()
	served, rows, backend, kept, counts, ex := fleetServedRe.FindStringSubmatch(out), fleetRowRe.FindAllStringSubmatch(out, -1),
		fleetBackendRe.FindStringSubmatch(out), fleetKeptRe.FindStringSubmatch(out), fleetCountsRe.FindStringSubmatch(out), fleetExRe.FindStringSubmatch(out)
	if served == nil || len(rows) != 4 || backend == nil || kept == nil || counts == nil || ex == nil {
		t.Fatalf("%s: not the report the page shows:\n%s", c, tail(out))
	}
	r := fleetReport{served: atoi(t, served[1]), kept: atoi(t, kept[2]), engine: atoi(t, counts[1]), spans: atoi(t, counts[2])}
	requests := 0
	for _, row := range rows {
		n, k, d, whole := atoi(t, row[2]), atoi(t, row[3]), atoi(t, row[4]), atoi(t, row[5])
		requests += n
		if k+d != n || whole != k {
			t.Errorf("%s: %s: %d requests, %d kept, %d dropped, %d kept complete", c, row[1], n, k, d, whole)
		}
		if row[1] != "normal" && (k != n || n == 0) {
			t.Errorf("%s: %s: %d of %d kept: every one must be", c, row[1], k, n)
		}
	}
	if requests != r.served || atoi(t, kept[1]) != r.served {
		t.Errorf("%s: served %d, the table counts %d, the collector %s traces", c, r.served, requests, kept[1])
	}
	if atoi(t, backend[1]) != r.kept || backend[2] != "0" {
		t.Errorf("%s: the collector kept %d, the backend holds %s traces, %s not one whole request", c, r.kept, backend[1], backend[2])
	}
	if r.engine != r.served || r.spans != r.kept {
		t.Errorf("%s: the engines count %d of %d requests, the span metrics %d of %d kept", c, r.engine, r.served, r.spans, r.kept)
	}
	if ex[1] == "0" || ex[1] != ex[2] {
		t.Errorf("%s: %s exemplars, %s naming a kept trace", c, ex[1], ex[2])
	}
	return r
}

// runMakeFleet: `make fleet` exits 0, prints the report the page shows
// (the page's sample output, line for line but for the numbers, ids and
// ports), and that report holds: see checkFleetReport.
func runMakeFleet(t *testing.T, s *docSession, c string) {
	out, _ := s.run(t, c)
	checkFleetReport(t, c, out)
	matchSample(t, c, fleetBlock(t, fleetSampleKey).text, out)
}

// runMakeFleetKeep: `make fleet KEEP=1` prints the same, then leaves the
// tier running: the URLs it printed answer (every kept trace; the metrics
// that the page's metrics sample shows), and an interrupt stops all of it
// and removes its folder.
func runMakeFleetKeep(t *testing.T, s *docSession, c string) {
	p := s.start(t, "", c)
	p.waitFor(t, s.ctx, "interrupt to stop")
	out := p.out()
	r := checkFleetReport(t, c, out)
	all, metrics, dir := fleetAllRe.FindStringSubmatch(out), fleetMetricsRe.FindStringSubmatch(out), fleetDirRe.FindStringSubmatch(out)
	if all == nil || metrics == nil || dir == nil {
		t.Fatalf("%s: no URLs or folder printed:\n%s", c, tail(out))
	}
	t.Run("every kept trace", func(t *testing.T) {
		ss := getOTLPJSON(t, s.ctx, all[1])
		if n := len(jaeger.RequestTraces(traceview.ByTrace(ss))); n != r.kept {
			t.Errorf("%s: %d request traces, want the %d kept", all[1], n, r.kept)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		m, err := fleet.Scrape(s.ctx, metrics[1])
		if err != nil {
			t.Fatal(err)
		}
		checkMetricsSample(t, fleetBlock(t, fleetMetricsKey).text, m, r)
	})
	// An interrupt, as Ctrl-C in the reader's terminal sends it to make
	// and what make runs: make itself ends on the signal; the tier stops
	// and its folder goes.
	p.signal(interrupt)
	if err := p.wait(s.ctx); err != nil {
		t.Logf("after the interrupt: %v", err)
	}
	for {
		if _, err := os.Stat(dir[1]); os.IsNotExist(err) {
			break
		}
		select {
		case <-s.ctx.Done():
			t.Fatalf("%s: its folder %s is left after an interrupt\n%s", c, dir[1], tail(p.errOut()))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if groupAlive(p) {
		t.Errorf("%s: processes of it still run after an interrupt", c)
	}
}

// groupAlive reports whether any process of the command's process group
// runs (a zombie has ended): bash, or a job it left in the background.
func groupAlive(p *docProc) bool {
	// While bash runs, the group does. Once it has ended, every job it
	// started is in /proc before the listing is read.
	select {
	case <-p.done:
	default:
		return true
	}
	pgid := strconv.Itoa(p.cmd.Process.Pid)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-p.cmd.Process.Pid, 0) == nil
	}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		_, rest, _ := strings.Cut(string(b), ") ")
		if f := strings.Fields(rest); len(f) > 2 && f[2] == pgid && f[0] != "Z" {
			return true
		}
	}
	return false
}

// getOTLPJSON reads the spans of a query API URL.
func getOTLPJSON(t *testing.T, ctx context.Context, u string) []traceview.Span {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Result) == 0 {
		t.Fatalf("%s: %s, not a result of the query API (%v)", u, resp.Status, err)
	}
	ss, err := readOTLPJSON(strings.NewReader(string(body.Result)))
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// samplePattern makes a line of a sample output into a pattern of what it
// stands for: any number where it shows one, any trace id where it shows
// one, any run of spaces where it aligns columns, anything where it shows
// "...".
func samplePattern(line string) *regexp.Regexp {
	tok := regexp.MustCompile(`\.\.\.|[0-9a-f]{32}|\d[\d,.]*\d|\d| +`)
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range tok.FindAllStringIndex(line, -1) {
		b.WriteString(regexp.QuoteMeta(line[last:m[0]]))
		switch s := line[m[0]:m[1]]; {
		case s == "...":
			b.WriteString(".*")
		case len(s) == 32 && strings.Trim(s, "0123456789abcdef") == "":
			b.WriteString("[0-9a-f]{32}")
		case strings.Trim(s, " ") == "":
			b.WriteString(" +")
		default:
			b.WriteString(`\d[\d,.]*`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]) + "$")
	return regexp.MustCompile(b.String())
}

// matchSample checks output against a sample of it, from the sample's first
// line on: each line of the sample stands for one line of the output, in
// order, but a line that is only "..." stands for any lines up to the one
// the next sample line matches.
func matchSample(t *testing.T, c, sample, out string) {
	t.Helper()
	want := strings.Split(strings.TrimRight(sample, "\n"), "\n")
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	first := samplePattern(want[0])
	i := 0
	for i < len(got) && !first.MatchString(got[i]) {
		i++
	}
	if i == len(got) {
		t.Fatalf("%s: no line like the sample's first, %q:\n%s", c, want[0], tail(out))
	}
	for j := 0; j < len(want); j++ {
		if strings.TrimSpace(want[j]) == "..." {
			next := (*regexp.Regexp)(nil)
			if j+1 < len(want) {
				next = samplePattern(want[j+1])
			}
			for i < len(got) && (next == nil || !next.MatchString(got[i])) {
				i++
			}
			continue
		}
		if i >= len(got) {
			t.Errorf("%s: the output ends before the sample's line %q", c, want[j])
			return
		}
		if !samplePattern(want[j]).MatchString(got[i]) {
			t.Errorf("%s: the sample shows\n  %q\nwhere the output prints\n  %q", c, want[j], got[i])
			return
		}
		i++
	}
	if i < len(got) {
		t.Errorf("%s: the output goes on after the sample's last line: %q", c, got[i])
	}
}

var (
	sampleSeriesRe = regexp.MustCompile(`^([a-z_]+)\{([^}]*)\} (\d+)(?:   \(x(\d+) series: (\d+) failed\))?$`)
	sampleLabelRe  = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)
)

// checkMetricsSample checks the page's sample of the collector's Prometheus
// endpoint. Within itself: its series add up to the counts of its first
// line (a "(xN series: M failed)" line stands for N such series adding up to
// M). Against a live endpoint m of a run that counted r: every series it
// shows exists there with the labels it shows, and the engines' series count
// every request while the span metrics count the kept request spans.
func checkMetricsSample(t *testing.T, sample string, m fleet.Metrics, r fleetReport) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(sample), "\n")
	counts := fleetCountsRe.FindStringSubmatch(lines[0])
	if counts == nil {
		t.Fatalf("the sample's first line is not the report's metrics line: %q", lines[0])
	}
	engine := fleet.PromSeconds("gen_ai.server.request.duration") + "_count"
	sums := map[string]int{}
	// Series whose value does not depend on the baseline's share (every
	// engine series; the failed requests' span metrics): how many the
	// sample shows of each labels and value.
	type series struct {
		name, labels string
		value        float64
	}
	exact := map[series]int{}
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		sm := sampleSeriesRe.FindStringSubmatch(l)
		if sm == nil {
			t.Errorf("not a series of the sample: %q", l)
			continue
		}
		n := atoi(t, sm[3])
		times := 1
		if sm[4] != "" {
			times = atoi(t, sm[4])
			if atoi(t, sm[4])*n != atoi(t, sm[5]) {
				t.Errorf("%q: %s series of %d are not %s", l, sm[4], n, sm[5])
			}
			n = atoi(t, sm[5])
		}
		sums[sm[1]] += n
		want := map[string]string{}
		for _, kv := range sampleLabelRe.FindAllStringSubmatch(sm[2], -1) {
			want[kv[1]] = kv[2]
		}
		if m.Sum(sm[1], want) == 0 {
			t.Errorf("%q: no such series on the collector's endpoint", l)
		}
		if sm[1] == engine || want["error_type"] != "" {
			exact[series{sm[1], sm[2], float64(atoi(t, sm[3]))}] += times
		}
	}
	for se, n := range exact {
		want := map[string]string{}
		for _, kv := range sampleLabelRe.FindAllStringSubmatch(se.labels, -1) {
			want[kv[1]] = kv[2]
		}
		got := 0
		for _, x := range m {
			if x.Name == se.name && x.Value == se.value && hasLabels(x.Labels, want) {
				got++
			}
		}
		if got != n {
			t.Errorf("the sample shows %d series %s{%s} %v; the endpoint has %d", n, se.name, se.labels, se.value, got)
		}
	}
	if sums[engine] != atoi(t, counts[1]) || sums["traces_span_metrics_calls_total"] != atoi(t, counts[2]) {
		t.Errorf("the sample's series add up to %d engine-counted requests and %d request spans; its first line says %s and %s",
			sums[engine], sums["traces_span_metrics_calls_total"], counts[1], counts[2])
	}
	gateway := map[string]string{"job": "omni"}
	if n := int(m.Sum(engine, gateway)); n != r.served {
		t.Errorf("%s of the gateway: %d, want every one of the %d requests", engine, n, r.served)
	}
	if n := int(m.Sum("traces_span_metrics_calls_total", map[string]string{"span_name": spans.RequestSpanName})); n != r.kept {
		t.Errorf("span metrics: %d request spans, want the %d kept", n, r.kept)
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Running it: the backend and the collector from the shipped files, and
// the multi-stage example through them.

// docTier is the tier the page's commands started, and where it listens.
type docTier struct {
	backend, collector *docProc
	env                []string
	backendQuery       string
	collectorHTTP      string
	telemetry          string
	from               time.Time
}

func (s *docSession) tier(t *testing.T) *docTier {
	t.Helper()
	if s.state["tier"] == nil {
		addr := func() string { return "127.0.0.1:" + freePort(t) }
		d := &docTier{backendQuery: addr(), collectorHTTP: addr(), telemetry: freePort(t)}
		grpc := addr()
		d.env = []string{
			"OMNI_BACKEND_OTLP_GRPC=" + grpc, "OMNI_BACKEND_OTLP=" + grpc,
			"OMNI_BACKEND_OTLP_HTTP=" + addr(), "OMNI_BACKEND_QUERY=" + d.backendQuery,
			"OMNI_BACKEND_QUERY_GRPC=" + addr(), "OMNI_BACKEND_HEALTH=" + addr(),
			"OMNI_COLLECTOR_OTLP_GRPC=" + addr(), "OMNI_COLLECTOR_OTLP_HTTP=" + d.collectorHTTP,
			"OMNI_COLLECTOR_HEALTH=" + addr(), "OMNI_COLLECTOR_PROMETHEUS=" + addr(),
			"OMNI_COLLECTOR_TELEMETRY_HOST=127.0.0.1", "OMNI_COLLECTOR_TELEMETRY_PORT=" + d.telemetry,
		}
		s.state["tier"] = d
	}
	return s.state["tier"].(*docTier)
}

// rewrites are the tier's addresses in place of the defaults a command
// shows.
func (d *docTier) rewrites(t *testing.T) []rewrite {
	return []rewrite{
		{"/var/lib/otelomni/badger", filepath.Join(t.TempDir(), "badger")},
		{"http://127.0.0.1:4318", "http://" + d.collectorHTTP},
		{"127.0.0.1:8888", "127.0.0.1:" + d.telemetry},
	}
}

// waitHealthy waits for a health check to answer 200; it returns an error
// if the command's processes end first.
func waitHealthy(ctx context.Context, p *docProc, url string) error {
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !groupAlive(p) {
			<-p.done // bash has ended too: its status is there
			return fmt.Errorf("ended (%v) before %s answered", p.err, url)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not answer by the test's deadline", url)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func envValue(env []string, k string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// runMakeBins: both binaries are there, built or already up to date.
func runMakeBins(t *testing.T, s *docSession, c string) {
	s.run(t, c)
	for _, b := range []string{"jaeger", "otelcol"} {
		if _, err := os.Stat(filepath.Join(s.ws.clone, "tools", "bin", b)); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}

// runBackend starts the backend in the background and waits until it is
// healthy.
func runBackend(t *testing.T, s *docSession, c string) {
	d := s.tier(t)
	d.backend = startHealthy(t, s, d, c, "OMNI_BACKEND_HEALTH",
		"OMNI_BACKEND_OTLP_GRPC", "OMNI_BACKEND_OTLP_HTTP", "OMNI_BACKEND_QUERY", "OMNI_BACKEND_QUERY_GRPC")
}

// startHealthy starts a command of the tier and waits until its health
// check (the address in variable health) answers. A port can be taken
// between choosing it and binding it: when the command ends first, it is
// started again, up to twice, with the addresses in health and ports moved
// to new free ports.
func startHealthy(t *testing.T, s *docSession, d *docTier, c, health string, ports ...string) *docProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := s.startRewritten(t, d.rewrites(t), c, d.env...)
		err := waitHealthy(s.ctx, p, "http://"+envValue(d.env, health)+"/status")
		if err == nil {
			return p
		}
		if attempt == 3 || s.ctx.Err() != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", p.text, err, tail(p.out()), tail(p.errOut()))
		}
		t.Logf("%s: %v; again on other ports\n%s", p.text, err, tail(p.out()+p.errOut()))
		for _, k := range append([]string{health}, ports...) {
			d.set(k, "127.0.0.1:"+freePort(t))
		}
	}
}

// set gives variable k the value v in the tier's environment, and keeps
// the addresses the tier reads from it in step.
func (d *docTier) set(k, v string) {
	for i, kv := range d.env {
		if strings.HasPrefix(kv, k+"=") {
			d.env[i] = k + "=" + v
		}
	}
	switch k {
	case "OMNI_BACKEND_OTLP_GRPC":
		d.set("OMNI_BACKEND_OTLP", v)
	case "OMNI_BACKEND_QUERY":
		d.backendQuery = v
	case "OMNI_COLLECTOR_OTLP_HTTP":
		d.collectorHTTP = v
	}
}

// runCollector starts the collector in the background and waits until it
// is healthy.
func runCollector(t *testing.T, s *docSession, c string) {
	d := s.tier(t)
	d.collector = startHealthy(t, s, d, c, "OMNI_COLLECTOR_HEALTH",
		"OMNI_COLLECTOR_OTLP_GRPC", "OMNI_COLLECTOR_OTLP_HTTP", "OMNI_COLLECTOR_PROMETHEUS")
}

// runFleetExample runs the example through the tier: it ends clean; the
// collector decides every request; the backend holds exactly the kept
// traces, each one whole request; every failed and every saturated request
// of its mix is among them (its slow ones are under the shipped slow
// thresholds, so only the baseline share keeps those).
func runFleetExample(t *testing.T, s *docSession, c string) {
	d := s.tier(t)
	if d.collector == nil {
		t.Fatal("no collector started (the command before did not run)")
	}
	d.from = time.Now().Add(-time.Second)
	out, errOut := s.runRewritten(t, d.rewrites(t), c, d.env...)
	noErrorLines(t, c, out+errOut)
	served := regexp.MustCompile(`(?m)^served (\d+) requests \(0 failed\)$`).FindStringSubmatch(out)
	if served == nil {
		t.Fatalf("%s: no `served N requests (0 failed)`:\n%s", c, tail(out))
	}
	n := atoi(t, served[1])
	if want := atoi(t, flagIn(c, "-requests")); n != want {
		t.Fatalf("%s: served %d requests", c, n)
	}
	mix, err := pipeline.ParseMix(flagIn(c, "-mix"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[pipeline.Special]int{}
	for i := range n {
		_, sp := mix.Plan(i)
		want[sp]++
	}
	col := &fleet.Collector{Telemetry: "127.0.0.1:" + d.telemetry}
	tally, err := col.WaitDecided(s.ctx, n, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if tally.NewTraces != n || tally.TooEarly != 0 {
		t.Errorf("the collector saw %d traces for %d requests, evicted %d before their decision", tally.NewTraces, n, tally.TooEarly)
	}
	if tally.Matched["error"] != want[pipeline.Failing] || tally.Matched["saturated"] != want[pipeline.Saturated] {
		t.Errorf("policies matched %v; the mix has %d failing and %d saturated requests", tally.Matched, want[pipeline.Failing], want[pipeline.Saturated])
	}
	// "under the shipped ones (20 s, 15 s) such a request is not slow"
	file, err := os.ReadFile(filepath.Join(repoRoot(t), fleet.CollectorConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"slow-audio", "slow-image"} {
		if !strings.Contains(string(file), "name: "+name+"\n") {
			t.Fatalf("the shipped file has no policy %s", name)
		}
	}
	if n := tally.Matched["slow-audio"] + tally.Matched["slow-image"]; n != 0 {
		t.Errorf("the slow policies kept %d of the example's %d slow requests at the shipped thresholds", n, want[pipeline.Slow])
	}
	backend := &jaeger.Jaeger{Query: d.backendQuery}
	// The example's gateway, when no OTEL_SERVICE_NAME names it.
	traces, err := backend.WaitTraces(s.ctx, "omni-gateway", d.from, time.Now().Add(time.Minute), tally.Kept, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != tally.Kept {
		t.Errorf("the backend holds %d request traces, the collector kept %d", len(traces), tally.Kept)
	}
	failed, saturated := 0, 0
	for id, tr := range traces {
		roots, problems := traceview.Trees(tr)
		if len(roots) != 1 || roots[0].Span.Name != spans.RequestSpanName || len(problems) > 0 {
			t.Errorf("trace %s: %d roots, problems %v: not one whole request", id, len(roots), problems)
			continue
		}
		if roots[0].Span.StatusCode == codes.Error {
			failed++
		}
		for _, sp := range tr {
			if (sp.Name == "omni.llm.queue" || sp.Name == spans.QueueWait.SpanName()) && sp.End.Sub(sp.Start) > 2*time.Second {
				saturated++
				break
			}
		}
	}
	if failed != want[pipeline.Failing] || saturated != want[pipeline.Saturated] {
		t.Errorf("the backend holds %d failed and %d saturated requests, whole; the mix has %d and %d", failed, saturated, want[pipeline.Failing], want[pipeline.Saturated])
	}
}

var collectorMetricRe = regexp.MustCompile(`^otelcol_processor_tail_sampling_([a-z_]+?)(?:_total)?(?:\{[^}]*\})? ([0-9.e+]+)$`)

// runDecisionMetrics runs the page's curl of the collector's own metrics
// after the example's requests were decided: it prints only the metrics it
// names; every trace was decided, none is held, none evicted; and the mean
// time to a decision is at least the decision wait less the tick.
func runDecisionMetrics(t *testing.T, s *docSession, c string) {
	d := s.tier(t)
	if d.collector == nil || d.from.IsZero() {
		t.Fatal("no tier ran the example (the blocks before did not run)")
	}
	out, _ := s.runRewritten(t, d.rewrites(t), c)
	got := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		m := collectorMetricRe.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s printed %q", firstLine(c), l)
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		got[m[1]] += v
	}
	for _, name := range []string{"sampling_traces_on_memory", "sampling_trace_removal_age_sum", "sampling_trace_removal_age_count", "new_trace_id_received"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: no %s", firstLine(c), name)
		}
	}
	if got["sampling_traces_on_memory"] != 0 || got["sampling_trace_dropped_too_early"] != 0 {
		t.Errorf("after every decision: %v traces held, %v evicted", got["sampling_traces_on_memory"], got["sampling_trace_dropped_too_early"])
	}
	// A trace is decided no sooner than the decision wait after its root,
	// which arrives after its first span: the ages (whole seconds) are at
	// least the wait.
	if n := got["sampling_trace_removal_age_count"]; n == 0 || got["sampling_trace_removal_age_sum"]/n < 10 {
		t.Errorf("mean time to a decision %v s over %v traces: under the 10 s decision wait", got["sampling_trace_removal_age_sum"]/n, n)
	}
	if got["new_trace_id_received"] != got["sampling_trace_removal_age_count"] {
		t.Errorf("%v traces seen, %v decided", got["new_trace_id_received"], got["sampling_trace_removal_age_count"])
	}
	d.backend.stop()
	d.collector.stop()
}

// ---------------------------------------------------------------------------
// Sizing: `make sizing`, and the idle collector whose timer grows.

var sizingRe = regexp.MustCompile(`(?m)^decision cache: (\d+) entries hold [\d.]+ MiB: (\d+) bytes per entry\ndecision timer: (\d+) seconds of (\d+) new traces/s hold [\d.]+ MiB: ([\d.]+) bytes per trace per second of decision_wait$`)

// runMakeSizing: both measured costs are within what the rule counts.
func runMakeSizing(t *testing.T, s *docSession, c string) {
	out, _ := s.run(t, c)
	m := sizingRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: not the two measures the page quotes:\n%s", c, tail(out))
	}
	if perEntry := atoi(t, m[2]); perEntry > 120 {
		t.Errorf("%s: %d bytes per cache entry, over the rule's 120", c, perEntry)
	}
	if perSlot, _ := strconv.ParseFloat(m[5], 64); perSlot > 40 {
		t.Errorf("%s: %v bytes per trace per second, over the rule's 40", c, perSlot)
	}
}

// idleCollector is the collector the sizing block leaves in the background.
type idleCollector struct {
	p         *docProc
	telemetry string
	heap      []float64
}

// runIdleCollector starts it, on the page's settings, on free ports.
func runIdleCollector(t *testing.T, s *docSession, c string) {
	d := s.tier(t)
	ic := &idleCollector{telemetry: freePort(t)}
	env := append([]string{}, d.env...)
	env = append(env, "OMNI_COLLECTOR_TELEMETRY_PORT="+ic.telemetry)
	env = append(env, "OMNI_COLLECTOR_OTLP_GRPC=127.0.0.1:"+freePort(t), "OMNI_COLLECTOR_OTLP_HTTP=127.0.0.1:"+freePort(t),
		"OMNI_COLLECTOR_HEALTH=127.0.0.1:"+freePort(t), "OMNI_COLLECTOR_PROMETHEUS=127.0.0.1:"+freePort(t))
	log := filepath.Join(t.TempDir(), "otelcol.log")
	ic.p = s.startRewritten(t, []rewrite{{"/tmp/otelcol.log", log}}, c, env...)
	s.state["idle"] = ic
}

// runHeapCurl runs one `sleep N; curl ... | grep heap` of the block and
// keeps the heap it printed. After the second: the heap grew by at least a
// third of what 60 seconds of decision-timer sets at the page's
// OMNI_EXPECTED_TRACES_PER_SEC take at 16 bytes a trace id (each second
// makes one set of that size, however busy the machine; the page measures
// 24 bytes).
func runHeapCurl(t *testing.T, s *docSession, c string) {
	ic, ok := s.state["idle"].(*idleCollector)
	if !ok {
		t.Fatal("no collector started by the block")
	}
	out, _ := s.runRewritten(t, []rewrite{{"127.0.0.1:8888", "127.0.0.1:" + ic.telemetry}}, c)
	m := regexp.MustCompile(`(?m)^otelcol_process_runtime_heap_alloc_bytes(?:\{[^}]*\})? ([0-9.e+]+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no heap printed:\n%s\n%s", c, out, tail(ic.p.errOut()))
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	ic.heap = append(ic.heap, v)
	if len(ic.heap) == 2 {
		block := fleetBlock(t, "docs/fleet.md#sizing/3").text
		rate := atoi(t, envIn(block, "OMNI_EXPECTED_TRACES_PER_SEC"))
		if grew, want := ic.heap[1]-ic.heap[0], float64(60*rate*16)/3; grew < want {
			t.Errorf("the idle collector's heap grew %.1f MB in 60 s (%.1f to %.1f), under %.1f MB", grew/1e6, ic.heap[0]/1e6, ic.heap[1]/1e6, want/1e6)
		} else {
			t.Logf("heap %.1f MB, then %.1f MB", ic.heap[0]/1e6, ic.heap[1]/1e6)
		}
	}
}

// runKillJob: `kill %1` in the reader's shell ends the job the block left
// in the background: the same signal (SIGTERM) to it; the collector then
// shuts down clean.
func runKillJob(t *testing.T, s *docSession, c string) {
	ic, ok := s.state["idle"].(*idleCollector)
	if !ok {
		t.Fatal("no collector started by the block")
	}
	ic.p.signal(15)
	if err := ic.p.wait(s.ctx); err != nil {
		t.Errorf("%s: the collector ended with %v\n%s", c, err, tail(ic.p.errOut()))
	}
	delete(s.state, "idle")
}

// ---------------------------------------------------------------------------
// Blocks that are read, not run.

// pipelineLabel is a pipeline's name as the topology draws it: its signal,
// maybe a name after a slash, and a colon.
var pipelineLabel = regexp.MustCompile(`\b((?:traces|metrics|logs)(?:/[a-z_]+)?):`)

// TestFleetTopologyIsTheShippedPipelines: the topology diagram of
// docs/fleet.md shows the pipelines of deploy/collector.yaml, each with
// its receivers, processors in order and exporters.
func TestFleetTopologyIsTheShippedPipelines(t *testing.T) {
	diagram := fleetBlock(t, fleetTopoKey).text
	b, err := os.ReadFile(filepath.Join(repoRoot(t), fleet.CollectorConfig))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Service struct {
			Pipelines map[string]struct{ Receivers, Processors, Exporters []string }
		}
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	pipes := cfg.Service.Pipelines
	var names []string
	for name, p := range pipes {
		names = append(names, name)
		chain := append(append(append([]string{}, p.Receivers...), p.Processors...), p.Exporters...)
		at := strings.Index(diagram, name+":")
		if at < 0 {
			t.Errorf("pipeline %s is not in the diagram", name)
			continue
		}
		// The chain is drawn from the pipeline's name on, in order, up to
		// the next pipeline's name; a fan-out continues on the next lines.
		rest := diagram[at+len(name)+1:]
		if next := pipelineLabel.FindStringIndex(rest); next != nil {
			rest = rest[:next[0]]
		}
		for _, part := range chain {
			i := strings.Index(rest, part)
			if i < 0 {
				t.Errorf("pipeline %s: %s is not drawn after %v", name, part, chain)
				break
			}
			rest = rest[i+len(part):]
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("no pipelines in the shipped file")
	}
	for _, m := range pipelineLabel.FindAllStringSubmatch(diagram, -1) {
		if _, ok := pipes[m[1]]; !ok {
			t.Errorf("the diagram draws pipeline %s, which the file does not have (%v)", m[1], names)
		}
	}
}

// TestFleetDashboardLayoutIsTheShippedFile: the layout docs/fleet.md draws
// is deploy/grafana/otelomni-fleet.json's: each panel's title in its row,
// left to right, and the variables.
func TestFleetDashboardLayoutIsTheShippedFile(t *testing.T) {
	layout := fleetBlock(t, fleetLayoutKey).text
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", "otelomni-fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			GridPos struct{ X, Y int }
		}
		Templating struct{ List []struct{ Name string } }
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	// The drawing's rows, each the text of its cells left to right.
	var rows [][]string
	var cells []string
	for _, l := range strings.Split(layout, "\n") {
		switch {
		case strings.HasPrefix(l, "+"):
			if cells != nil {
				rows = append(rows, cells)
			}
			cells = nil
		case strings.HasPrefix(l, "|"):
			parts := strings.Split(strings.Trim(l, "|"), "|")
			if cells == nil {
				cells = make([]string, len(parts))
			}
			for i, p := range parts {
				if i < len(cells) {
					cells[i] = strings.TrimSpace(cells[i] + " " + strings.TrimSpace(p))
				}
			}
		}
	}
	sort.SliceStable(dash.Panels, func(i, j int) bool {
		if dash.Panels[i].GridPos.Y != dash.Panels[j].GridPos.Y {
			return dash.Panels[i].GridPos.Y < dash.Panels[j].GridPos.Y
		}
		return dash.Panels[i].GridPos.X < dash.Panels[j].GridPos.X
	})
	var drawn, file []string
	for _, r := range rows {
		drawn = append(drawn, r...)
	}
	y, row := -1, -1
	for _, p := range dash.Panels {
		if p.GridPos.Y != y {
			y, row = p.GridPos.Y, row+1
		}
		file = append(file, fmt.Sprintf("row %d: %s", row, p.Title))
	}
	if len(drawn) != len(dash.Panels) {
		t.Fatalf("the drawing has %d panels %q, the file %d %q", len(drawn), drawn, len(dash.Panels), file)
	}
	i := 0
	for r, cells := range rows {
		for _, cell := range cells {
			p := dash.Panels[i]
			// A cell shows the panel's title, then what it adds.
			if !strings.HasPrefix(normalSpace(cell), normalSpace(p.Title)) || !strings.HasPrefix(file[i], fmt.Sprintf("row %d:", r)) {
				t.Errorf("drawn in row %d: %q; the file's panel there is %s", r, cell, file[i])
			}
			i++
		}
	}
	vars := regexp.MustCompile(`\$([a-z_]+)`).FindAllStringSubmatch(layout[strings.Index(layout, "variables:"):], -1)
	var drawnVars, fileVars []string
	for _, v := range vars {
		drawnVars = append(drawnVars, v[1])
	}
	for _, v := range dash.Templating.List {
		fileVars = append(fileVars, v.Name)
	}
	if strings.Join(drawnVars, ",") != strings.Join(fileVars, ",") {
		t.Errorf("variables drawn %v, in the file %v", drawnVars, fileVars)
	}
}

func normalSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestFleetPageTablesAreTheShippedFiles: docs/fleet.md's environment
// tables list exactly the variables each shipped file reads, with the
// file's defaults; its tests table lists exactly the tests that
// `go test ./e2e -run Fleet` runs.
func TestFleetPageTablesAreTheShippedFiles(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	section := func(from, to string) string {
		i := strings.Index(page, from)
		if i < 0 {
			t.Fatalf("docs/fleet.md: no %q", from)
		}
		rest := page[i+len(from):]
		if j := strings.Index(rest, to); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\| ([^|]*) \\|")
	for _, f := range []struct{ file, from, to string }{
		{"deploy/collector.yaml", "Collector (`deploy/collector.yaml`):", "Backend (`deploy/backend.yaml`):"},
		{"deploy/backend.yaml", "Backend (`deploy/backend.yaml`):", "\n## "},
	} {
		y, err := os.ReadFile(filepath.Join(root, f.file))
		if err != nil {
			t.Fatal(err)
		}
		inFile := map[string]string{}
		for _, m := range regexp.MustCompile(`\$\{env:([A-Z_]+):-([^}]*)\}`).FindAllStringSubmatch(string(y), -1) {
			if d, ok := inFile[m[1]]; ok && d != m[2] {
				t.Errorf("%s: %s has two defaults, %q and %q", f.file, m[1], d, m[2])
			}
			inFile[m[1]] = m[2]
		}
		inPage := map[string]string{}
		sec := section(f.from, f.to)
		for _, m := range row.FindAllStringSubmatch(sec, -1) {
			inPage[m[1]] = strings.Trim(strings.TrimSpace(m[2]), "`")
		}
		// Every row naming a variable is one the pattern read.
		if rows := regexp.MustCompile("(?m)^\\s*\\| `?OMNI_").FindAllString(sec, -1); len(rows) != len(inPage) {
			t.Errorf("%s: the page's table has %d rows naming a variable, %d of them read as | `NAME` | default |", f.file, len(rows), len(inPage))
		}
		if len(inFile) == 0 {
			t.Fatalf("%s reads no variable", f.file)
		}
		for k, d := range inFile {
			if pd, ok := inPage[k]; !ok {
				t.Errorf("%s reads %s (default %q); the page's table does not list it", f.file, k, d)
			} else if pd != d {
				t.Errorf("%s: the page gives %s the default %q, the file %q", f.file, k, pd, d)
			}
		}
		for k := range inPage {
			if _, ok := inFile[k]; !ok {
				t.Errorf("the page lists %s for %s, which does not read it", k, f.file)
			}
		}
	}

	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(Test\\w+)` \\|").FindAllStringSubmatch(section("## The tests", "\n## "), -1) {
		listed[m[1]] = true
	}
	files, err := filepath.Glob(filepath.Join(root, "testbed", "e2e", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	run := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^func (Test\w*Fleet\w*)\(t \*testing\.T\)`).FindAllStringSubmatch(string(src), -1) {
			run[m[1]] = true
		}
	}
	for name := range run {
		if !listed[name] {
			t.Errorf("-run Fleet runs %s; the page's tests table does not list it", name)
		}
	}
	for name := range listed {
		if !run[name] {
			t.Errorf("the page's tests table lists %s, which -run Fleet does not run", name)
		}
	}
}

// TestFleetSampleOutputHolds: the `make fleet` output the page shows holds
// what the command checks of its own output: every failed, slow and
// saturated request kept whole, the counts adding up.
func TestFleetSampleOutputHolds(t *testing.T) {
	checkFleetReport(t, "the page's sample of make fleet", fleetBlock(t, fleetSampleKey).text)
}
