// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// newFileExporter returns the exporter of recover -out: the SDK's OTLP
// exporter, whose client writes each request it would send to f as OTLP/JSON
// instead. The spans in the file are what the exporter sends a collector,
// attribute by attribute, in the OpenTelemetry Collector's file exporter's
// form (pdata's encoding, one TracesData a line).
func newFileExporter(ctx context.Context, f *os.File) (*otlptrace.Exporter, error) {
	return otlptrace.New(ctx, &fileClient{f: f})
}

// fileClient is an otlptrace.Client that writes each request to a file
// and flushes it to the disk before it returns: a batch it took leaves the
// journal, so it must not wait in a buffer.
type fileClient struct {
	mu     sync.Mutex
	f      *os.File
	err    error // the first write's error: the file is then cut short
	closed bool
}

func (c *fileClient) Start(context.Context) error { return nil }

func (c *fileClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	if len(rss) == 0 {
		return nil
	}
	line, err := otlpJSON(rss)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return errors.New("the -out file is closed")
	case c.err != nil:
		return c.err
	}
	if _, err := c.f.Write(line); err != nil {
		c.err = fmt.Errorf("writing %s: %w", c.f.Name(), err)
		return c.err
	}
	if err := c.f.Sync(); err != nil {
		c.err = fmt.Errorf("flushing %s to the disk: %w", c.f.Name(), err)
	}
	return c.err
}

// otlpJSON is the export request of rss as one line of OTLP/JSON.
func otlpJSON(rss []*tracepb.ResourceSpans) ([]byte, error) {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rss})
	if err != nil {
		return nil, fmt.Errorf("encoding the spans: %w", err)
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		return nil, fmt.Errorf("decoding the spans: %w", err)
	}
	j, err := (&ptrace.JSONMarshaler{}).MarshalTraces(req.Traces())
	if err != nil {
		return nil, fmt.Errorf("writing the spans as OTLP/JSON: %w", err)
	}
	return append(j, '\n'), nil
}

func (c *fileClient) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return errors.Join(c.err, c.f.Close())
}
