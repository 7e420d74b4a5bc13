// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/jaegerquery"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/testbed/internal/fleet"
	"github.com/otelomni/otelomni/testbed/internal/jaeger/jaegertest"
)

// TestFleetBackendReadsTracesBackAfterRestart writes traces into the
// shipped backend (Badger), stops it, starts a new one on the same folder,
// and reads every trace back unchanged.
func TestFleetBackendReadsTracesBackAfterRestart(t *testing.T) {
	bin := jaegertest.Binary(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "badger")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func() *fleet.Backend {
		b, err := fleet.StartBackend(ctx, bin, store, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			b.Stop()
			if t.Failed() {
				t.Logf("backend's log:\n%s", b.Logs())
			}
		})
		return b
	}

	first := start()
	p := newProducer(t, "http://"+first.OTLPHTTP, "fleet-restart", 3)
	var ids []string
	for i := range 20 {
		mod := []string{attrs.ModalityImage, attrs.ModalityAudio}[i%2]
		ids = append(ids, p.send(t, synth(mod, time.Duration(100+i)*time.Millisecond, 5*time.Millisecond, nil)))
	}
	p.flush(t)
	made := p.spans()
	before := map[string]string{}
	for _, id := range ids {
		before[id] = readWhole(ctx, t, first.Client(), id, made[id])
	}
	first.Stop()

	second := start()
	for _, id := range ids {
		got, err := second.Client().Trace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if after := describe(got); after != before[id] {
			t.Errorf("trace %s after the restart:\n%s\nbefore:\n%s", id, after, before[id])
		}
	}
}

// readWhole waits until the backend has all want spans of trace id, and
// describes them.
func readWhole(ctx context.Context, t *testing.T, c *jaegerquery.Client, id string, want int) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := c.Trace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= want {
			if len(got) != want {
				t.Fatalf("trace %s: %d spans, want %d", id, len(got), want)
			}
			return describe(got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: %d of its %d spans after a minute", id, len(got), want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// describe is a trace's spans as text, in span id order: ids, names,
// times, request id.
func describe(ss []traceview.Span) string {
	lines := make([]string, 0, len(ss))
	for _, s := range ss {
		lines = append(lines, fmt.Sprintf("%s<-%s %s %d..%d %s", s.SpanID, s.ParentID, s.Name,
			s.Start.UnixNano(), s.End.UnixNano(), s.Str(string(attrs.RequestIDKey))))
	}
	sort.Strings(lines)
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}
