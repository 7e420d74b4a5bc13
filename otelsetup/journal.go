// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/sanitize"
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
// the journal; the earlier processes' journals there are recovered all
// the same. The recovery runs on its own goroutine and never delays Setup
// or a request; it goes the way [Recover] goes, under the same rules and
// counts. [Telemetry.ForceFlush] and [Telemetry.Shutdown] wait for it
// within their deadlines, and [ExportStats] counts what it exported,
// what the collector rejected, what was refused for its times and what
// failed. See docs/reliability.md for what survives a death, a power
// loss and a full disk, and for the size and flush settings.
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
	// j is this process's journal; nil when it could not be opened, when
	// the earlier journals are recovered all the same.
	j *journal.Journal
	// mu serializes exports: the batch processor's and the recovery's go
	// to one exporter, which need not be safe for concurrent use.
	mu sync.Mutex

	// cancel cuts the recovery's export short; stop ends its waits
	// between passes.
	cancel   context.CancelFunc
	stop     chan struct{}
	stopOnce sync.Once
	first    chan struct{} // closed when the first pass returned
	done     chan struct{} // closed when the recovery returned
	// rexp is the recovery's way out, and its counts.
	rexp *recoveryExporter
	// wait returns a channel that receives after d: time.After, but for
	// tests.
	wait      func(d time.Duration) <-chan time.Time
	closeOnce sync.Once
	closeErr  error
}

// openJournal opens this process's journal in dir and starts the recovery
// of the dead processes' journals there, exporting through exp (behind a
// recoveryExporter of its own, whose counts are kept apart: the recovered
// spans were never handed to this process's batch processor). The
// recovery runs whether or not this process's journal opens: a journal
// that cannot open (the disk full of a dead process's journal) is
// logged, and its j is nil.
func openJournal(dir string, env *environ, exp sdktrace.SpanExporter, maxValue int) *crashJournal {
	ctx, cancel := context.WithCancel(context.Background())
	cj := &crashJournal{cancel: cancel, stop: make(chan struct{}), first: make(chan struct{}), done: make(chan struct{}), wait: recoverWait}
	j, err := journalOpen(dir, journalOptions(env)...)
	if err != nil {
		otel.Handle(fmt.Errorf("otelsetup: the crash journal is off: %w", err))
	} else {
		cj.j = j
	}
	cj.rexp = newRecoveryExporter(serialExporter{exp, &cj.mu}, maxValue)
	go cj.recover(ctx, dir)
	return cj
}

// journalOpen opens a journal; tests make it fail.
var journalOpen = journal.Open

// recoverRetries are the waits before the recovery looks again at journals
// whose process held their lock (one still dying when this one started,
// or one running beside it that may die meanwhile): about a minute in all.
var recoverRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}

// recoverWait is the recovery's wait between passes; tests wait on
// events instead.
var recoverWait = time.After

// recover makes the passes over dir: the first at once, then again after
// each wait while journals of processes other than this one are held.
// What one file does (unreadable, an export that failed) stops neither
// the pass nor the passes after it; each is logged once.
func (cj *crashJournal) recover(ctx context.Context, dir string) {
	defer close(cj.done)
	own := 0 // this process's journal, always live
	if cj.j != nil {
		own = 1
	}
	logged := ""
	for i := 0; ; i++ {
		rep, err := cj.rexp.recoverDir(ctx, dir)
		if i == 0 {
			close(cj.first)
		}
		if ctx.Err() != nil {
			return
		}
		if msg := recoveryProblem(dir, rep, err); msg != "" && msg != logged {
			otel.Handle(errors.New(msg))
			logged = msg
		}
		if rep.Live <= own || i == len(recoverRetries) {
			return
		}
		select {
		case <-cj.stop:
			return
		case <-cj.wait(recoverRetries[i]):
		}
	}
}

// recoveryProblem describes what of a pass went wrong, or returns "".
// A directory that does not exist holds nothing to recover.
func recoveryProblem(dir string, rep RecoveryReport, err error) string {
	if errors.Is(err, fs.ErrNotExist) && rep == (RecoveryReport{}) {
		return ""
	}
	if err == nil && rep.Rejected+rep.Refused+rep.Failed+rep.Unreadable == 0 {
		return ""
	}
	msg := fmt.Sprintf("otelsetup: recovering the crash journals in %s: %d spans exported, %d rejected by the collector, %d refused (times OTLP cannot carry), %d in batches that failed to export (left for the next start); %d files unreadable (left in place), %d torn stretches and %d corrupt records skipped",
		dir, rep.Exported, rep.Rejected, rep.Refused, rep.Failed, rep.Unreadable, rep.Torn, rep.Corrupt)
	if err != nil {
		msg += ": " + err.Error()
	}
	return sanitize.String(msg, maxRecoveryLog)
}

// maxRecoveryLog bounds a pass's log line, in bytes.
const maxRecoveryLog = 8 << 10

// addStats adds the recovery's counts to s.
func (cj *crashJournal) addStats(s *ExportStats) {
	c := cj.rexp.counts()
	s.Recovered, s.RecoveredRejected, s.RecoveredRefused, s.RecoveredFailed = c.exported, c.rejected, c.refused, c.failed
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
		if cj.j != nil {
			cj.closeErr = cj.j.Close()
		}
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
