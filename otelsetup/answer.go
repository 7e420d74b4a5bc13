// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// A collector may accept a batch and still reject some of its spans (an
// OTLP partial success): the other spans did reach it. The OTLP trace
// exporters then return an error whose partial success is of a type
// internal to them, and they report the rejected spans in their
// self-observability metrics only in total, through the global meter
// provider, behind OTEL_GO_X_OBSERVABILITY. What a program can read is the
// collector's answer itself, the ExportTraceServiceResponse: the
// exporters Setup builds read it through the hooks they offer (an HTTP
// client's transport, a gRPC interceptor), on the goroutine of the export
// and under its context, into that export's answer.

// answer is the collector's answer to one export: whether it accepted the
// batch, and how many spans of it it rejected. The exporter's transport
// sets it for each attempt; the last attempt's is the export's.
type answer struct {
	accepted atomic.Bool
	rejected atomic.Int64
}

type answerKey struct{}

// withAnswer returns ctx carrying a new answer for the export made with
// it.
func withAnswer(ctx context.Context) (context.Context, *answer) {
	a := &answer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

func answerFrom(ctx context.Context) *answer {
	a, _ := ctx.Value(answerKey{}).(*answer)
	return a
}

// maxAnswer bounds the answer read, as the OTLP HTTP exporter bounds it
// (otlptracehttp's default MaxResponseSize): a longer one the exporter
// refuses too.
const maxAnswer = 4 << 20

// The content types of an answer, as the OTLP HTTP exporter reads them.
const (
	contentTypeProto = "application/x-protobuf"
	contentTypeJSON  = "application/json"
)

// answerTransport reads the collector's answer to an OTLP/HTTP export
// before the exporter does, and hands the exporter the same bytes.
type answerTransport struct{ base http.RoundTripper }

func (t answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a := answerFrom(req.Context())
	if a != nil {
		a.accepted.Store(false)
	}
	resp, err := t.base.RoundTrip(req)
	if a == nil || err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if rerr != nil || len(b) > maxAnswer {
		// The exporter reads what is left, and fails the export.
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(b), errReader{rerr}, resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body = readCloser{bytes.NewReader(b), resp.Body}
	var msg coltracepb.ExportTraceServiceResponse
	if len(b) > 0 {
		// The exporter decodes these two, and takes any other answer as
		// a full success.
		switch resp.Header.Get("Content-Type") {
		case contentTypeProto:
			err = proto.Unmarshal(b, &msg)
		case contentTypeJSON:
			err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, &msg)
		}
	}
	if err == nil {
		a.rejected.Store(msg.GetPartialSuccess().GetRejectedSpans())
		a.accepted.Store(true)
	}
	return resp, nil
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// errReader returns err, if any, once the bytes before it are read.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}

// answerInterceptor reads the collector's answer to an OTLP/gRPC export.
func answerInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	a := answerFrom(ctx)
	if a != nil {
		a.accepted.Store(false)
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if resp, ok := reply.(*coltracepb.ExportTraceServiceResponse); ok && a != nil && err == nil {
		a.rejected.Store(resp.GetPartialSuccess().GetRejectedSpans())
		a.accepted.Store(true)
	}
	return err
}
