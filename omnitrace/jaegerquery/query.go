// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package jaegerquery reads traces from a Jaeger query API (/api/v3) as
// the OTLP/JSON that Jaeger serves.
package jaegerquery

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// Client reads traces from a Jaeger query API.
type Client struct {
	// Base is the API's base URL, such as "http://127.0.0.1:16686".
	Base string
	HTTP *http.Client
}

func (c *Client) get(ctx context.Context, path string, q url.Values) ([]byte, int, error) {
	u := c.Base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	limit := int64(maxAnswer)
	if resp.StatusCode != http.StatusOK {
		// Only what an error message quotes: a proxy's 50 MB error page is
		// neither read nor echoed.
		limit = 4 * maxErrorBody
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return b, resp.StatusCode, err
}

// Trace returns the spans of one trace; none, and no error, when Jaeger
// does not have it (yet).
func (c *Client) Trace(ctx context.Context, traceID string) ([]traceview.Span, error) {
	b, code, err := c.get(ctx, "/api/v3/traces/"+url.PathEscape(traceID), nil)
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound {
		return nil, nil
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("jaeger: trace %s: HTTP %d: %s", sanitize.String(traceID, 64), code, body(b))
	}
	return readSpans(b)
}

// readSpans reads the spans of an answer: what could be read, and an
// error saying what could not.
func readSpans(b []byte) ([]traceview.Span, error) {
	var out []traceview.Span
	err := traceview.ReadOTLPJSON(bytes.NewReader(b), func(ss []traceview.Span) error {
		out = append(out, ss...)
		return nil
	})
	return out, err
}

// Search returns the spans of up to limit traces of service that started
// between from and to.
func (c *Client) Search(ctx context.Context, service string, from, to time.Time, limit int) ([]traceview.Span, error) {
	q := url.Values{
		"query.service_name":   {service},
		"query.start_time_min": {from.UTC().Format(time.RFC3339Nano)},
		"query.start_time_max": {to.UTC().Format(time.RFC3339Nano)},
		"query.num_traces":     {strconv.Itoa(limit)},
	}
	b, code, err := c.get(ctx, "/api/v3/traces", q)
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound {
		return nil, nil
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("jaeger: search %s: HTTP %d: %s", sanitize.String(service, 256), code, body(b))
	}
	return readSpans(b)
}

// maxAnswer bounds an answer read: the OTLP/JSON reader refuses a larger
// document (256 MiB) anyway.
const maxAnswer = 256 << 20

// maxErrorBody bounds the part of an error answer quoted in an error: a
// proxy's 50 MB error page is no message for a terminal.
const maxErrorBody = 512

// body returns an error answer's body fit for one line of a terminal.
func body(b []byte) string {
	return sanitize.String(string(b), maxErrorBody)
}
