package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/omnirecord"
	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/traceview"
)

// maxLine bounds one record line (a request of a hundred stages fits in a
// tenth of it); a longer one is reported and skipped unread.
const maxLine = 1 << 20

func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the traces to this OTLP/JSON file instead of exporting them")
	if err := fs.Parse(args); err != nil {
		return 2
	}

	opts := []otelsetup.Option{
		otelsetup.WithServiceName("omnitrace"), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics(),
		// An import is a batch job: wait for the exporter rather than drop.
		otelsetup.WithBatchOptions(sdktrace.WithBlocking()),
	}
	var file *fileExporter
	if *out != "" {
		file = &fileExporter{}
		opts = append(opts, otelsetup.WithSpanExporter(file))
	} else {
		console, err := stdouttrace.New(stdouttrace.WithWriter(stdout), stdouttrace.WithPrettyPrint())
		if err != nil {
			fmt.Fprintf(stderr, "omnitrace import: %v\n", err)
			return 1
		}
		opts = append(opts, otelsetup.WithFallbackExporter(console))
	}
	tel, err := otelsetup.Setup(ctx, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "omnitrace import: %v\n", err)
		return 1
	}
	if !tel.Enabled() {
		fmt.Fprintln(stderr, "omnitrace import: the environment turns tracing off (OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none): nothing will be exported")
	}
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()), otelomni.WithMeterProvider(metricnoop.NewMeterProvider()))

	imported, skipped := 0, 0
	readAll := func(name string, r io.Reader) {
		br := bufio.NewReaderSize(r, 64<<10)
		for n := 1; ; n++ {
			line, tooLong, err := readLine(br)
			if len(bytes.TrimSpace(line)) > 0 || tooLong {
				switch {
				case tooLong:
					fmt.Fprintf(stderr, "%s:%d: line longer than %d bytes; skipped\n", name, n, maxLine)
					skipped++
				default:
					if perr := importLine(ctx, in, line); perr != nil {
						fmt.Fprintf(stderr, "%s:%d: %v; skipped\n", name, n, perr)
						skipped++
					} else {
						imported++
					}
				}
			}
			if err != nil {
				if err != io.EOF {
					fmt.Fprintf(stderr, "%s: %v\n", name, err)
					skipped++
				}
				return
			}
		}
	}
	if fs.NArg() == 0 {
		readAll("stdin", stdin)
	}
	for _, name := range fs.Args() {
		if name == "-" {
			readAll("stdin", stdin)
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "omnitrace import: %v\n", err)
			skipped++
			continue
		}
		readAll(name, f)
		f.Close()
	}
	if err := tel.Shutdown(ctx); err != nil {
		fmt.Fprintf(stderr, "omnitrace import: export: %v\n", err)
		return 1
	}
	if file != nil {
		if err := file.write(*out); err != nil {
			fmt.Fprintf(stderr, "omnitrace import: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "omnitrace import: imported %d, skipped %d (to %s)\n", imported, skipped, destination(*out, tel))
	if skipped > 0 {
		return 1
	}
	return 0
}

func destination(out string, tel *otelsetup.Telemetry) string {
	if out != "" {
		return out
	}
	return tel.Exporter()
}

// importLine parses one record and makes its trace. A record is checked
// whole before any span is made, so a bad line makes no span at all.
func importLine(ctx context.Context, in *otelomni.Instrumenter, line []byte) error {
	rec, err := omnirecord.Parse(line)
	if err != nil {
		return err
	}
	return rec.Emit(ctx, in, time.Time{})
}

// readLine reads one line of any length up to maxLine; a longer one is
// drained and reported.
func readLine(r *bufio.Reader) ([]byte, bool, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if len(line)+len(chunk) > maxLine {
			for isPrefix && err == nil {
				_, isPrefix, err = r.ReadLine()
			}
			return nil, true, err
		}
		line = append(line, chunk...)
		if !isPrefix || err != nil {
			return line, false, err
		}
	}
}

// fileExporter keeps the spans and writes them as OTLP/JSON at the end.
type fileExporter struct {
	mu    sync.Mutex
	spans []traceview.Span
}

func (f *fileExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spans = append(f.spans, traceview.FromSDK(ss)...)
	return nil
}

func (f *fileExporter) Shutdown(context.Context) error { return nil }

func (f *fileExporter) write(path string) error {
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := traceview.WriteOTLPJSON(w, f.spans); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
