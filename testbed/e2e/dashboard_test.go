// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/testbed/internal/fleet"
	"github.com/otelomni/otelomni/testbed/internal/jaeger"
)

// dashboard is what the test reads of deploy/grafana/otelomni-fleet.json.
type dashboard struct {
	Templating struct {
		List []dashVariable `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

// dashVariable is one template variable.
type dashVariable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      string `json:"query"`
	Regex      string `json:"regex"`
	Multi      bool   `json:"multi"`
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
}

// dashboardPanel is one panel and its queries.
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr         string `json:"expr"`
		Exemplar     bool   `json:"exemplar"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	root, err := jaeger.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/grafana/otelomni-fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// varChoice is one choice of a variable: what the picker shows, what
// Grafana puts in a query for it, and the values it stands for (nil for
// All).
type varChoice struct {
	text, value string
	values      []string
}

// Grafana's Prometheus data source escapes a variable's value for the
// query it goes into: a variable that is neither multi-valued nor has All
// has its backslashes doubled and single quotes escaped; a value of one
// that is has, besides, every regular expression metacharacter escaped,
// and several values become (a|b).
var regexMeta = regexp.MustCompile(`[$^*{}\[\]+?.()|]`)

func promRegularEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\\'`)
}

func promRegexEscape(s string) string {
	return regexMeta.ReplaceAllString(strings.ReplaceAll(s, `\`, `\\\\`), `\\$0`)
}

// labelValuesQuery reads label_values(match, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// options lists a variable's values as Grafana does: a custom variable's
// from its list, a query variable's from Prometheus over the dashboard's
// time range, kept by its regex.
func (v dashVariable) options(ctx context.Context, t *testing.T, prom *fleet.Prometheus, from, to time.Time) []string {
	t.Helper()
	var vals []string
	switch v.Type {
	case "custom":
		for _, o := range strings.Split(v.Query, ",") {
			if _, val, ok := strings.Cut(o, " : "); ok {
				o = val
			}
			vals = append(vals, strings.TrimSpace(o))
		}
	case "query":
		m := labelValuesQuery.FindStringSubmatch(v.Query)
		if m == nil {
			t.Fatalf("variable %s: a query the test does not read: %s", v.Name, v.Query)
		}
		var err error
		if vals, err = prom.LabelValues(ctx, m[2], m[1], from, to); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
	default:
		t.Fatalf("variable %s: type %s", v.Name, v.Type)
	}
	if v.Regex != "" {
		body := strings.TrimPrefix(v.Regex, "/")
		body = body[:strings.LastIndex(body, "/")]
		re := regexp.MustCompile(body)
		vals = slices.DeleteFunc(vals, func(s string) bool { return !re.MatchString(s) })
	}
	return vals
}

// choices are every choice of the variable: All, each value alone, and
// every value at once.
func (v dashVariable) choices(opts []string) []varChoice {
	var out []varChoice
	if v.IncludeAll {
		all := v.AllValue // a custom All value goes in as it is
		if all == "" {
			all = v.format(opts)
		}
		out = append(out, varChoice{text: "All", value: all})
	}
	for _, o := range opts {
		out = append(out, varChoice{text: o, value: v.format([]string{o}), values: []string{o}})
	}
	if v.Multi && len(opts) > 1 {
		out = append(out, varChoice{text: strings.Join(opts, " + "), value: v.format(opts), values: opts})
	}
	return out
}

func (v dashVariable) format(vals []string) string {
	if !v.Multi && !v.IncludeAll {
		return promRegularEscape(vals[0])
	}
	esc := make([]string, len(vals))
	for i, s := range vals {
		esc[i] = promRegexEscape(s)
	}
	if len(esc) == 1 {
		return esc[0]
	}
	return "(" + strings.Join(esc, "|") + ")"
}

// chosen says the choice takes in value ("" for a series without the
// label, which only All takes in).
func (c varChoice) chosen(value string) bool {
	if c.values == nil {
		return true
	}
	return slices.Contains(c.values, value)
}

// The settings Grafana gives a panel over a dashboard's range: the data
// source's default scrape interval (15 s) makes $__interval 15 s and
// $__rate_interval max($__interval + 15 s, 4 x 15 s).
const (
	rateInterval = "1m"
	dashStep     = 5 * time.Second
)

// substitute fills a query as Grafana does for one choice of each variable.
func substitute(expr string, rng time.Duration, ch map[string]varChoice) string {
	r := []string{"$__rate_interval", rateInterval, "$__range", fmt.Sprintf("%ds", int(math.Ceil(rng.Seconds()))), "$__interval", "15s"}
	names := make([]string, 0, len(ch))
	for n := range ch {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		r = append(r, "${"+n+"}", ch[n].value, "$"+n, ch[n].value)
	}
	return strings.NewReplacer(r...).Replace(expr)
}

// usedVars are the variables expr names.
func usedVars(expr string, vars []dashVariable) []dashVariable {
	var out []dashVariable
	for _, v := range vars {
		if v.Name != "datasource" && regexp.MustCompile(`\$\{?`+v.Name+`\b`).MatchString(expr) {
			out = append(out, v)
		}
	}
	return out
}

// combinations are every combination of one choice per variable.
func combinations(vars []dashVariable, choices map[string][]varChoice) []map[string]varChoice {
	out := []map[string]varChoice{{}}
	for _, v := range vars {
		var next []map[string]varChoice
		for _, c := range out {
			for _, ch := range choices[v.Name] {
				m := map[string]varChoice{v.Name: ch}
				for k, x := range c {
					m[k] = x
				}
				next = append(next, m)
			}
		}
		out = next
	}
	return out
}

// labelKey names a series by its labels.
func labelKey(labels map[string]string) string {
	var kv []string
	for k, v := range labels {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func keyOf(kv ...string) string {
	var parts []string
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] != "" {
			parts = append(parts, kv[i]+"="+kv[i+1])
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// legendLabel finds the labels a legend names.
var legendLabel = regexp.MustCompile(`\{\{\s*([^}\s]*)\s*\}\}`)

// groupedBy finds the labels of a query's aggregations.
var groupedBy = regexp.MustCompile(`\bby \(([^)]*)\)`)

// TestDashboardPanelsAnswerEveryChoiceFromRealTraffic sends requests of
// every modality (the five omni.output.modality values, two others that
// count as _OTHER, and none), normal, slow, failed with two error.types,
// and saturated (queue waits of 1.5, 3 and 6 s), single-stage diffusion
// and LLM requests and multi-stage ones whose stage scope knows no
// modality, in three waves, through otelsetup (kept exemplars on) into the
// shipped tier, keeping every trace, with a real Prometheus (exemplar
// storage on) scraping the tier. It lists each variable of
// deploy/grafana/otelomni-fleet.json as Grafana would, fills every panel's
// queries for every choice of every variable they use (All, each value,
// all values at once) as Grafana's Prometheus data source escapes them,
// and runs them as Grafana would over the run. Each must return exactly
// the series its title promises for that choice, each with a value; a
// query with exemplars on must return exemplars, of the chosen series only;
// the shares, rates and ratios over the whole run equal what was sent;
// and every series of otelomni's histograms carries an exemplar.
func TestDashboardPanelsAnswerEveryChoiceFromRealTraffic(t *testing.T) {
	dash := readDashboard(t)
	settings := fleet.DemoSettings()
	settings["OMNI_SAMPLE_PERCENT"] = "100"
	tier := startTier(t, settings)
	prom := startPrometheus(t, tier.Collector.Prometheus, tier.Collector.Telemetry)
	env, err := fleet.EngineEnv(settings)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	from := time.Now().Add(-time.Second)
	tel, in := startDashboardEngine(t, tier.Collector.OTLPEndpoint(), env)
	var tr dashTraffic
	// Three waves, each scraped before the next: every series then rises
	// after its first sample, so that its rate is not 0.
	for range 3 {
		tr.sendWave(t, in)
		if err := until(ctx, 2*time.Minute, func() bool {
			s, err := prom.Query(ctx, `sum(gen_ai_server_request_duration_seconds_count)`)
			return err == nil && len(s) == 1 && int(s[0].Value) == len(tr.reqs)
		}); err != nil {
			t.Fatalf("Prometheus never counted the %d requests sent: %v", len(tr.reqs), err)
		}
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if tally, err := tier.Collector.WaitDecided(ctx, len(tr.reqs), 3*time.Minute); err != nil || tally.Kept != len(tr.reqs) {
		t.Fatalf("the tier kept %d of %d traces: %v", tally.Kept, len(tr.reqs), err)
	}
	// What the traces in the backend show: per phase, how many spans.
	spansOf := map[string]int{}
	for _, r := range tr.reqs {
		var n map[string]int
		if err := until(ctx, 2*time.Minute, func() bool {
			ss, err := tier.Backend.Client().Trace(ctx, r.traceID)
			if err != nil {
				return false
			}
			n = map[string]int{}
			total := 0
			for _, s := range ss {
				if p := s.Str("omni.phase"); p != "" {
					n[p]++
					total++
				}
			}
			return total == len(r.samples)
		}); err != nil {
			t.Fatalf("trace %s never reached the backend whole: %v", r.traceID, err)
		}
		for p, c := range n {
			spansOf[p] += c
		}
	}
	if err := until(ctx, 2*time.Minute, func() bool {
		s, err := prom.Query(ctx, `sum({__name__=~"otelcol_processor_tail_sampling_count_traces_sampled(_total)?"})`)
		return err == nil && len(s) == 1 && s[0].Value > 0
	}); err != nil {
		t.Fatalf("Prometheus never held the tier's decisions: %v", err)
	}
	to := time.Now()

	choices := map[string][]varChoice{}
	for _, v := range dash.Templating.List {
		if v.Name == "datasource" {
			continue
		}
		opts := v.options(ctx, t, prom, from, to)
		checkVariable(t, v, opts, &tr)
		choices[v.Name] = v.choices(opts)
		if v.Multi {
			choices[v.Name] = append(choices[v.Name], noTraffic)
		}
	}
	promises := dashPromises(&tr)
	queries := 0
	for _, p := range dash.Panels {
		want, ok := promises[p.Title]
		if !ok {
			t.Errorf("panel %q: the test knows no promise of this title", p.Title)
			continue
		}
		for _, tg := range p.Targets {
			checkLegend(t, p.Title, tg.Expr, tg.LegendFormat)
			for _, ch := range combinations(promisedVars(t, p.Title, tg.Expr, dash.Templating.List, want.vars), choices) {
				q := substitute(tg.Expr, to.Sub(from), ch)
				checkPanelQuery(ctx, t, prom, p.Title, q, tg.Exemplar, want, ch, from, to)
				queries++
			}
		}
	}
	t.Logf("%d requests, each its own trace; %d panel queries run, one for each choice of the variables each follows", len(tr.reqs), queries)
	checkWholeRun(ctx, t, prom, dash, &tr, spansOf, to.Sub(from), choices)
	checkEverySeriesHasAnExemplar(ctx, t, prom, from)
}

// durationBounds are the bounds of otelomni's duration buckets
// (docs/metrics.md).
var durationBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300}

// openMetricsFloat writes a bound as OpenMetrics does, and Prometheus
// then stores it: a whole number with ".0".
func openMetricsFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// noTraffic is a choice of a value no request has: every panel that
// follows the variable then shows nothing, and fails nothing.
var noTraffic = varChoice{text: "a value without traffic", value: "no_such_value", values: []string{"no_such_value"}}

// checkVariable checks a variable's options against what was sent.
func checkVariable(t *testing.T, v dashVariable, opts []string, tr *dashTraffic) {
	t.Helper()
	want := map[string]bool{}
	switch v.Name {
	case "modality":
		for _, r := range tr.reqs {
			if r.modality != "" {
				want[r.modality] = true
			}
		}
	case "phase":
		for _, s := range tr.samples() {
			want[s.phase] = true
		}
	case "queue_budget":
		for _, b := range durationBounds {
			want[strconv.FormatFloat(b, 'f', -1, 64)] = true
		}
		norm := make([]string, 0, len(opts))
		for _, o := range opts {
			f, err := strconv.ParseFloat(o, 64)
			if err != nil {
				t.Errorf("$queue_budget lists %q, not a bound", o)
			}
			norm = append(norm, strconv.FormatFloat(f, 'f', -1, 64))
		}
		opts = norm
	default:
		t.Errorf("variable %s: the test knows no promise of it", v.Name)
		return
	}
	got := map[string]bool{}
	for _, o := range opts {
		got[o] = true
	}
	if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(want)) || len(got) != len(opts) {
		t.Errorf("$%s lists %q; the traffic has %q", v.Name, opts, sortedKeys(want))
	}
	t.Logf("$%s: %d values, as the traffic has them: %q", v.Name, len(opts), opts)
}

// A promise is what a panel's title promises: the variables it follows,
// and the series its query must return for a choice of them, each named
// by its labels (nil: checked by the panel's own rule).
type promise struct {
	vars   []string
	series func(ch map[string]varChoice) map[string]bool
}

// dashPromises are the promises of each panel's title, from what was sent.
func dashPromises(tr *dashTraffic) map[string]promise {
	samples := tr.samples()
	phasesOf := func(ch map[string]varChoice, byModality bool, only ...string) map[string]bool {
		out := map[string]bool{}
		for _, s := range samples {
			if len(only) > 0 && !slices.Contains(only, s.phase) || !ch["phase"].chosen(s.phase) {
				continue
			}
			if byModality {
				if ch["modality"].chosen(s.modality) {
					out[keyOf("omni_phase", s.phase, "omni_output_modality", s.modality)] = true
				}
				continue
			}
			out[keyOf("omni_phase", s.phase)] = true
		}
		return out
	}
	return map[string]promise{
		"Request latency by modality (p50, p99), with kept-trace exemplars": {[]string{"modality"}, func(ch map[string]varChoice) map[string]bool {
			out := map[string]bool{}
			for _, r := range tr.reqs {
				if ch["modality"].chosen(r.modality) {
					out[keyOf("omni_output_modality", r.modality)] = true
				}
			}
			return out
		}},
		// Every bucket, when a chosen phase was measured.
		"Phase latency heatmap": {[]string{"phase"}, func(ch map[string]varChoice) map[string]bool {
			out := map[string]bool{}
			if len(phasesOf(ch, false)) > 0 {
				for _, b := range durationBounds {
					out[keyOf("le", openMetricsFloat(b))] = true
				}
				out[keyOf("le", "+Inf")] = true
			}
			return out
		}},
		"Phase latency p99 by phase and modality": {[]string{"phase", "modality"}, func(ch map[string]varChoice) map[string]bool {
			return phasesOf(ch, true)
		}},
		"Share of requests where each phase was not measured": {nil, func(ch map[string]varChoice) map[string]bool {
			return phasesOf(ch, false, "queue_wait", "preprocess", "exec", "postprocess")
		}},
		"Queue saturation: queue waits over the budget, per second": {[]string{"queue_budget"}, func(ch map[string]varChoice) map[string]bool {
			return phasesOf(ch, false, "queue_wait", "llm.queue")
		}},
		"Error rate by error.type": {nil, func(map[string]varChoice) map[string]bool {
			out := map[string]bool{}
			for _, r := range tr.reqs {
				if r.errType != "" {
					out[keyOf("error_type", r.errType)] = true
				}
			}
			return out
		}},
		// The tier's own counters: checked by policy name.
		"Tail sampling: traces kept and dropped per policy": {nil, nil},
	}
}

// promisedVars returns the dashboard's variables a promise follows, and
// fails when the query names others or leaves one out.
func promisedVars(t *testing.T, title, expr string, vars []dashVariable, want []string) []dashVariable {
	t.Helper()
	var used, out []string
	for _, v := range usedVars(expr, vars) {
		used = append(used, v.Name)
	}
	sort.Strings(used)
	if fmt.Sprint(used) != fmt.Sprint(slices.Sorted(slices.Values(want))) {
		t.Errorf("%s: its query follows the variables %q; its title promises %q", title, used, want)
	}
	var vs []dashVariable
	for _, v := range vars {
		if slices.Contains(want, v.Name) {
			vs = append(vs, v)
			out = append(out, v.Name)
		}
	}
	if len(out) != len(want) {
		t.Errorf("%s: the dashboard has the variables %q of %q", title, out, want)
	}
	return vs
}

// checkLegend: a legend names labels the query keeps, or the bucket
// bound of a heatmap, and never a variable inside braces.
func checkLegend(t *testing.T, title, expr, legend string) {
	t.Helper()
	kept := map[string]bool{}
	for _, m := range groupedBy.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			kept[strings.TrimSpace(l)] = true
		}
	}
	if strings.HasPrefix(expr, "histogram_quantile(") {
		delete(kept, "le")
	}
	for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
		if !kept[m[1]] {
			t.Errorf("%s: the legend %q names %q, which the query's series do not carry", title, legend, m[1])
		}
	}
}

// checkPanelQuery runs one filled query as Grafana would, over the run.
func checkPanelQuery(ctx context.Context, t *testing.T, prom *fleet.Prometheus, title, q string, exemplars bool, want promise,
	ch map[string]varChoice, from, to time.Time) {
	t.Helper()
	var picked []string
	for n, c := range ch {
		picked = append(picked, "$"+n+"="+c.text)
	}
	sort.Strings(picked)
	what := fmt.Sprintf("%s %v", title, picked)
	got, err := prom.QueryRange(ctx, q, from, to, dashStep)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	gotKeys := map[string]bool{}
	for _, s := range got {
		gotKeys[labelKey(s.Labels)] = true
		if !slices.ContainsFunc(s.Values, func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }) {
			t.Errorf("%s: series {%s} has no value at any step", what, labelKey(s.Labels))
		}
	}
	// A choice that no traffic matches (text has no exec phase) must
	// return nothing, and has no exemplar to show.
	var exp map[string]bool
	if want.series != nil {
		exp = want.series(ch)
	}
	switch {
	case want.series != nil:
		if fmt.Sprint(sortedKeys(gotKeys)) != fmt.Sprint(sortedKeys(exp)) {
			t.Errorf("%s: series %q, want %q", what, sortedKeys(gotKeys), sortedKeys(exp))
		}
		if len(exp) == 0 {
			return
		}
	case len(got) == 0:
		t.Errorf("%s: %s returns no series", what, q)
	case title == "Tail sampling: traces kept and dropped per policy":
		checkPolicies(t, what, got)
	default:
		t.Errorf("%s: the test knows no rule for this panel", what)
	}
	if !exemplars {
		return
	}
	exs, err := prom.QueryExemplars(ctx, q, from, to.Add(time.Minute))
	if err != nil {
		t.Errorf("%s: exemplars: %v", what, err)
		return
	}
	if len(exs) == 0 {
		t.Errorf("%s: exemplars are on, and Prometheus holds none for %s", what, q)
	}
	for _, e := range exs {
		if !ch["modality"].chosen(e.Series["omni_output_modality"]) || !ch["phase"].chosen(e.Series["omni_phase"]) {
			t.Errorf("%s: an exemplar of series %v, which the choice leaves out", what, e.Series)
			break
		}
	}
}

// checkPolicies: the tier's decision counters name every policy of the
// shipped file, kept or not.
func checkPolicies(t *testing.T, what string, got []fleet.PromSeries) {
	t.Helper()
	root, err := jaeger.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, fleet.CollectorConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^      - name: ([a-z-]+)$`).FindAllStringSubmatch(string(b), -1) {
		want[m[1]] = true
	}
	have := map[string]bool{}
	for _, s := range got {
		if s.Labels["sampled"] != "true" && s.Labels["sampled"] != "false" {
			t.Errorf("%s: series %v has no sampled label", what, s.Labels)
		}
		have[s.Labels["policy"]] = true
	}
	if len(want) == 0 || fmt.Sprint(sortedKeys(have)) != fmt.Sprint(sortedKeys(want)) {
		t.Errorf("%s: policies %q, the file's %q", what, sortedKeys(have), sortedKeys(want))
	}
}

// sinceStart turns increase(x[$__range]) into x: the same formula over
// the counters since the processes started, which Prometheus holds
// whole (increase extrapolates, and misses a series' first sample); and
// rate(x[$__rate_interval]) into x, the whole run's counts.
var (
	sinceStart = regexp.MustCompile(`increase\(([^\[]+)\[\$__range\]\)`)
	wholeRate  = regexp.MustCompile(`rate\(([^\[]+)\[\$__rate_interval\]\)`)
)

// checkWholeRun evaluates the counting panels over the whole run: the
// not-measured shares equal what was sent and what the traces show, the
// waits over each budget are the waits sent over it, and the error ratios
// are the failures sent.
func checkWholeRun(ctx context.Context, t *testing.T, prom *fleet.Prometheus, dash dashboard, tr *dashTraffic,
	spansOf map[string]int, rng time.Duration, choices map[string][]varChoice) {
	t.Helper()
	n := float64(len(tr.reqs))
	samples := tr.samples()
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			whole := wholeRate.ReplaceAllString(sinceStart.ReplaceAllString(tg.Expr, "$1"), "$1")
			switch p.Title {
			case "Share of requests where each phase was not measured":
				got, err := prom.Query(ctx, substitute(whole, rng, nil))
				if err != nil || len(got) == 0 {
					t.Fatalf("%s over the whole run: %d series, %v", p.Title, len(got), err)
				}
				for _, s := range got {
					phase := s.Labels["omni_phase"]
					sent := 0
					for _, x := range samples {
						if x.phase == phase {
							sent++
						}
					}
					want := 1 - float64(sent)/n
					if math.Abs(s.Value-want) > 1e-9 || spansOf[phase] != sent {
						t.Errorf("%s: %s not measured in %.4f of the requests; %d of %d sent measured it, the backend holds %d spans",
							p.Title, phase, s.Value, sent, len(tr.reqs), spansOf[phase])
					}
				}
			case "Queue saturation: queue waits over the budget, per second":
				for _, c := range choices["queue_budget"] {
					got, err := prom.Query(ctx, substitute(whole, rng, map[string]varChoice{"queue_budget": c}))
					if err != nil || len(got) == 0 {
						t.Fatalf("%s, budget %s, over the whole run: %d series, %v", p.Title, c.text, len(got), err)
					}
					budget, _ := strconv.ParseFloat(c.text, 64)
					for _, s := range got {
						over := 0
						for _, x := range samples {
							if x.phase == s.Labels["omni_phase"] && x.d.Seconds() > budget {
								over++
							}
						}
						if s.Value != float64(over) {
							t.Errorf("%s: %s over %s s: %v, sent %d", p.Title, s.Labels["omni_phase"], c.text, s.Value, over)
						}
					}
				}
			case "Error rate by error.type":
				got, err := prom.Query(ctx, substitute(whole, rng, nil))
				if err != nil || len(got) == 0 {
					t.Fatalf("%s over the whole run: %d series, %v", p.Title, len(got), err)
				}
				for _, s := range got {
					failed := 0
					for _, r := range tr.reqs {
						if r.errType == s.Labels["error_type"] {
							failed++
						}
					}
					if want := float64(failed) / n; math.Abs(s.Value-want) > 1e-9 {
						t.Errorf("%s: %s %.4f of the requests, sent %d of %d", p.Title, s.Labels["error_type"], s.Value, failed, len(tr.reqs))
					}
				}
			}
		}
	}
}

// checkEverySeriesHasAnExemplar: every trace is kept here, so every series
// of otelomni's histograms received measurements of kept requests, and
// carries an exemplar.
func checkEverySeriesHasAnExemplar(ctx context.Context, t *testing.T, prom *fleet.Prometheus, from time.Time) {
	t.Helper()
	exs, err := prom.QueryExemplars(ctx, histogramsWithExemplars, from, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	withExemplar := map[string]bool{}
	for _, e := range exs {
		withExemplar[seriesKey(e.Series, "_bucket")] = true
	}
	series, err := prom.Query(ctx, `{__name__=~"(omni_phase_duration|omni_stage_duration|gen_ai_server_request_duration|gen_ai_server_time_to_first_token)_seconds_count"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) == 0 {
		t.Fatal("no series of otelomni's histograms")
	}
	for _, s := range series {
		if k := seriesKey(s.Labels, "_count"); !withExemplar[k] {
			t.Errorf("series %s received %v measurements of kept requests and carries no exemplar", k, s.Value)
		}
	}
	t.Logf("%d series of otelomni's histograms, each with an exemplar", len(series))
}

// seriesKey names a histogram series by its metric and labels, less the
// bucket bound and the suffix of its sample.
func seriesKey(labels map[string]string, suffix string) string {
	var kv []string
	for k, v := range labels {
		switch k {
		case "le":
		case "__name__":
			kv = append(kv, k+"="+strings.TrimSuffix(v, suffix))
		default:
			kv = append(kv, k+"="+v)
		}
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
