// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"errors"
	"fmt"
	"testing"
)

// TestAPartialSuccessIsReadAsItIsWorded: what the OTLP exporters return for
// a partial success counts the spans it names, at most the batch; any other
// error with it, or a message that spans lines, is a failed export.
func TestAPartialSuccessIsReadAsItIsWorded(t *testing.T) {
	partial := func(msg string) error { return errors.New("OTLP partial success: " + msg) }
	wrap := func(err error) error { return fmt.Errorf("traces export: %w", err) }
	for _, tc := range []struct {
		name     string
		err      error
		rejected uint64
		ok       bool
	}{
		{"as the exporters return it", wrap(errors.Join(nil, partial("span too old (2 spans rejected)"))), 2, true},
		{"none rejected", partial("empty message (0 spans rejected)"), 0, true},
		{"a count inside the message", wrap(partial("a (3 spans rejected) b (1 spans rejected)")), 1, true},
		{"newlines in the message", wrap(errors.Join(partial("line one\nline two\r\n (2 spans rejected)"))), 2, true},
		{"a forged part in the message", wrap(errors.Join(partial("a (999 spans rejected)\nOTLP partial success: b (0 spans rejected)"))), 0, true},
		{"two parts", errors.Join(partial("a (2 spans rejected)"), partial("b (1 spans rejected)")), 3, true},
		{"past int64", wrap(partial("x (99999999999999999999999 spans rejected)")), 5, true},
		{"past the batch", wrap(partial("x (7 spans rejected)")), 5, true},
		{"negative", wrap(partial("x (-3 spans rejected)")), 0, true},
		{"past int64, negative", wrap(partial("x (-99999999999999999999999 spans rejected)")), 0, true},
		{"with a failure", wrap(errors.Join(partial("x (2 spans rejected)"), errors.New("rpc error: code = Unavailable"))), 0, false},
		{"a failure", wrap(errors.New("context deadline exceeded")), 0, false},
		{"metric points", partial("x (2 metric data points rejected)"), 0, false},
	} {
		r, ok := partialRejection(tc.err, 5)
		if r != tc.rejected || ok != tc.ok {
			t.Errorf("%s: %q: %d, %v; want %d, %v", tc.name, tc.err, r, ok, tc.rejected, tc.ok)
		}
	}
}
