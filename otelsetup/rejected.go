// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"errors"
	"regexp"
	"strconv"
)

// A collector may accept a batch and still reject some of its spans (an
// OTLP partial success). The OTLP trace exporters then return an error
// whose every part is such a partial success, "OTLP partial success:
// MESSAGE (N spans rejected)", joined (errors.Join) and wrapped ("traces
// export: ..."): their error type is internal to them, so each part's own
// text is what can be read. The other spans of the batch did reach the
// collector.

// partialSuccessRe matches one partial success's own text. MESSAGE is the
// collector's and may hold anything, newlines and "(N spans rejected)"
// among it: the count is the one the exporter writes last.
var partialSuccessRe = regexp.MustCompile(`^OTLP partial success: (?s:.*)\((-?\d+) spans rejected\)$`)

// partialRejection returns the spans a collector rejected of a batch of n
// whose export returned err, when every part of err is a partial success:
// at most n (a collector's count is not trusted further; a negative one
// counts none). Any other part makes it a failed export.
func partialRejection(err error, n int) (uint64, bool) {
	var rejected uint64
	ok := true
	walkErrors(err, func(leaf error) {
		m := partialSuccessRe.FindStringSubmatch(leaf.Error())
		if m == nil {
			ok = false
			return
		}
		k, perr := strconv.ParseInt(m[1], 10, 64)
		switch {
		case perr != nil && m[1][0] != '-':
			k = int64(n) // beyond int64: more than the batch
		case perr != nil || k < 0:
			k = 0
		}
		rejected += min(uint64(k), uint64(n))
	})
	if !ok {
		return 0, false
	}
	return min(rejected, uint64(n)), true
}

// walkErrors calls leaf for each error of err's tree that wraps nothing.
func walkErrors(err error, leaf func(error)) {
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e != nil {
				walkErrors(e, leaf)
			}
		}
	default:
		if inner := errors.Unwrap(err); inner != nil {
			walkErrors(inner, leaf)
			return
		}
		leaf(err)
	}
}
