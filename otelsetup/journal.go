// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/otelsetup/internal/journal"
)

// The crash journal's variables (docs/reliability.md, "The crash
// journal").
const (
	envJournalDir  = "OTELOMNI_JOURNAL_DIR"
	envJournalSize = "OTELOMNI_JOURNAL_SIZE_MIB"
	envJournalSync = "OTELOMNI_JOURNAL_SYNC_INTERVAL"
)

// Bounds of the journal's variables: the journal's own.
const (
	minJournalMiB  = 2
	maxJournalMiB  = 1024
	minJournalSync = 10
	maxJournalSync = 60 * 60 * 1000
	// maxPath is PATH_MAX less its NUL: a longer path no system call takes.
	maxPath = 4095
)

// WithJournal keeps a crash journal of spans in dir (created, mode 0700,
// if missing): every sampled span that starts, from any instrumentation on
// the provider, is recorded in a memory-mapped file of this process's own,
// and its end when it ends, until the exporter has accepted it. The spans
// of a process that died at once (SIGKILL, the OOM killer, a fatal runtime
// error) are exported at the next Setup with the same dir, or by
// `omnitrace recover DIR`: an ended one as it ended, one still open as
// ended at the death with status Error and error.type = process_died, each
// with omni.recovered = true and its own ids. OTELOMNI_JOURNAL_DIR, when
// set, wins over dir; an empty dir is ignored.
//
// The journal is on only when spans are exported. A directory Setup
// cannot hold the file in (no permission, read-only, a full disk) is
// logged through the OpenTelemetry error handler and tracing runs without
// the journal. The recovery of earlier processes' spans runs on its own
// goroutine and never delays Setup or a request; [Telemetry.ForceFlush]
// and [Telemetry.Shutdown] wait for it within their deadlines, and
// [ExportStats].Recovered counts what it exported. See
// docs/reliability.md for what survives a death, a power loss and a full
// disk, and for the size and flush settings.
func WithJournal(dir string) Option {
	return optionFunc(func(c *config) {
		if dir != "" {
			c.journalDir = dir
		}
	})
}

// isJournalDir checks OTELOMNI_JOURNAL_DIR: an absolute path (a relative
// one would depend on where the engine was started from) that a system
// call takes, naming a directory or nothing yet. Whether the file can be
// made there is known only when Setup makes it.
func isJournalDir(v string) error {
	if !filepath.IsAbs(v) {
		return errors.New("want an absolute path")
	}
	if len(v) > maxPath {
		return fmt.Errorf("a path longer than %d bytes, which the system does not take", maxPath)
	}
	st, err := os.Stat(v)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil // made by Setup
	case err != nil:
		return errors.New("cannot be reached (a part of the path is not a directory, or not readable)")
	case !st.IsDir():
		return errors.New("not a directory")
	}
	return nil
}

// journalOptions are the journal's settings from the environment.
func journalOptions(env *environ) []journal.Option {
	var opts []journal.Option
	if n, ok := env.nums[envJournalSize]; ok {
		opts = append(opts, journal.WithSize(int(n)<<20))
	}
	if _, ok := env.nums[envJournalSync]; ok {
		opts = append(opts, journal.WithSyncInterval(env.duration(0, envJournalSync)))
	}
	return opts
}

// crashJournal is the journal of a Telemetry, and the recovery of the
// directory's earlier journals.
type crashJournal struct {
	j *journal.Journal
	// mu serializes exports: the batch processor's and the recovery's go
	// to one exporter, which need not be safe for concurrent use.
	mu sync.Mutex

	// cancel cuts the recovery's export short; stop ends its waits
	// between passes.
	cancel    context.CancelFunc
	stop      chan struct{}
	stopOnce  sync.Once
	first     chan struct{} // closed when the first pass returned
	done      chan struct{} // closed when the recovery returned
	recovered atomic.Uint64
	// rcounts are the recovery's export counts: the spans a collector
	// rejected of it are not counted recovered.
	rcounts   *exportCounts
	closeOnce sync.Once
	closeErr  error
}

// openJournal opens this process's journal in dir and starts the recovery
// of the dead processes' journals there, exporting through exp (wrapped in
// a safe exporter of its own, whose counts are kept apart: the recovered
// spans were never handed to this process's batch processor). It returns
// nil, logged, when the journal cannot be opened.
func openJournal(dir string, env *environ, exp sdktrace.SpanExporter, maxValue int) *crashJournal {
	j, err := journal.Open(dir, journalOptions(env)...)
	if err != nil {
		otel.Handle(fmt.Errorf("otelsetup: the crash journal is off: %w", err))
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cj := &crashJournal{j: j, cancel: cancel, stop: make(chan struct{}), first: make(chan struct{}), done: make(chan struct{})}
	cj.rcounts = &exportCounts{}
	rexp := &safeExporter{exp: serialExporter{exp, &cj.mu}, c: cj.rcounts, maxValue: maxValue}
	go cj.recover(ctx, dir, rexp)
	return cj
}

// recoverRetries are the waits before the recovery looks again at journals
// whose process held their lock (one still dying when this one started,
// or one running beside it that may die meanwhile): about a minute in all.
var recoverRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}

func (cj *crashJournal) recover(ctx context.Context, dir string, exp sdktrace.SpanExporter) {
	defer close(cj.done)
	for i := 0; ; i++ {
		rep, err := journal.Recover(ctx, dir, exp)
		cj.recovered.Add(uint64(rep.Ended + rep.Open))
		if i == 0 {
			close(cj.first)
		}
		if err != nil && ctx.Err() == nil {
			otel.Handle(fmt.Errorf("otelsetup: recovering the crash journals in %s (%d spans exported, %d files unreadable, %d torn stretches and %d corrupt records skipped): %w",
				dir, rep.Ended+rep.Open, rep.Unreadable, rep.Torn, rep.Corrupt, err))
		}
		// This process's own journal is always live; a failed export is
		// tried again at the next start, not in a loop here.
		if rep.Live <= 1 || err != nil || i == len(recoverRetries) {
			return
		}
		t := time.NewTimer(recoverRetries[i])
		select {
		case <-cj.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// waitRecovery waits until the recovery's first pass returned, or ctx is
// done.
func (cj *crashJournal) waitRecovery(ctx context.Context) error {
	select {
	case <-cj.first:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("otelsetup: the recovery of crash journals did not finish: %w", ctx.Err())
	}
}

// stopRecovery ends the recovery: a pass in progress may finish until ctx
// is done, then its export is cut short. It returns once the recovery has
// returned (at once after the cut: an exporter honours its context), or
// when ctx is done.
func (cj *crashJournal) stopRecovery(ctx context.Context) {
	cj.stopOnce.Do(func() { close(cj.stop) })
	select {
	case <-cj.done:
		return
	case <-ctx.Done():
	}
	cj.cancel()
}

// close closes the journal, after the tracer provider's Shutdown, whose
// last export confirms the last spans.
func (cj *crashJournal) close() error {
	cj.closeOnce.Do(func() {
		cj.stopOnce.Do(func() { close(cj.stop) })
		cj.cancel()
		cj.closeErr = cj.j.Close()
	})
	return cj.closeErr
}

// serialExporter makes one export at a time through exp.
type serialExporter struct {
	exp sdktrace.SpanExporter
	mu  *sync.Mutex
}

func (s serialExporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exp.ExportSpans(ctx, ss)
}

func (s serialExporter) Shutdown(ctx context.Context) error { return s.exp.Shutdown(ctx) }

// ForceFlush flushes the wrapped exporter when it can.
func (s serialExporter) ForceFlush(ctx context.Context) error {
	if f, ok := s.exp.(interface{ ForceFlush(context.Context) error }); ok {
		return f.ForceFlush(ctx)
	}
	return nil
}
