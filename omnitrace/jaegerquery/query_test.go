// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package jaegerquery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestErrorAnswersAreBounded: a 52 MB error page from Jaeger, or a proxy
// before it, becomes a short error, and a hostile trace id neither.
func TestErrorAnswersAreBounded(t *testing.T) {
	page := strings.Repeat("<p>bad gateway</p>\xff", 52<<20/19)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	c := &Client{Base: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name string
		call func() error
	}{
		{"trace", func() error { _, err := c.Trace(ctx, strings.Repeat("x", 1<<20)); return err }},
		{"search", func() error {
			_, err := c.Search(ctx, strings.Repeat("s", 1<<20), time.Now().Add(-time.Hour), time.Now(), 10)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || len(err.Error()) > 1024 || !strings.Contains(err.Error(), "HTTP 502") {
				t.Errorf("error of %d bytes: %.200v", len(err.Error()), err)
			}
			if !strings.Contains(err.Error(), "bad gateway") || !utf8.ValidString(err.Error()) {
				t.Errorf("the error quotes the page's start, as valid UTF-8: %.200v", err)
			}
		})
	}
}
