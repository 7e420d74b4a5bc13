// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package otelomni_test

import "time"

// processCPU reports that the process's CPU time cannot be read here.
func processCPU() (time.Duration, bool) { return 0, false }
