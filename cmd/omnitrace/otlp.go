package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// otlpClient returns the OTLP client the environment names, as autoexport
// would choose it (OTEL_TRACES_EXPORTER unset or "otlp", and
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
// "http/protobuf", the default, or "grpc"), and false when the environment
// names anything else, which autoexport then builds. The client reads its
// endpoint, headers, TLS, compression and timeout from the same variables
// as the exporter autoexport would build.
func otlpClient() (otlptrace.Client, bool) {
	if k := os.Getenv("OTEL_TRACES_EXPORTER"); k != "" && k != "otlp" {
		return nil, false
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		return otlptracehttp.NewClient(), true
	case "grpc":
		return otlptracegrpc.NewClient(), true
	}
	return nil, false
}

// protoExporter is the import's OTLP exporter: what the SDK's OTLP
// exporter does, on the same client (so transport, retries, headers, TLS,
// compression and timeouts are the client's, set by the same OTEL_*
// variables), with a cheaper encoding of the spans.
//
// The SDK's exporter converts each span to OTLP messages (about thirty
// small objects per span) that the client then encodes. An import
// exports millions of spans in large batches, and that conversion and
// encoding cost more than reading the input did. protoExporter writes
// each batch's protobuf encoding itself, into one buffer kept from batch
// to batch (see appendResourceSpans), and hands it to the client as the
// content of one ResourceSpans message. Protobuf keeps and writes such
// content unchanged, so the request on the wire is field for field the
// one the SDK's exporter would send (a test compares the two).
//
// All spans of an import share one resource (see importResource); it is
// written once per batch, in place of the tracer provider's. The client's
// optional self-observability counts spans from the messages it is given;
// with this exporter it counts none.
type protoExporter struct {
	client  otlptrace.Client
	res     *resource.Resource
	stopped atomic.Bool

	mu  sync.Mutex // one export at a time: buf is reused
	buf []byte
}

var errExporterStopped = errors.New("the OTLP exporter is shut down")

func newProtoExporter(ctx context.Context, client otlptrace.Client, res *resource.Resource) (*protoExporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the OTLP client: %w", err)
	}
	return &protoExporter{client: client, res: res}, nil
}

// ExportSpans encodes ss and uploads them; an error is returned wrapped as
// the SDK's exporter wraps it. A batch holding a string that is not valid
// UTF-8 is refused whole and sent nowhere, as the SDK's exporter does.
func (e *protoExporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	if !slices.ContainsFunc(ss, func(s sdktrace.ReadOnlySpan) bool { return s != nil }) {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped.Load() {
		return errExporterStopped
	}
	buf, err := appendResourceSpans(e.buf[:0], e.res, ss)
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	e.buf = buf
	rs := &tracepb.ResourceSpans{}
	rs.ProtoReflect().SetUnknown(protoreflect.RawFields(e.buf))
	err = e.client.UploadTraces(ctx, []*tracepb.ResourceSpans{rs})
	if cap(e.buf) > 16<<20 {
		e.buf = nil // an unusually large batch must not pin its buffer for good
	}
	if err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown stops the client, within ctx's deadline: an export in flight
// is cut short (the client's Stop does that), and later exports fail.
func (e *protoExporter) Shutdown(ctx context.Context) error {
	if e.stopped.Swap(true) {
		return nil
	}
	return e.client.Stop(ctx)
}
