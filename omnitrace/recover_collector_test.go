// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// fakeCollector is an OTLP trace receiver on loopback, over HTTP and gRPC.
// It keeps every request it takes; with reject set it rejects that many
// spans of each request it takes (an OTLP partial success).
type fakeCollector struct {
	ptraceotlp.UnimplementedGRPCServer

	reject int64

	mu       sync.Mutex
	requests []ptrace.Traces

	http *httptest.Server
	grpc *grpc.Server
	addr string // the gRPC server's host:port
}

func newFakeCollector(t *testing.T, reject int64) *fakeCollector {
	t.Helper()
	c := &fakeCollector{reject: reject}
	c.http = httptest.NewServer(http.HandlerFunc(c.serveHTTP))
	t.Cleanup(c.http.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	c.grpc = grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(c.grpc, c)
	go func() { _ = c.grpc.Serve(ln) }()
	t.Cleanup(c.grpc.Stop)
	return c
}

// endpoint is the collector's URL for OTEL_EXPORTER_OTLP_ENDPOINT.
func (c *fakeCollector) endpoint(protocol string) string {
	if protocol == "grpc" {
		return "http://" + c.addr
	}
	return c.http.URL
}

func (c *fakeCollector) take(req ptraceotlp.ExportRequest) ptraceotlp.ExportResponse {
	td := ptrace.NewTraces()
	req.Traces().CopyTo(td)
	c.mu.Lock()
	c.requests = append(c.requests, td)
	c.mu.Unlock()
	resp := ptraceotlp.NewExportResponse()
	if c.reject > 0 {
		resp.PartialSuccess().SetRejectedSpans(min(c.reject, int64(td.SpanCount())))
		resp.PartialSuccess().SetErrorMessage("span too old for this collector")
	}
	return resp
}

func (c *fakeCollector) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	return c.take(req), nil
}

func (c *fakeCollector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	b, err := io.ReadAll(r.Body)
	req := ptraceotlp.NewExportRequest()
	if err == nil {
		err = req.UnmarshalProto(b)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := c.take(req).MarshalProto()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// received returns every request taken so far.
func (c *fakeCollector) received() []ptrace.Traces {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ptrace.Traces(nil), c.requests...)
}

// spanCount is the number of spans received, counted again when sent again.
func (c *fakeCollector) spanCount() int {
	n := 0
	for _, td := range c.received() {
		n += td.SpanCount()
	}
	return n
}
