package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/internal/omnirecord"
	"github.com/otelomni/otelomni/otelsetup"
	"github.com/otelomni/otelomni/sanitize"
	"github.com/otelomni/otelomni/traceview"
)

// exportSetup builds the SDK for an import: spans to the OTLP/JSON file
// out, or where the OTEL_* variables say (to the console when none names
// an exporter or endpoint). Ids come from the records (see
// omnirecord.IDGenerator), and the resource is fixed (see fixedResource):
// importing the same input twice makes the same spans, byte for byte,
// which a backend stores once.
func exportSetup(ctx context.Context, out string, stdout io.Writer) (*otelsetup.Telemetry, string, error) {
	// An import is a batch job: wait for the exporter rather than drop,
	// and keep it busy with large batches from a queue deep enough that
	// reading seldom waits on one export. Both bound memory, whatever the
	// input's length; OTEL_BSP_* still win.
	batch := []sdktrace.BatchSpanProcessorOption{sdktrace.WithBlocking()}
	if os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE") == "" {
		batch = append(batch, sdktrace.WithMaxQueueSize(importQueueSize))
	}
	if os.Getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") == "" {
		batch = append(batch, sdktrace.WithMaxExportBatchSize(importBatchSize))
	}
	opts := []otelsetup.Option{
		otelsetup.WithServiceName("omnitrace"), otelsetup.WithoutGlobal(), otelsetup.WithoutMetrics(),
		otelsetup.WithBatchOptions(batch...),
		otelsetup.WithIDGenerator(omnirecord.IDGenerator()),
	}
	// Checked before an exporter of ours reads the environment: a
	// malformed endpoint is then reported once, without its password.
	if err := otelsetup.CheckEnvironment(); err != nil {
		return nil, "", err
	}
	res, err := importResource(ctx)
	if err != nil {
		return nil, "", err
	}
	var exp sdktrace.SpanExporter
	dest := out
	switch {
	case out != "":
		f, err := os.Create(out)
		if err != nil {
			return nil, "", err
		}
		exp = traceview.NewOTLPJSONExporter(f)
	case envNamesExporter():
		if client, ok := otlpClient(); ok {
			e, err := newProtoExporter(ctx, client, res)
			if err != nil {
				return nil, "", err
			}
			tel, err := otelsetup.Setup(ctx, append(opts, otelsetup.WithSpanExporter(e))...)
			if err != nil {
				_ = e.Shutdown(ctx)
			}
			return tel, describeExporter(), err
		}
		e, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, "", err
		}
		if autoexport.IsNoneSpanExporter(e) {
			tel, err := otelsetup.Setup(ctx, opts...)
			return tel, "none", err
		}
		exp, dest = e, describeExporter()
	default:
		e, err := stdouttrace.New(stdouttrace.WithWriter(stdout), stdouttrace.WithPrettyPrint())
		if err != nil {
			return nil, "", err
		}
		exp, dest = e, "the console (no OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_*ENDPOINT set)"
	}
	tel, err := otelsetup.Setup(ctx, append(opts, otelsetup.WithSpanExporter(fixedResource{exp, res}))...)
	if err != nil {
		_ = exp.Shutdown(ctx)
	}
	return tel, dest, err
}

// The import's batch processor: a queue of 8 192 spans (a few MiB) and
// batches of 2 048 spans (a few hundred KiB on the wire).
const (
	importQueueSize = 8192
	importBatchSize = 2048
)

// envNamesExporter reports whether the environment names where spans go.
func envNamesExporter() bool {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if strings.TrimSpace(os.Getenv(k)) != "" {
			return true
		}
	}
	return false
}

func describeExporter() string {
	kind := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if kind != "" && kind != "otlp" {
		return kind
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			// What is printed must not show a password or a token.
			return "otlp to " + traceview.Display(sanitize.URL(v, 256), 200)
		}
	}
	return "otlp"
}

// importResource is the resource of imported spans: service.name
// (OTEL_SERVICE_NAME, or "omnitrace") and OTEL_RESOURCE_ATTRIBUTES, and
// nothing of the process that imports: its host, pid and instance id would
// make every import's spans differ, and they describe the importer, not
// the engine that served the requests.
func importResource(ctx context.Context) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "omnitrace")),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("the resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return res, nil
}

// fixedResource exports spans with one resource in place of the tracer
// provider's.
type fixedResource struct {
	sdktrace.SpanExporter
	res *resource.Resource
}

func (f fixedResource) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(ss))
	for i, s := range ss {
		out[i] = withResource{s, f.res}
	}
	return f.SpanExporter.ExportSpans(ctx, out)
}

// ForceFlush flushes the wrapped exporter when it can.
func (f fixedResource) ForceFlush(ctx context.Context) error {
	if ff, ok := f.SpanExporter.(interface{ ForceFlush(context.Context) error }); ok {
		return ff.ForceFlush(ctx)
	}
	return nil
}

type withResource struct {
	sdktrace.ReadOnlySpan
	res *resource.Resource
}

func (s withResource) Resource() *resource.Resource { return s.res }
