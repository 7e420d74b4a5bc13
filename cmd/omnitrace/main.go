// Command omnitrace brings the timing that engines already write into
// traces, and reads traces back as the tables people read in a terminal.
//
//	omnitrace import [-out FILE] [-format F] [-start T] [-run NAME] [-tz ZONE] [FILE ...]
//	omnitrace import -follow [-checkpoint FILE] [-idle D] FILE
//	omnitrace table  (-jaeger URL | -file FILE) [-request ID] [TRACE_ID]
//	omnitrace summary (-jaeger URL -service NAME [-since 1h] | -file FILE)
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
// whatever the trace holds.
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
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/jaegerquery"
	"github.com/otelomni/otelomni/spans"
	"github.com/otelomni/otelomni/traceview"
)

const usage = `usage:
  omnitrace import [-out FILE] [-format auto|jsonl|summary|log] [-start T] [-run NAME] [-tz UTC] [FILE ...]
                                                      vLLM-Omni's summaries, logs or records to traces (stdin when no FILE)
  omnitrace import -follow [-checkpoint FILE] [-idle 10s] FILE
                                                      the same, as the engine appends to FILE
  omnitrace table  (-jaeger URL | -file FILE) [-request ID] [TRACE_ID]
  omnitrace summary (-jaeger URL -service NAME [-since 1h] | -file FILE)
  omnitrace recover [-out FILE] DIR                   export the spans a dead engine's crash journal holds
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
		err = runTable(ctx, args[1:], stdout, stderr)
	case "summary":
		err = runSummary(ctx, args[1:], stdout, stderr)
	case "recover":
		return runRecover(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "omnitrace: unknown command %q\n%s", traceview.Display(args[0], 64), usage)
		return 2
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "omnitrace %s: %s\n%s", args[0], traceview.Display(err.Error(), 1024), usage)
		return 2
	}
	if err != nil {
		// A backend's error page is other people's text: bounded, and
		// without the control characters that would drive the terminal.
		fmt.Fprintf(stderr, "omnitrace %s: %s\n", args[0], traceview.Display(err.Error(), 1024))
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// source reads traces from Jaeger or from an OTLP/JSON file.
type source struct {
	jaegerURL, file string
}

func (s *source) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.jaegerURL, "jaeger", "", "Jaeger query API base URL, such as http://127.0.0.1:16686")
	fs.StringVar(&s.file, "file", "", "an OTLP/JSON file (Jaeger's /api/v3 answer or an OTLP file exporter's output; - for stdin)")
}

func (s *source) check() error {
	if (s.jaegerURL == "") == (s.file == "") {
		return usageError{"give exactly one of -jaeger and -file"}
	}
	return nil
}

// readFile reads the -file. What cannot be read of it (a span with times
// OTLP cannot mean, a truncated last document, as a killed import leaves)
// is said on stderr, and what could be read is shown: the error is
// returned only when nothing could be.
func (s *source) readFile(cmd string, stderr io.Writer) ([]traceview.Span, error) {
	var r io.Reader = os.Stdin
	if s.file != "-" {
		f, err := os.Open(s.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	ss, err := traceview.ParseOTLPJSON(bufio.NewReader(r))
	if err != nil && len(ss) > 0 {
		fmt.Fprintf(stderr, "omnitrace %s: note: %s; the rest is shown\n", cmd, traceview.Display(strings.ReplaceAll(err.Error(), "\n", "; "), 1024))
		err = nil
	}
	return ss, err
}

func runTable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var src source
	src.flags(fs)
	requestID := fs.String("request", "", "pick the trace whose omni.request.id is this (with -file)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if err := src.check(); err != nil {
		return err
	}
	traceID := fs.Arg(0)
	var ss []traceview.Span
	var err error
	if src.jaegerURL != "" {
		if traceID == "" {
			return usageError{"a trace id is needed with -jaeger"}
		}
		ss, err = (&jaegerquery.Client{Base: src.jaegerURL}).Trace(ctx, traceID)
	} else {
		ss, err = src.readFile(fs.Name(), stderr)
	}
	if err != nil {
		return err
	}
	traces := traceview.ByTrace(ss)
	var pick []traceview.Span
	var matches []string
	for id, tr := range traces {
		switch {
		case traceID != "" && id == traceID:
			pick = tr
		case traceID == "" && *requestID != "":
			// The request span may hang under a gateway's span.
			for _, s := range tr {
				if s.Name == spans.RequestSpanName && s.Str(string(attrs.RequestIDKey)) == *requestID {
					pick = tr
					matches = append(matches, id)
					break
				}
			}
		case traceID == "" && len(traces) == 1:
			pick = tr
		}
	}
	if len(matches) > 1 {
		sort.Strings(matches)
		if len(matches) > 10 {
			matches = append(matches[:10], "...")
		}
		return fmt.Errorf("%d traces hold request %q (runs that reuse the id): name one by its trace id: %s",
			len(matches), traceview.Display(*requestID, 128), strings.Join(matches, " "))
	}
	if pick == nil {
		if traceID == "" && *requestID == "" && len(traces) > 1 {
			return fmt.Errorf("%d traces: name one with a trace id or -request", len(traces))
		}
		return fmt.Errorf("trace not found")
	}
	var only []string
	if *requestID != "" {
		only = []string{*requestID}
	}
	if traceview.Table(stdout, pick, only...) == 0 {
		if *requestID != "" {
			return fmt.Errorf("no %s span of request %q in trace %s", spans.RequestSpanName, traceview.Display(*requestID, 128), traceview.Display(pick[0].TraceID, 64))
		}
		return fmt.Errorf("no %s span in trace %s", spans.RequestSpanName, traceview.Display(pick[0].TraceID, 64))
	}
	return nil
}

func runSummary(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("summary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var src source
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
	var ss []traceview.Span
	var err error
	if src.jaegerURL != "" {
		if *service == "" {
			return usageError{"-service is needed with -jaeger"}
		}
		now := time.Now()
		ss, err = (&jaegerquery.Client{Base: src.jaegerURL}).Search(ctx, *service, now.Add(-*since), now.Add(time.Minute), *limit)
	} else {
		ss, err = src.readFile(fs.Name(), stderr)
	}
	if err != nil {
		return err
	}
	var sum traceview.Summary
	for _, tr := range traceview.ByTrace(ss) {
		sum.Add(tr)
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
