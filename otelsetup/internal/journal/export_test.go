// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"os"
	"sync/atomic"
	"time"
)

// heartbeat returns the last heartbeat stored.
func (j *Journal) heartbeat() time.Time {
	return time.Unix(0, int64(atomic.LoadUint64(j.word64(hdrHeartbeat))))
}

// die leaves the journal's file as the death of its process would: no
// Close, no cleanup; the lock is released with the descriptor.
func (j *Journal) die() {
	j.closed.Store(true)
	close(j.stop)
	<-j.done
	for i := range j.shards {
		j.shards[i].mu.Lock()
		defer j.shards[i].mu.Unlock()
	}
	j.defsMu.Lock()
	defer j.defsMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = unmap(j.mem)
	_ = j.f.Close()
}

// withAllocate injects the file allocation's outcome.
func withAllocate(f func(fd uintptr, size int64) error) Option {
	return optionFunc(func(c *config) { c.allocate = f })
}

// withNamedTemp prepares the file under a name, as where the file system
// cannot make a file without one.
func withNamedTemp() Option {
	return optionFunc(func(c *config) { c.namedTemp = true })
}

// withPrepared calls f once the file is allocated, before it is named.
func withPrepared(f func(*os.File)) Option {
	return optionFunc(func(c *config) { c.prepared = f })
}

// withCreated calls f once the named file is created, before it is
// locked.
func withCreated(f func()) Option {
	return optionFunc(func(c *config) { c.created = f })
}
