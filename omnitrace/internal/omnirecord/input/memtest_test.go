// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import "runtime"

// runtimeBytes measures the bytes a function allocates.
type runtimeBytes struct{}

func (runtimeBytes) during(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}
