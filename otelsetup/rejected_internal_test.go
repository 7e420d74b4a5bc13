// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"errors"
	"testing"
)

// TestAPartialSuccessIsReadAsItIsWorded: what the OTLP exporters return for
// a partial success counts the spans it names, at most the batch; any other
// error with it, or a message that spans lines, is a failed export.
func TestAPartialSuccessIsReadAsItIsWorded(t *testing.T) {
	for _, tc := range []struct {
		err      string
		n        int
		rejected uint64
		ok       bool
	}{
		{"traces export: OTLP partial success: span too old (2 spans rejected)", 5, 2, true},
		{"OTLP partial success: empty message (0 spans rejected)", 5, 0, true},
		{"traces export: OTLP partial success: a (3 spans rejected) b (1 spans rejected)", 5, 1, true},
		{"traces export: OTLP partial success: x (99999999999999999999999 spans rejected)", 5, 5, true},
		{"traces export: OTLP partial success: x (7 spans rejected)", 5, 5, true},
		{"traces export: OTLP partial success: x (2 spans rejected)\nrpc error: code = Unavailable", 5, 0, false},
		{"traces export: OTLP partial success: line one\nline two (2 spans rejected)", 5, 0, false},
		{"traces export: context deadline exceeded", 5, 0, false},
		{"OTLP partial success: x (2 metric data points rejected)", 5, 0, false},
	} {
		r, ok := partialRejection(errors.New(tc.err), tc.n)
		if r != tc.rejected || ok != tc.ok {
			t.Errorf("%q of %d: %d, %v; want %d, %v", tc.err, tc.n, r, ok, tc.rejected, tc.ok)
		}
	}
}
