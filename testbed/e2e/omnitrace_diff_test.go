// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// diffRun is how synthetic single-stage image requests are drawn for
// omnitrace diff: forward scaled by forward, preprocess measured in a
// share preprocess of them.
type diffRun struct {
	forward, preprocess float64
	start               time.Time
}

// diffTraces draws n requests of a run, seeded, as spans.
func diffTraces(seed uint64, n int, r diffRun) []traceview.Span {
	rng := rand.New(rand.NewPCG(seed, 1))
	lognormal := func(median float64) time.Duration {
		return time.Duration(median * math.Exp(0.3*rng.NormFloat64()) * float64(time.Millisecond))
	}
	var out []traceview.Span
	for i := range n {
		tid := fmt.Sprintf("%016x%016x", seed, i)
		id := func(k int) string { return fmt.Sprintf("%08x%08x", i+1, k) } // an id of zeros is no id in OTLP
		t := r.start.Add(time.Duration(i) * time.Second)
		req := traceview.Span{TraceID: tid, SpanID: id(0), Name: "omni.request", Start: t,
			Attrs: map[string]attribute.Value{"omni.output.modality": attribute.StringValue("image"), "omni.stage.type": attribute.StringValue("diffusion")}}
		cur := t
		add := func(k int, parent, name string, d time.Duration) {
			out = append(out, traceview.Span{TraceID: tid, SpanID: id(k), ParentID: parent, Name: name, Start: cur, End: cur.Add(d)})
			cur = cur.Add(d)
		}
		if rng.Float64() < r.preprocess {
			add(1, id(0), "omni.diffusion.preprocess", lognormal(8))
		}
		execStart := cur
		add(3, id(2), "omni.diffusion.forward", lognormal(800*r.forward))
		add(4, id(2), "omni.diffusion.vae_decode", lognormal(60))
		out = append(out, traceview.Span{TraceID: tid, SpanID: id(2), ParentID: id(0), Name: "omni.diffusion.exec", Start: execStart, End: cur})
		add(5, id(0), "omni.diffusion.postprocess", lognormal(20))
		req.End = cur.Add(lognormal(1))
		out = append(out, req)
	}
	return out
}

func writeTraces(t *testing.T, name string, ss []traceview.Span) string {
	t.Helper()
	var b bytes.Buffer
	if err := traceview.WriteOTLPJSON(&b, ss); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runOmnitrace runs the built omnitrace and returns its exit status and
// output.
func runOmnitrace(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin["omnitrace"], args...)
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// diffJSON is what the tests read of diff -format json.
type diffJSON struct {
	Tests int `json:"tests"`
	Rows  []struct {
		Modality, Model, Stage, Phase string
		Change                        *float64 `json:"p50_change"`
		Duration                      struct {
			Significant bool `json:"significant"`
		} `json:"duration_test"`
		Measured struct {
			Significant bool `json:"significant"`
		} `json:"measured_test"`
		Base, New struct {
			Requests int `json:"requests"`
			Measured int `json:"measured"`
		}
	} `json:"rows"`
	Critical []struct {
		Modality, Model, Stage, Phase string
		Share                         struct {
			Significant bool `json:"significant"`
		} `json:"share_test"`
	} `json:"critical_path"`
}

// significant lists the names of the rows with a significant test, as the
// report's charts are titled.
func (d *diffJSON) significant() []string {
	var out []string
	name := func(model, modality, stage, phase string) string {
		s := modality + " " + stage + " " + phase
		if model != "" {
			s = model + " " + s
		}
		return s
	}
	for _, r := range d.Rows {
		if r.Duration.Significant || r.Measured.Significant {
			out = append(out, name(r.Model, r.Modality, r.Stage, r.Phase))
		}
	}
	for _, r := range d.Critical {
		if r.Share.Significant {
			out = append(out, "critical path: "+name(r.Model, r.Modality, r.Stage, r.Phase))
		}
	}
	return out
}

func readDiffJSON(t *testing.T, out string) *diffJSON {
	t.Helper()
	var d diffJSON
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("diff -format json: %v\n%s", err, out)
	}
	return &d
}

var diffStart = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// TestDiffHTMLReportDrawsOneChartPerSignificantRow: forward 50 % slower
// and preprocess measured in 40 % of requests instead of 90 %: the HTML
// report, opened in headless Chromium with nothing reachable but the file,
// shows one drawn chart for each significant row of diff -format json,
// titled by it, and asks for nothing over the network.
func TestDiffHTMLReportDrawsOneChartPerSignificantRow(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("OTELOMNI_REQUIRE_JAEGER") == "1" {
			t.Fatal("no chromium on PATH (make chromium-bin installs it)")
		}
		t.Skip("no chromium on PATH (make chromium-bin installs it)")
	}
	base := writeTraces(t, "base.json", diffTraces(1, 80, diffRun{forward: 1, preprocess: 0.9, start: diffStart}))
	new := writeTraces(t, "new.json", diffTraces(2, 80, diffRun{forward: 1.5, preprocess: 0.4, start: diffStart}))
	report := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := runOmnitrace(t, "", "diff", "-format", "json", "-html", report, base, new)
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s", code, errOut)
	}
	want := readDiffJSON(t, out).significant()
	for _, row := range []string{"image diffusion forward", "image diffusion preprocess"} {
		if !slices.Contains(want, row) {
			t.Errorf("%s is not significant: %v", row, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	var mu sync.Mutex
	var requested []string
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requested = append(requested, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	type chart struct {
		Caption string  `json:"caption"`
		Width   float64 `json:"width"`
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+report)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	drawn, err := chromedp.Run(bctx, chromedp.Evaluate[[]chart](`Promise.all([...document.querySelectorAll("figure.chart")].map(async f => {
		const img = f.querySelector("img");
		await img.decode();
		return {caption: f.querySelector("figcaption").textContent, width: img.naturalWidth};
	}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	var got []string
	for _, d := range drawn {
		if d.Width <= 0 {
			t.Errorf("chart %q was not drawn (width %v)", d.Caption, d.Width)
		}
		got = append(got, d.Caption)
	}
	if !slices.Equal(got, want) {
		t.Errorf("charts drawn:\n%s\nwant one per significant row:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requested) == 0 {
		t.Error("no request seen: the page was not loaded through the network domain watched")
	}
	for _, u := range requested {
		if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the report asked for %s", u)
		}
	}
}

// TestDiffExitStatuses: 0 when nothing beyond -fail-on regressed, 3 when a
// row is significantly slower than it allows, 2 for a usage error, 1 for
// an input that cannot be read or holds no request.
func TestDiffExitStatuses(t *testing.T) {
	base := writeTraces(t, "base.json", diffTraces(1, 60, diffRun{forward: 1, preprocess: 0.9, start: diffStart}))
	slower := writeTraces(t, "slower.json", diffTraces(2, 60, diffRun{forward: 1.5, preprocess: 0.9, start: diffStart}))
	same := writeTraces(t, "same.json", diffTraces(3, 60, diffRun{forward: 1, preprocess: 0.9, start: diffStart}))
	empty := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"-fail-on", "10%", base, slower}, 3, "regression beyond -fail-on 10%: image diffusion forward p50 +"},
		{[]string{"-fail-on", "p99:10%", base, slower}, 3, "image diffusion forward p99 +"},
		{[]string{"-fail-on", "100%", base, slower}, 0, ""},
		{[]string{"-fail-on", "10%", base, same}, 0, ""},
		{[]string{base, slower}, 0, ""},
		{[]string{"-fail-on", "ten", base, slower}, 2, "-fail-on"},
		{[]string{"-fail-on", "-5%", base, slower}, 2, "-fail-on"},
		{[]string{base}, 2, "two sides"},
		{[]string{"-format", "xml", base, slower}, 2, "-format"},
		{[]string{"-samples", "1", base, slower}, 2, "-samples"},
		{[]string{"-samples", "99999999999", base, slower}, 2, "-samples"},
		{[]string{"-by", "replica", base, slower}, 2, "-by"},
		{[]string{"-", "-", base}, 2, "two sides"},
		{[]string{"--", "-,-", base}, 2, "stdin"},
		{[]string{base, filepath.Join(t.TempDir(), "missing.json")}, 1, "no such file"},
		{[]string{base, empty}, 1, "no omni.request found in NEW"},
		{[]string{"-jaeger", "http://127.0.0.1:1", base, slower}, 2, "-service"},
		{[]string{"-jaeger", "http://127.0.0.1:1", "-service", "s", "now-1h", "now"}, 2, "START/END"},
		{[]string{"-jaeger", "http://127.0.0.1:1", "-service", "s", "now-1h/now-2h", "now-1h/now"}, 2, "ends before it starts"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runOmnitrace(t, "", append([]string{"diff"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.err) {
				t.Errorf("exit %d, want %d with %q on stderr:\n%s", code, tc.code, tc.err, errOut)
			}
		})
	}
}

// TestDiffReadsJaegerWindows: two runs imported into Jaeger an hour
// apart, diffed by their time windows, find the run whose forward is 50 %
// slower, as diff of the two files does.
func TestDiffReadsJaegerWindows(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	runs := [][]traceview.Span{
		diffTraces(11, 40, diffRun{forward: 1, preprocess: 1, start: t0}),
		diffTraces(12, 40, diffRun{forward: 1.5, preprocess: 1, start: t0.Add(time.Hour)}),
	}
	const service = "e2e-diff"
	for i, ss := range runs {
		for k := range ss {
			ss[k].Service = service
		}
		path := writeTraces(t, fmt.Sprintf("run%d.json", i), ss)
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "curl", "-sf", "-H", "Content-Type: application/json", "--data-binary", "@-", j.OTLPEndpoint("http")+"/v1/traces")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sending run %d to Jaeger: %v\n%s", i, err, out)
		}
	}
	if _, err := j.WaitTraces(ctx, service, t0.Add(-time.Minute), t0.Add(2*time.Hour), 80, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	win := func(from, to time.Time) string { return from.Format(time.RFC3339) + "/" + to.Format(time.RFC3339) }
	code, out, errOut := runOmnitrace(t, "", "diff", "-format", "json", "-jaeger", "http://"+j.Query, "-service", service,
		win(t0.Add(-time.Minute), t0.Add(50*time.Minute)), win(t0.Add(50*time.Minute), t0.Add(2*time.Hour)))
	if code != 0 {
		t.Fatalf("diff -jaeger: exit %d\n%s", code, errOut)
	}
	d := readDiffJSON(t, out)
	found := false
	for _, r := range d.Rows {
		if r.Phase == "request" && (r.Base.Requests != 40 || r.New.Requests != 40) {
			t.Errorf("requests %d and %d, want 40 a side", r.Base.Requests, r.New.Requests)
		}
		if r.Phase == "forward" {
			found = r.Duration.Significant && r.Change != nil && *r.Change > 0.3
		}
	}
	if !found {
		t.Errorf("forward 50%% slower not found:\n%s", out)
	}
}
