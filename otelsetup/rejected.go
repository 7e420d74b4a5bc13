// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"regexp"
	"strconv"
	"strings"
)

// A collector may accept a batch and still reject some of its spans (an
// OTLP partial success). The OTLP trace exporters then return an error
// whose only part is "OTLP partial success: MESSAGE (N spans rejected)"
// (their error type is internal to them, so its text is what can be read):
// the other spans of the batch did reach the collector.

// partialSuccessRe matches one partial success, as the exporters word it.
var partialSuccessRe = regexp.MustCompile(`^(?:traces export: )?OTLP partial success: .*\((\d+) spans rejected\)$`)

// partialRejection returns the spans a collector rejected of a batch of n
// whose export returned err, when err reports partial successes and
// nothing else: at most n (a collector's count is not trusted further).
// Any other error, or a message that spans lines, is a failed export.
func partialRejection(err error, n int) (uint64, bool) {
	var rejected uint64
	for _, part := range strings.Split(err.Error(), "\n") {
		m := partialSuccessRe.FindStringSubmatch(part)
		if m == nil {
			return 0, false
		}
		k, perr := strconv.ParseUint(m[1], 10, 64)
		if perr != nil {
			k = uint64(n)
		}
		rejected += min(k, uint64(n))
	}
	return min(rejected, uint64(n)), true
}
