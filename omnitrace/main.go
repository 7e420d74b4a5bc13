// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Command omnitrace brings the timing that engines already write into
// traces, and reads traces back as the tables people read in a terminal.
//
//	omnitrace import [-out FILE] [-format F] [-start T] [-run NAME] [-tz ZONE] [FILE ...]
//	omnitrace import -follow [-checkpoint FILE] [-idle D] FILE
//	omnitrace table  (-jaeger URL | -file FILE [-max-spans N]) [-request ID] [-critical] [TRACE_ID]
//	omnitrace summary (-jaeger URL -service NAME [-since 1h] | -file FILE [-max-spans N])
//	omnitrace diff [-by model] [-format text|json|csv] [-html FILE] [-fail-on PCT] BASE NEW
//
// import reads what vLLM-Omni writes (its orchestrator's summary dicts, the
// [OmniTiming] lines and per-request tables of its log, its older event
// dicts) or this project's JSON-lines records, tells the form by content,
// and makes one trace per request, the forms of one run given together
// merged into it. It exports through the standard OTEL_*
// variables (to the console when none names an exporter or endpoint), or
// writes an OTLP/JSON file with -out, as it goes. Ids are derived from the
// input: importing it again stores nothing twice. A bad record is
// reported on stderr with its line number and skipped; the exit status is
// 1 when a record was skipped or a span did not reach its destination.
//
// table prints one trace's per-request table: phases by stage, a blank cell
// for a phase not measured. summary prints, per phase, how many requests
// measured it and the p50, p90, p99 and max of its durations. Neither ever
// adds phases together, and neither prints more than a person reads,
// whatever the trace holds. diff compares two runs row by row (modality,
// stage, phase): the share of requests that measured each phase, p50 and
// p99, their change and its significance, each row's share of the
// requests' critical path. Every command's memory is bounded by its
// settings, whatever the length of its input (docs/omnitrace.md, Memory).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/tracetable"
	"github.com/otelomni/otelomni/omnitrace/jaegerquery"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

const usage = `usage:
  omnitrace import [-out FILE] [-format auto|jsonl|summary|log] [-start T] [-run NAME] [-tz UTC] [FILE ...]
                                                      vLLM-Omni's summaries, logs or records to traces (stdin when no FILE)
  omnitrace import -follow [-checkpoint FILE] [-idle 10s] FILE
                                                      the same, as the engine appends to FILE
  omnitrace table  (-jaeger URL | -file FILE [-max-spans N]) [-request ID] [-critical] [TRACE_ID]
  omnitrace summary (-jaeger URL -service NAME [-since 1h] | -file FILE [-max-spans N])
  omnitrace recover [-out FILE] DIR                   export the spans a dead engine's crash journal holds
  omnitrace diff [-by model] [-format text|json|csv] [-html FILE] [-fail-on 10%] BASE NEW
                                                      what changed between two runs (each FILE[,FILE...])
  omnitrace diff -jaeger URL -service NAME BASE NEW   the same, each side a time window START/END (now-2h/now-1h)
`

func main() {
	// An interrupt ends `import -follow` cleanly: held requests are
	// exported or saved to the checkpoint, and the exporter flushed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one command and returns the exit status: 0, 1 when lines were
// skipped or the command failed, 2 for a usage error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "import":
		return runImport(ctx, args[1:], stdin, stdout, stderr)
	case "table":
		err = runTable(ctx, args[1:], stdin, stdout, stderr)
	case "summary":
		err = runSummary(ctx, args[1:], stdin, stdout, stderr)
	case "recover":
		return runRecover(ctx, args[1:], stdout, stderr)
	case "diff":
		return runDiff(ctx, args[1:], stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "omnitrace: unknown command %q\n%s", sanitize.Display(args[0], 64), usage)
		return 2
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "omnitrace %s: %s\n%s", args[0], sanitize.Display(err.Error(), 1024), usage)
		return 2
	}
	if err != nil {
		// A backend's error page is other people's text: bounded, and
		// without the control characters that would drive the terminal.
		fmt.Fprintf(stderr, "omnitrace %s: %s\n", args[0], sanitize.Display(err.Error(), 1024))
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// source reads traces from Jaeger or from an OTLP/JSON file.
type source struct {
	jaegerURL, file string
	maxSpans        int
	stdin           io.Reader
}

func (s *source) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.jaegerURL, "jaeger", "", "Jaeger query API base URL, such as http://127.0.0.1:16686")
	fs.StringVar(&s.file, "file", "", "an OTLP/JSON file (Jaeger's /api/v3 answer or an OTLP file exporter's output; - for stdin)")
	fs.IntVar(&s.maxSpans, "max-spans", defaultMaxSpans, "with -file: spans held at once while gathering traces (a trace's spans must lie within so many of each other)")
}

func (s *source) check() error {
	if (s.jaegerURL == "") == (s.file == "") {
		return usageError{"give exactly one of -jaeger and -file"}
	}
	if s.maxSpans <= 0 {
		return usageError{"-max-spans is above 0"}
	}
	if s.jaegerURL != "" && !httpURL(s.jaegerURL) {
		return usageError{fmt.Sprintf("-jaeger %q: the query API's http:// or https:// URL, such as http://127.0.0.1:16686", sanitize.Display(s.jaegerURL, 256))}
	}
	return nil
}

// readFile reads the -file, handing fn the spans of each document as it
// is read. What cannot be read of it (a span with times OTLP cannot
// mean, a truncated last document, as a killed import leaves) is said on
// stderr, and what could be read is shown: the error is returned only
// when nothing could be.
func (s *source) readFile(cmd string, stderr io.Writer, fn func([]traceview.Span)) error {
	r := s.stdin
	if s.file != "-" {
		f, err := os.Open(s.file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	read := 0
	err := traceview.ReadOTLPJSON(bufio.NewReader(r), func(ss []traceview.Span) error {
		read += len(ss)
		fn(ss)
		return nil
	})
	if err != nil && read > 0 {
		fmt.Fprintf(stderr, "omnitrace %s: note: %s; the rest is shown\n", cmd, sanitize.Display(strings.ReplaceAll(err.Error(), "\n", "; "), 1024))
		err = nil
	}
	return err
}

// canReadTwice reports whether the -file can be read a second time.
func (s *source) canReadTwice() bool {
	if s.file == "-" {
		return false
	}
	st, err := os.Stat(s.file)
	return err == nil && st.Mode().IsRegular()
}

// Bounds of the trace ids table lists, and counts.
const (
	maxListedTraces  = 10
	maxCountedTraces = 10000
)

func runTable(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	fs.SetOutput(stderr)
	src := source{stdin: stdin}
	src.flags(fs)
	requestID := fs.String("request", "", "pick the trace whose omni.request.id is this (with -file)")
	critical := fs.Bool("critical", false, "mark with * the cells on each request's critical path")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if err := src.check(); err != nil {
		return err
	}
	traceID := fs.Arg(0)
	var pick []traceview.Span
	var matches []string
	note := ""
	if src.jaegerURL != "" {
		if traceID == "" {
			return usageError{"a trace id is needed with -jaeger"}
		}
		ss, err := (&jaegerquery.Client{Base: src.jaegerURL}).Trace(ctx, traceID)
		if err != nil {
			return err
		}
		for _, sp := range ss {
			if sp.TraceID == traceID {
				pick = append(pick, sp)
			}
		}
	} else {
		var err error
		pick, matches, note, err = src.pickTrace(fs.Name(), stderr, traceID, *requestID)
		if err != nil {
			return err
		}
	}
	if len(matches) > 1 {
		count := fmt.Sprint(len(matches))
		sort.Strings(matches)
		if len(matches) > maxListedTraces {
			count, matches = fmt.Sprintf("more than %d", maxListedTraces), append(matches[:maxListedTraces], "...")
		}
		return fmt.Errorf("%s traces hold request %q (runs that reuse the id): name one by its trace id: %s",
			count, sanitize.Display(*requestID, 128), strings.Join(matches, " "))
	}
	if pick == nil {
		return fmt.Errorf("trace not found")
	}
	var only []string
	if *requestID != "" {
		only = []string{*requestID}
	}
	n := tracetable.WriteWith(stdout, pick, tracetable.Options{Critical: *critical}, only...)
	if note != "" {
		fmt.Fprintf(stdout, "note: %s\n", note)
	}
	if n == 0 {
		if *requestID != "" {
			return fmt.Errorf("no %s span of request %q in trace %s", spans.RequestSpanName, sanitize.Display(*requestID, 128), sanitize.Display(pick[0].TraceID, 64))
		}
		return fmt.Errorf("no %s span in trace %s", spans.RequestSpanName, sanitize.Display(pick[0].TraceID, 64))
	}
	return nil
}

// pickTrace reads the -file for the trace table shows: the one named, the
// one holding the -request's request span, or the file's only trace. It
// holds at most -max-spans spans: a trace named is kept as it is read; a
// request's trace is found among the traces gathered as summary gathers
// them, and, when spans lay too far apart to be gathered, kept by a
// second reading of the file; the only trace is kept while the file is
// read, and the others are counted. It returns the trace, or the trace
// ids that hold the request when more than one does, and what it left
// out.
func (s *source) pickTrace(cmd string, stderr io.Writer, traceID, requestID string) ([]traceview.Span, []string, string, error) {
	var pick []traceview.Span
	kept := gathered{}
	over := 0
	keep := func(sp *traceview.Span) {
		if !kept.room(sp, s.maxSpans) {
			over++
			return
		}
		pick = append(pick, slim(sp))
		kept.spans = pick
	}
	overNote := func() string {
		if over == 0 {
			return ""
		}
		return fmt.Sprintf("%d spans of the trace beyond -max-spans %d not read", over, s.maxSpans)
	}
	switch {
	case traceID != "":
		err := s.readFile(cmd, stderr, func(ss []traceview.Span) {
			for i := range ss {
				if ss[i].TraceID == traceID {
					keep(&ss[i])
				}
			}
		})
		if len(pick) == 0 {
			pick = nil
		}
		return pick, nil, overNote(), err
	case requestID != "":
		// The trace ids of the request's spans are noted as they are read;
		// its trace is taken as the window hands it on.
		var ids []string
		w := newTraceWindow(s.maxSpans, func(tr []traceview.Span) {
			if pick == nil && len(ids) > 0 && tr[0].TraceID == ids[0] {
				pick = tr
			}
		})
		err := s.readFile(cmd, stderr, func(ss []traceview.Span) {
			for i := range ss {
				sp := &ss[i]
				if sp.Name == spans.RequestSpanName && sp.Str(string(attrs.RequestIDKey)) == requestID &&
					!slices.Contains(ids, sp.TraceID) && len(ids) <= maxListedTraces {
					ids = append(ids, sp.TraceID)
				}
			}
			w.add(ss)
		})
		w.flush()
		if err != nil || len(ids) != 1 || w.notes() == "" {
			return pick, ids, "", err
		}
		if !s.canReadTwice() {
			if pick == nil {
				return nil, ids, "", fmt.Errorf("the spans of request %q lie farther apart in the input than -max-spans %d: raise it, or read the file by its name", sanitize.Display(requestID, 128), s.maxSpans)
			}
			return pick, ids, w.notes() + " (read the file by its name to have the whole trace)", nil
		}
		// Spans were left out of the traces gathered, maybe of this one: a
		// second reading keeps this trace's, wherever they lie.
		pick = nil
		err = s.readFile(cmd, io.Discard, func(ss []traceview.Span) {
			for i := range ss {
				if ss[i].TraceID == ids[0] {
					keep(&ss[i])
				}
			}
		})
		return pick, ids, overNote(), err
	}
	// The file's only trace: kept as read; the others are counted.
	first, seen := "", false
	others := map[string]struct{}{}
	err := s.readFile(cmd, stderr, func(ss []traceview.Span) {
		for i := range ss {
			sp := &ss[i]
			switch {
			case !seen:
				first, seen = sp.TraceID, true
				keep(sp)
			case sp.TraceID == first:
				keep(sp)
			case len(others) < maxCountedTraces:
				others[sp.TraceID] = struct{}{}
			}
		}
	})
	if err != nil {
		return nil, nil, "", err
	}
	if n := len(others); n > 0 {
		count := fmt.Sprint(n + 1)
		if n >= maxCountedTraces {
			count = fmt.Sprintf("more than %d", maxCountedTraces)
		}
		return nil, nil, "", fmt.Errorf("%s traces: name one with a trace id or -request", count)
	}
	if len(pick) == 0 {
		pick = nil
	}
	return pick, nil, overNote(), nil
}

func runSummary(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("summary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	src := source{stdin: stdin}
	src.flags(fs)
	service := fs.String("service", "", "the service whose traces to summarise (with -jaeger)")
	since := fs.Duration("since", time.Hour, "how far back to look (with -jaeger)")
	limit := fs.Int("limit", 1000, "at most this many traces (with -jaeger)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if err := src.check(); err != nil {
		return err
	}
	// The summary holds its aggregates, never the spans: each trace is
	// added as soon as it is gathered.
	var sum traceview.Summary
	w := newTraceWindow(src.maxSpans, sum.Add)
	if src.jaegerURL != "" {
		if *service == "" {
			return usageError{"-service is needed with -jaeger"}
		}
		now := time.Now()
		ss, err := (&jaegerquery.Client{Base: src.jaegerURL}).Search(ctx, *service, now.Add(-*since), now.Add(time.Minute), *limit)
		if err != nil {
			return err
		}
		for _, tr := range traceview.ByTrace(ss) {
			sum.Add(tr)
		}
	} else {
		err := src.readFile(fs.Name(), stderr, w.add)
		w.flush()
		if err != nil {
			return err
		}
		if n := w.notes(); n != "" {
			fmt.Fprintf(stderr, "omnitrace summary: note: %s\n", n)
		}
	}
	if n := sum.Problems(); n > 0 {
		fmt.Fprintf(stderr, "omnitrace summary: %d spans had a problem (a shared span id, a parent loop or a chain too deep: counted as roots; an end before the start: not counted); omnitrace table notes each\n", n)
	}
	if sum.Requests() == 0 {
		return errors.New("no omni.request trace found")
	}
	if n := sum.Requests(); n == 1 {
		fmt.Fprintln(stdout, "1 request")
	} else {
		fmt.Fprintf(stdout, "%d requests\n", n)
	}
	sum.Write(stdout)
	return nil
}
