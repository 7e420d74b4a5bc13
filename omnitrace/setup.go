// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/otelenv"
	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
)

// export is where an import's spans go, and what its spans are made
// within.
type export struct {
	// pipe is nil when the environment turns tracing off.
	pipe   *pipe
	dest   string
	limits emit.Limits
	// sample is the environment's sampler's decision for a trace; nil
	// keeps every trace.
	sample func(trace.TraceID) bool
}

// exportSetup reads where an import's spans go from the standard OTEL_*
// variables (to the console when none names an exporter or endpoint), or
// to the OTLP/JSON file out, and what limits and sampler apply, as the
// SDK reads them. A value that is not valid is warned about on stderr and
// ignored (see checkEnv). Ids come from the records (see emit.Emitter),
// and the resource is fixed (see importResource): importing the same
// input twice makes the same spans, byte for byte, which a backend stores
// once.
func exportSetup(ctx context.Context, out string, stdout, stderr io.Writer) (*export, error) {
	// Before an OTLP client reads the environment: it never sees a value
	// ignored, and a malformed endpoint is reported once, without its
	// password.
	ignoreInvalidEnv(stderr, importEnv)
	res := importResource()
	x := &export{limits: spanLimits(), sample: sampler()}
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		x.dest = "none"
		return x, nil
	}
	var s sink
	switch kind := strings.ToLower(os.Getenv("OTEL_TRACES_EXPORTER")); {
	case out != "":
		f, err := os.Create(out)
		if err != nil {
			return nil, err
		}
		s, x.dest = newJSONSink(f, f), out
	case kind == "none":
		x.dest = "none"
		return x, nil
	case kind == "console":
		s, x.dest = newJSONSink(stdout, nil), "the console"
	case kind == "otlp" || endpointSet():
		o, err := newOTLPSink(ctx, otlpClient())
		if err != nil {
			return nil, err
		}
		s, x.dest = o, describeExporter()
	default:
		s, x.dest = newJSONSink(stdout, nil), importEnv.noExporter
	}
	set := batchSettings()
	set.resource = sanitize.KeyValues(res.Attributes(), 256, valueLengthLimit)
	set.resourceSchema = res.SchemaURL()
	x.pipe = newPipe(set, s)
	return x, nil
}

// The import's batches: a queue of 8 192 spans (a few MiB) and batches of
// 2 048 spans (a few hundred KiB on the wire), unless OTEL_BSP_* say
// otherwise; the SDK's schedule delay and export timeout.
const (
	importQueueSize = 8192
	importBatchSize = 2048
	scheduleDelay   = 5 * time.Second
	exportTimeout   = 30 * time.Second
)

// valueLengthLimit bounds string attribute values, in bytes, when no
// OTEL_*ATTRIBUTE_VALUE_LENGTH_LIMIT variable is set: otelsetup's default,
// so that an imported span is cut as an engine's is
// (TestImportCutsValuesAsOtelsetupDoes).
const valueLengthLimit = 4096

// batchSettings are the OTEL_BSP_* settings, as the SDK's batch span
// processor reads them, with the import's own defaults.
func batchSettings() pipeSettings {
	set := pipeSettings{
		queue:         envInt(importQueueSize, "OTEL_BSP_MAX_QUEUE_SIZE"),
		batch:         envInt(importBatchSize, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
		delay:         time.Duration(envInt(int(scheduleDelay/time.Millisecond), "OTEL_BSP_SCHEDULE_DELAY")) * time.Millisecond,
		exportTimeout: time.Duration(envInt(int(exportTimeout/time.Millisecond), "OTEL_BSP_EXPORT_TIMEOUT")) * time.Millisecond,
	}
	set.batch = min(set.batch, set.queue)
	return set
}

// spanLimits are the SDK's attribute limits, from the variables the SDK
// reads, with otelsetup's default value length.
func spanLimits() emit.Limits {
	return emit.Limits{
		Attributes:  envInt(sdktrace.DefaultAttributeCountLimit, "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
		ValueLength: envInt(valueLengthLimit, "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
	}
}

// sampler is OTEL_TRACES_SAMPLER's decision for an imported trace, whose
// request span is a root: a parent-based sampler decides as its root
// sampler. nil keeps every trace.
func sampler() func(trace.TraceID) bool {
	var s sdktrace.Sampler
	switch strings.ToLower(os.Getenv("OTEL_TRACES_SAMPLER")) {
	case "always_off", "parentbased_always_off":
		return func(trace.TraceID) bool { return false }
	case "traceidratio", "parentbased_traceidratio":
		ratio := 1.0
		if arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG"); isRatio(arg) == nil {
			ratio, _ = strconv.ParseFloat(arg, 64)
		}
		s = sdktrace.TraceIDRatioBased(ratio)
	default:
		return nil
	}
	return func(id trace.TraceID) bool {
		return s.ShouldSample(sdktrace.SamplingParameters{TraceID: id}).Decision == sdktrace.RecordAndSample
	}
}

// describeExporter describes where the OTLP client sends.
func describeExporter() string {
	if v := otlpValue("ENDPOINT"); v != "" {
		// What is printed must not show a password or a token.
		return "otlp to " + sanitize.Display(sanitize.URL(v, 256), 200)
	}
	return "otlp"
}

// importResource is the resource of imported spans: service.name
// (OTEL_SERVICE_NAME, or "omnitrace") and OTEL_RESOURCE_ATTRIBUTES, read
// as the SDK and otelsetup read it, and nothing of the process that
// imports: its host, pid and instance id would make every import's spans
// differ, and they describe the importer, not the engine that served the
// requests.
func importResource() *resource.Resource {
	kvs := []attribute.KeyValue{attribute.String("service.name", "omnitrace")}
	kvs = append(kvs, otelenv.ResourceAttributes(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), valueLengthLimit)...)
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		kvs = append(kvs, attribute.String("service.name", name))
	}
	return resource.NewSchemaless(kvs...) // for a key given twice, the last
}
