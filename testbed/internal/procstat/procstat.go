// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package procstat reads a process's CPU time and memory from /proc
// (Linux), for the tools that report what a load cost.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPU returns a process's user+system CPU time in clock ticks.
func CPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return u + s, nil
}

// Status returns one line's value of /proc/pid/status, such as VmHWM.
func Status(pid int, key string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			return strings.TrimSpace(strings.TrimPrefix(line, key))
		}
	}
	return "?"
}
