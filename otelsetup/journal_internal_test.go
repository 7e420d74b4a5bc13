// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func init() {
	observers[envJournalSize] = observeJournalSize
	observers[envJournalSync] = observeJournalSync
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// journalFor sets up with a journal in a temporary directory.
func journalFor(t *testing.T) *Telemetry {
	t.Helper()
	tel, err := Setup(context.Background(), WithSpanExporter(discardExporter{}), WithoutGlobal(),
		WithFallbackExporter(nil), WithJournal(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	if tel.journal == nil {
		t.Fatal("no journal")
	}
	return tel
}

// observeJournalSize: the file is allocated in full, within a quarter of
// the size asked (the header, and what does not fill a whole segment).
func observeJournalSize(t *testing.T, name, val string, want int64) {
	tel := journalFor(t)
	st, err := os.Stat(tel.journal.j.Path())
	if err != nil {
		t.Fatal(err)
	}
	if size := st.Size(); size > want<<20 || size < want<<20*3/4 {
		t.Errorf("%s=%s: a journal file of %d bytes, want at most %d and more than three quarters of it", name, val, size, want<<20)
	}
}

func observeJournalSync(t *testing.T, name, val string, want int64) {
	tel := journalFor(t)
	if got := tel.journal.j.SyncInterval(); got != time.Duration(want)*time.Millisecond {
		t.Errorf("%s=%s: the journal flushes every %v, want %sms", name, val, got, strconv.FormatInt(want, 10))
	}
}
