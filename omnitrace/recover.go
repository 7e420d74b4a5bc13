// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/otelsetup"
)

// Exit statuses of recover (docs/omnitrace.md).
const (
	recoverOK      = 0 // every dead process's journal exported and removed
	recoverPartial = 1 // an export failed, spans were rejected or refused, or something was skipped or unreadable
	recoverUsage   = 2
	recoverLive    = 3 // only journals of processes still running are left
)

// recoverShutdown bounds the exporter's last flush.
const recoverShutdown = 10 * time.Second

// runRecover exports the spans journalled in DIR by processes that died
// (otelsetup.WithJournal, OTELOMNI_JOURNAL_DIR) and never confirmed
// exported, as the next start of the engine would, and removes their
// files.
func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "write the recovered spans to this OTLP/JSON file instead of exporting them")
	usageFail := func(msg string) int {
		fmt.Fprintf(stderr, "omnitrace recover: %s\n%s", sanitize.Display(msg, 1024), usage)
		return recoverUsage
	}
	if err := fs.Parse(args); err != nil {
		return recoverUsage
	}
	if fs.NArg() != 1 {
		return usageFail("give exactly one DIR, the engine's journal directory (OTELOMNI_JOURNAL_DIR)")
	}
	dir := fs.Arg(0)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageFail(fmt.Sprintf("%s is not a directory", dir))
	}
	// Before otelsetup's exporter reads the environment: a value not
	// valid is warned about once, and never seen by the exporter.
	ignoreInvalidEnv(stderr, recoverEnv)
	errs := &recoverLog{w: stderr}
	defer errs.close()
	otel.SetErrorHandler(errs)
	stderr = errs
	exp, dest, err := recoverExporter(ctx, *out)
	if err != nil {
		fmt.Fprintf(stderr, "omnitrace recover: %s\n", sanitize.Display(err.Error(), 1024))
		return recoverUsage
	}
	if exp == nil {
		// The spans leave the journal once exported: sending them nowhere
		// by default would lose them.
		return usageFail("name where the spans go: -out FILE, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER")
	}
	rep, rerr := otelsetup.Recover(ctx, dir, exp)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recoverShutdown)
	defer cancel()
	serr := exp.Shutdown(sctx)
	fmt.Fprintf(stdout, "recovered %d spans to %s: %d as they ended, %d open at the death (ended then, status Error, error.type=process_died); %d journal files read, %d removed\n",
		rep.Ended+rep.Open, dest, rep.Ended, rep.Open, rep.Files, rep.Removed)
	fmt.Fprintf(stdout, "of them: %d accepted, %d rejected by the collector (its reason on stderr), %d refused (times OTLP cannot carry); %d in batches that failed to export (left in the journal for the next recover)\n",
		rep.Exported, rep.Rejected, rep.Refused, rep.Failed)
	fmt.Fprintf(stdout, "skipped: %d torn stretches, %d corrupt records, %d unreadable files (left in place, named on stderr); %d unfinished files of processes that died making their journal (removed)\n",
		rep.Torn, rep.Corrupt, rep.Unreadable, rep.Unfinished)
	fmt.Fprintf(stdout, "left: %d journals of processes still running\n", rep.Live)
	if err := errors.Join(rerr, serr); err != nil {
		fmt.Fprintf(stderr, "omnitrace recover: %s\n", sanitize.Display(err.Error(), 4096))
		return recoverPartial
	}
	switch {
	case rep.Torn+rep.Corrupt+rep.Unreadable+rep.Rejected+rep.Refused+rep.Failed > 0:
		return recoverPartial
	case rep.Live > 0:
		return recoverLive
	}
	return recoverOK
}

// recoverLog is recover's stderr, and the OpenTelemetry error handler
// while it runs: what the exporters and otelsetup log (a collector's
// reason for rejecting spans, an export that failed), at most
// maxSDKErrors of them, one write at a time. Once closed, the handler
// logs as OpenTelemetry's default does.
type recoverLog struct {
	mu     sync.Mutex
	w      io.Writer
	n      int
	closed bool
}

func (l *recoverLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *recoverLog) Handle(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.n++; {
	case l.closed:
		log.Print(err)
	case l.n <= maxSDKErrors:
		fmt.Fprintf(l.w, "omnitrace recover: %s\n", sanitize.Display(err.Error(), 512))
	case l.n == maxSDKErrors+1:
		fmt.Fprintln(l.w, "omnitrace recover: more export errors not shown")
	}
}

func (l *recoverLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// recoverExporter is import's choice of exporter: an OTLP/JSON file with
// -out, else what the OTEL_* variables name (the SDK's OTLP exporter,
// which keeps each recovered span's own resource). It is nil when nothing
// names a destination.
func recoverExporter(ctx context.Context, out string) (sdktrace.SpanExporter, string, error) {
	switch {
	case out != "":
		f, err := os.Create(out)
		if err != nil {
			return nil, "", err
		}
		e, err := newFileExporter(ctx, f)
		if err != nil {
			_ = f.Close()
			return nil, "", err
		}
		return e, out, nil
	case os.Getenv("OTEL_TRACES_EXPORTER") != "" || endpointSet():
		// otelsetup's exporter: a collector's partial success is counted
		// from its answer, as in an engine.
		e, err := otelsetup.NewSpanExporter(ctx)
		if err != nil || e == nil {
			return nil, "", err
		}
		if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "console") {
			return e, "console", nil
		}
		return e, describeExporter(), nil
	}
	return nil, "", nil
}
