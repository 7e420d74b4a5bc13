// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/otelomni/otelomni/internal/plan"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelomni/otelomni/otelomni"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/spans"
)

// TestABatchOfTheMostMembersKeepsEveryLink: by default Setup keeps as many
// links on a span as otelomni makes on a batch (1024 members), where the
// SDK's own default (128) would evict the first members' links and leave
// their execs linking a batch that no longer links them.
func TestABatchOfTheMostMembersKeepsEveryLink(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_LOGS_EXPORTER", "none")
	exp := tracetest.NewInMemoryExporter()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	in := otelomni.New(otelomni.WithTracerProvider(tel.TracerProvider()))
	const members = 1024
	reqs := make([]*otelomni.Request, members)
	execs := make([]otelomni.ActivePhase, members)
	for i := range reqs {
		ctx, req := in.Start(context.Background(), otelomni.RequestInfo{ID: strconv.Itoa(i)})
		reqs[i], execs[i] = req, req.StartPhase(ctx, spans.Exec)
	}
	b := in.StartBatch(context.Background(), otelomni.BatchInfo{ID: "b"}, reqs...)
	for i := range reqs {
		execs[i].End(nil)
		reqs[i].End(nil)
	}
	b.End(nil)
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range exp.GetSpans() {
		if s.Name == plan.BatchSpanName {
			if len(s.Links) != members || s.DroppedLinks != 0 {
				t.Fatalf("the batch keeps %d links (%d dropped), want all %d", len(s.Links), s.DroppedLinks, members)
			}
			return
		}
	}
	t.Fatal("no batch span exported")
}
