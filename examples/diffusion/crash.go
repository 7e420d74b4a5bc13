// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// crashDemo runs the engine as a child process with a crash journal
// (otelsetup.WithJournal, through OTELOMNI_JOURNAL_DIR), which SIGKILLs
// itself as its fourth denoising loop starts, as the OOM killer would;
// then starts again on the same journal directory, as a restarted engine
// does, and shows the spans the journal kept: the killed requests, ended
// at the death with status Error.
func crashDemo(out io.Writer, cfg config) error {
	dir, err := os.MkdirTemp("", "otelomni-journal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "crash demo: an engine with its crash journal in %s, killed with SIGKILL mid-request\n\n", dir)
	child := exec.Command(self, "-crash-child", "-requests", fmt.Sprint(cfg.requests), "-concurrency", fmt.Sprint(cfg.concurrency),
		"-seed", fmt.Sprint(cfg.seed), "-scale", fmt.Sprint(cfg.scale))
	child.Env = append(os.Environ(), "OTELOMNI_JOURNAL_DIR="+dir, dieEnv+"=kill:4",
		// Each request is shown (exported) as soon as it ends.
		"OTEL_BSP_SCHEDULE_DELAY=10")
	child.Stdout, child.Stderr = out, io.Discard
	err = child.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("the engine was to be killed: %v", err)
	}
	fmt.Fprintf(out, "\nthe engine (pid %d) was killed with SIGKILL: no deferred call ran, its batch queue is lost\n", child.Process.Pid)
	fmt.Fprintf(out, "restarting on the same journal directory: the journal's spans of the killed process are exported\n\n")

	sink := &recovered{}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithFallbackExporter(sink),
		otelsetup.WithJournal(dir), otelsetup.WithServiceName("omni-diffusion-demo"))
	if err != nil {
		return err
	}
	// Shutdown waits for the recovery, which runs on its own goroutine.
	if err := tel.Shutdown(context.Background()); err != nil {
		return err
	}
	n, open := 0, 0
	for _, tr := range traceview.ByTrace(sink.spans) {
		if !hasRequest(tr) {
			continue
		}
		traceview.Waterfall(out, tr)
		for _, s := range tr {
			n++
			if s.Str(string(semconv.ErrorTypeKey)) == processDied {
				open++
			}
		}
	}
	fmt.Fprintf(out, "recovered %d spans (ExportStats.Recovered = %d), each with omni.recovered = true and its own ids;\n"+
		"%d were open at the death: ended at the journal's last heartbeat, status Error, error.type = %s\n",
		n, tel.ExportStats().Recovered, open, processDied)
	return nil
}

// processDied is the error.type of a span the crash journal recovered that
// was still open when its process died.
const processDied = "process_died"

func hasRequest(tr []traceview.Span) bool {
	for _, s := range tr {
		if s.Name == spans.RequestSpanName {
			return true
		}
	}
	return false
}

// recovered keeps the spans exported to it.
type recovered struct {
	mu    sync.Mutex
	spans []traceview.Span
}

func (r *recovered) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, traceview.FromSDK(ss)...)
	return nil
}

func (*recovered) Shutdown(context.Context) error { return nil }
