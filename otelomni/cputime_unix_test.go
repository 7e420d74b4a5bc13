// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package otelomni_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, every thread's
// (user and system), or false where it cannot be read.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
