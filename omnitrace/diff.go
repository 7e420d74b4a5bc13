// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/tracediff"
	"github.com/otelomni/otelomni/omnitrace/jaegerquery"
	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// Exit statuses of diff beyond run's own: a significant regression beyond
// -fail-on.
const exitRegression = 3

// diffFlags are diff's options.
type diffFlags struct {
	by, format, html, failOn, correction string
	alpha                                float64
	samples, maxRows, maxSpans           int
	jaeger, service                      string
	limit                                int
}

func (f *diffFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.by, "by", "", "split rows by this too: model (gen_ai.request.model)")
	fs.StringVar(&f.format, "format", "text", "text, json or csv")
	fs.StringVar(&f.html, "html", "", "also write a self-contained HTML report, with a chart of each significant row, to this file")
	fs.StringVar(&f.failOn, "fail-on", "", "exit 3 when a row is significantly slower by more than this: 10% (its p50), or p99:10%")
	fs.StringVar(&f.correction, "correction", string(tracediff.Holm), "how p-values are corrected for the number of tests: holm (family-wise error) or bh (false discovery rate)")
	fs.Float64Var(&f.alpha, "alpha", 0.05, "the level below which a corrected p-value is significant")
	fs.IntVar(&f.samples, "samples", tracediff.DefaultSamples, "values kept per row and side (a uniform sample of all; counts stay exact)")
	fs.IntVar(&f.maxRows, "max-rows", tracediff.DefaultMaxRows, "rows kept per table and side")
	fs.IntVar(&f.maxSpans, "max-spans", defaultMaxSpans, "spans of an OTLP/JSON file held at once while gathering traces, as summary's")
	fs.StringVar(&f.jaeger, "jaeger", "", "read both sides from this Jaeger query API: BASE and NEW are then time windows")
	fs.StringVar(&f.service, "service", "", "the service whose traces to read (with -jaeger)")
	fs.IntVar(&f.limit, "limit", 1000, "at most this many traces a side (with -jaeger)")
}

// failOn is a parsed -fail-on: the quantile and the relative change.
type failOn struct {
	p99    bool
	change float64
}

func parseFailOn(s string) (*failOn, error) {
	if s == "" {
		return nil, nil
	}
	f := &failOn{}
	rest := s
	if q, v, ok := strings.Cut(s, ":"); ok {
		switch q {
		case "p50":
		case "p99":
			f.p99 = true
		default:
			return nil, fmt.Errorf("-fail-on %q: p50 or p99 before the colon", sanitize.Display(s, 64))
		}
		rest = v
	}
	num, pct := strings.CutSuffix(rest, "%")
	if !pct || !plainDecimal(num) {
		return nil, fmt.Errorf("-fail-on %q: a percentage from 0%% to 1000000%% in plain digits with its %% sign, such as 10%% or p99:2.5%%", sanitize.Display(s, 64))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v > maxFailOn {
		return nil, fmt.Errorf("-fail-on %q: a percentage from 0%% to 1000000%%", sanitize.Display(s, 64))
	}
	f.change = v / 100
	return f, nil
}

// maxFailOn is the largest -fail-on, in percent.
const maxFailOn = 1e6

// plainDecimal reports whether s is ASCII digits with at most one decimal
// point and at least one digit: no sign, exponent, hex, underscore or
// space, which strconv.ParseFloat would take.
func plainDecimal(s string) bool {
	digits, points := 0, 0
	for _, c := range []byte(s) {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return false
		}
	}
	return digits > 0 && points <= 1
}

func runDiff(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var fl diffFlags
	fl.register(fs)
	usageErr := func(msg string) int {
		fmt.Fprintf(stderr, "omnitrace diff: %s\n%s", sanitize.Display(msg, 1024), usage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail, err := fl.check(fs)
	if err != nil {
		return usageErr(err.Error())
	}
	set := tracediff.Settings{Samples: fl.samples, MaxRows: fl.maxRows, ByModel: fl.by == "model"}
	sides := [2]*tracediff.Side{tracediff.NewSide(set), tracediff.NewSide(set)}
	names := tracediff.Names{Base: sanitize.Display(fs.Arg(0), 256), New: sanitize.Display(fs.Arg(1), 256)}
	if fl.jaeger != "" {
		now := time.Now()
		var windows [2][2]time.Time
		for i := range 2 {
			if windows[i], err = parseWindow(fs.Arg(i), now); err != nil {
				return usageErr(err.Error())
			}
		}
		for i := range 2 {
			if err := readJaegerSide(ctx, &fl, windows[i], sides[i]); err != nil {
				fmt.Fprintf(stderr, "omnitrace diff: %s: %s\n", []string{"base", "new"}[i], sanitize.Display(err.Error(), 1024))
				return 1
			}
		}
	} else {
		if fs.Arg(0) == "" || fs.Arg(1) == "" {
			return usageErr("BASE and NEW each name one file or more, separated by commas")
		}
		// A side of forms is made into spans within the attribute
		// limits, as import makes them.
		ignoreInvalidEnv(stderr, diffEnv)
		stdinUsed := 0
		for i := range 2 {
			for _, name := range strings.Split(fs.Arg(i), ",") {
				if name == "-" {
					stdinUsed++
				}
			}
		}
		if stdinUsed > 1 {
			return usageErr("stdin (-) can be read once")
		}
		if fl.html != "" {
			// Writing the report must not replace an input.
			if out, err := os.Stat(fl.html); err == nil {
				for i := range 2 {
					for _, name := range strings.Split(fs.Arg(i), ",") {
						if in, err := os.Stat(name); err == nil && os.SameFile(in, out) {
							return usageErr(fmt.Sprintf("-html %s is one of the inputs", fl.html))
						}
					}
				}
			}
		}
		for i := range 2 {
			r := &diffReader{side: sides[i], stdin: stdin, stderr: stderr, maxSpans: fl.maxSpans, what: []string{"base", "new"}[i]}
			if err := r.read(ctx, strings.Split(fs.Arg(i), ",")); err != nil {
				fmt.Fprintf(stderr, "omnitrace diff: %s\n", sanitize.Display(err.Error(), 1024))
				return 1
			}
		}
	}
	for i, s := range sides {
		if s.Requests() == 0 {
			fmt.Fprintf(stderr, "omnitrace diff: no omni.request found in %s (%s)\n", []string{"BASE", "NEW"}[i], []string{names.Base, names.New}[i])
			return 1
		}
	}
	for i, s := range sides {
		// Rows beyond the bound are neither shown nor tested: -fail-on
		// cannot see them, which stdout alone (JSON for a script) would
		// not say.
		if n := s.Hidden(); n > 0 {
			fmt.Fprintf(stderr, "omnitrace diff: %s: %d values of rows beyond -max-rows %d not kept, nor tested: raise -max-rows to see them\n", []string{"base", "new"}[i], n, fl.maxRows)
		}
	}
	rep := tracediff.Compare(sides[0], sides[1], tracediff.Options{Alpha: fl.alpha, Correction: tracediff.Correction(fl.correction)})
	// The report's file first: a reader of stdout that stops early (a
	// pager, head) must not cost it.
	if fl.html != "" {
		if err := writeHTML(fl.html, rep, names); err != nil {
			fmt.Fprintf(stderr, "omnitrace diff: -html: %s\n", sanitize.Display(err.Error(), 1024))
			return 1
		}
	}
	switch fl.format {
	case "json":
		err = rep.WriteJSON(stdout, names)
	case "csv":
		err = rep.WriteCSV(stdout)
	default:
		err = rep.WriteText(stdout, names)
	}
	if err != nil {
		fmt.Fprintf(stderr, "omnitrace diff: %s\n", sanitize.Display(err.Error(), 1024))
		return 1
	}
	if fail != nil {
		if found := regressions(rep, fail); len(found) > 0 {
			for _, f := range found {
				fmt.Fprintf(stderr, "omnitrace diff: regression beyond -fail-on %s: %s\n", sanitize.Display(fl.failOn, 64), f)
			}
			return exitRegression
		}
	}
	return 0
}

// check checks the flags and the arguments, and returns -fail-on.
func (fl *diffFlags) check(fs *flag.FlagSet) (*failOn, error) {
	fail, err := parseFailOn(fl.failOn)
	var bad string
	switch {
	case err != nil:
		return nil, err
	case fs.NArg() != 2:
		bad = "diff compares two sides: BASE and NEW"
	case fl.by != "" && fl.by != "model":
		bad = "-by takes model"
	case fl.format != "text" && fl.format != "json" && fl.format != "csv":
		bad = "-format is text, json or csv"
	case fl.correction != string(tracediff.Holm) && fl.correction != string(tracediff.BH):
		bad = "-correction is holm or bh"
	case !(fl.alpha > 0 && fl.alpha < 1):
		bad = "-alpha lies between 0 and 1"
	case fl.samples < 2 || fl.samples > maxDiffSamples:
		bad = fmt.Sprintf("-samples is from 2 to %d", maxDiffSamples)
	case fl.maxRows < 1 || fl.maxRows > maxDiffRows:
		bad = fmt.Sprintf("-max-rows is from 1 to %d", maxDiffRows)
	case fl.maxSpans <= 0:
		bad = "-max-spans is above 0"
	case fl.jaeger != "" && !httpURL(fl.jaeger):
		bad = fmt.Sprintf("-jaeger %q: the query API's http:// or https:// URL, such as http://127.0.0.1:16686", sanitize.Display(fl.jaeger, 256))
	case fl.jaeger != "" && fl.service == "":
		bad = "-service is needed with -jaeger"
	case fl.jaeger == "" && fl.service != "":
		bad = "-service goes with -jaeger"
	case fl.limit <= 0:
		bad = "-limit is above 0"
	}
	if bad != "" {
		return nil, errors.New(bad)
	}
	return fail, nil
}

// httpURL reports whether s is an absolute http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

// Bounds of diff's settings: memory is their product (see
// tracediff.Settings.Memory), so each is bounded.
const (
	maxDiffSamples = 1 << 20
	maxDiffRows    = 1 << 14
)

// regressions lists the rows significantly slower than -fail-on allows.
func regressions(rep *tracediff.Report, f *failOn) []string {
	var out []string
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if !r.Duration.Significant {
			continue
		}
		c, q := r.Change(), "p50"
		if f.p99 {
			c, q = r.ChangeP99(), "p99"
		}
		// A change from 0 is +Inf: beyond any -fail-on.
		if c > f.change {
			by := fmt.Sprintf("%+.2f%%", 100*c)
			if math.IsInf(c, 1) {
				by = "+∞% (from 0)"
			}
			out = append(out, fmt.Sprintf("%s %s %s", r.Key, q, by))
		}
	}
	return out
}

func writeHTML(name string, rep *tracediff.Report, names tracediff.Names) error {
	var b bytes.Buffer
	if err := rep.WriteHTML(&b, names); err != nil {
		return err
	}
	return os.WriteFile(name, b.Bytes(), 0o644)
}

// parseWindow reads a -jaeger side's time window, START/END: each an RFC
// 3339 time, now, or a time before now (now-2h).
func parseWindow(s string, now time.Time) ([2]time.Time, error) {
	var w [2]time.Time
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return w, fmt.Errorf("window %q: START/END, such as now-2h/now-1h or 2026-01-05T10:00:00Z/2026-01-05T11:00:00Z", sanitize.Display(s, 64))
	}
	for i, p := range []string{a, b} {
		switch ago, rel := strings.CutPrefix(p, "now-"); {
		case p == "now":
			w[i] = now
		case rel:
			d, err := time.ParseDuration(ago)
			if err != nil || d < 0 || d > 100*365*24*time.Hour {
				return w, fmt.Errorf("window %q: %q is not now less a duration", sanitize.Display(s, 64), sanitize.Display(p, 64))
			}
			w[i] = now.Add(-d)
		default:
			t, err := time.Parse(time.RFC3339Nano, p)
			if err != nil {
				return w, fmt.Errorf("window %q: %q is not an RFC 3339 time, now, or now less a duration", sanitize.Display(s, 64), sanitize.Display(p, 64))
			}
			w[i] = t
		}
	}
	if !w[0].Before(w[1]) {
		return w, fmt.Errorf("window %q ends before it starts", sanitize.Display(s, 64))
	}
	return w, nil
}

func readJaegerSide(ctx context.Context, fl *diffFlags, w [2]time.Time, side *tracediff.Side) error {
	ss, err := (&jaegerquery.Client{Base: fl.jaeger}).Search(ctx, fl.service, w[0], w[1], fl.limit)
	if err != nil {
		return err
	}
	addTraces(side, ss)
	return nil
}

// addTraces adds the traces of ss to the side in the order of their ids,
// whatever order they came in: the same traces keep the same sample.
func addTraces(side *tracediff.Side, ss []traceview.Span) {
	byTrace := traceview.ByTrace(ss)
	for _, id := range slices.Sorted(maps.Keys(byTrace)) {
		side.Add(byTrace[id])
	}
}

// diffReader reads the files of one side into it.
type diffReader struct {
	side     *tracediff.Side
	stdin    io.Reader
	stderr   io.Writer
	maxSpans int
	what     string
	// opened are the files that cannot be opened twice (pipes, such as
	// a shell's <(zcat run.json.gz)), opened once and buffered: what told
	// their form is read again from the buffer.
	opened map[string]*bufio.Reader
}

// read reads names: OTLP/JSON files gathered into traces as summary
// gathers them, the rest as import reads them (the forms of one run, in
// several files, merged into one request).
func (d *diffReader) read(ctx context.Context, names []string) error {
	var forms []string
	var seen []os.FileInfo
	for _, name := range names {
		if name == "" {
			return fmt.Errorf("%s: an empty file name", d.what)
		}
		if fi, err := os.Stat(name); err == nil && name != "-" {
			// A file named twice in one side is read once: its requests
			// would count twice.
			if slices.ContainsFunc(seen, func(o os.FileInfo) bool { return os.SameFile(o, fi) }) {
				fmt.Fprintf(d.stderr, "omnitrace diff: %s: %s is named twice: read once\n", d.what, sanitize.Display(name, 256))
				continue
			}
			seen = append(seen, fi)
			if !fi.Mode().IsRegular() && !fi.IsDir() {
				f, err := os.Open(name)
				if err != nil {
					return fmt.Errorf("%s: %w", d.what, err)
				}
				defer f.Close()
				if d.opened == nil {
					d.opened = map[string]*bufio.Reader{}
				}
				d.opened[name] = bufio.NewReaderSize(f, sniffBytes)
			}
		}
		otlp, err := d.isOTLP(name)
		if err != nil {
			return fmt.Errorf("%s: %w", d.what, err)
		}
		if !otlp {
			forms = append(forms, name)
			continue
		}
		if err := d.readOTLP(name); err != nil {
			return fmt.Errorf("%s: %s: %w", d.what, name, err)
		}
	}
	if len(forms) > 0 {
		return d.readForms(ctx, forms)
	}
	return nil
}

// sniffBytes is how much of a file's start tells OTLP/JSON from the
// forms import reads.
const sniffBytes = 64 << 10

// isOTLP reports whether the file is OTLP/JSON: a JSON object whose
// first bytes name resourceSpans (or Jaeger's result wrapper of one).
// Stdin is buffered for its later reading.
func (d *diffReader) isOTLP(name string) (bool, error) {
	if br, ok := d.opened[name]; ok {
		head, _ := br.Peek(sniffBytes)
		return looksOTLP(head), nil
	}
	var r io.Reader
	if name == "-" {
		br := bufio.NewReaderSize(d.stdin, sniffBytes)
		d.stdin = br
		r = br
		head, _ := br.Peek(sniffBytes)
		return looksOTLP(head), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	r = f
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	return looksOTLP(head[:n]), nil
}

// looksOTLP reports whether head begins a TracesData object: its first
// key is resourceSpans, or it is Jaeger's {"result": {"resourceSpans":
// ...}}. Where the key appears later (a record of the forms import reads
// that holds a "result" or names resourceSpans in a value), it is not.
func looksOTLP(head []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(head))
	// firstKey reads the next object's first key: "" for no object, "}"
	// for an empty one.
	firstKey := func() string {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return ""
		}
		switch k, _ := dec.Token(); k := k.(type) {
		case string:
			return k
		case json.Delim:
			if k == '}' {
				return "}"
			}
		}
		return ""
	}
	k := firstKey()
	// Empty documents before the first one that holds anything (an
	// export of nothing) say nothing.
	for k == "}" {
		k = firstKey()
	}
	if k == "result" {
		k = firstKey()
	}
	return k == "resourceSpans" || k == "resource_spans"
}

// readOTLP reads one OTLP/JSON file into the side, each trace gathered in
// a window of maxSpans spans.
func (d *diffReader) readOTLP(name string) error {
	src := source{file: name, maxSpans: d.maxSpans, stdin: d.stdin}
	if br, ok := d.opened[name]; ok {
		src.file, src.stdin = "-", br
	}
	w := newTraceWindow(d.maxSpans, d.side.Add)
	err := src.readFile("diff", d.stderr, w.add)
	w.flush()
	if n := w.notes(); n != "" {
		fmt.Fprintf(d.stderr, "omnitrace diff: %s: %s: note: %s\n", d.what, sanitize.Display(name, 256), n)
	}
	return err
}
