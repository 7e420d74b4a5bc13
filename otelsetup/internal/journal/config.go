// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"fmt"
	"os"
	"time"
)

// DefaultSize is the size of a journal file: 64 MiB holds about 150 000
// records of a typical phase span (about 220 bytes each, a start and an end
// per span), many seconds of a busy engine's spans. The file is allocated
// in full at Open, so a full disk is found then, not at a page fault.
const DefaultSize = 64 << 20

// DefaultHeartbeat is how often the journal stores the time: an open span
// recovered after a death ends at most this long before the process died.
const DefaultHeartbeat = time.Second

// DefaultValueLimit bounds, in bytes, every string a record holds (span
// and event names, attribute keys and values, the status description):
// the byte limit otelsetup's exporter applies, so a recovered span carries
// what the live path would have sent.
const DefaultValueLimit = 4096

// Bounds of the options.
const (
	minSize      = 2 << 20
	maxSize      = 1 << 30
	minInterval  = 10 * time.Millisecond
	maxInterval  = time.Hour
	minValue     = 16
	maxValueFrac = 8 // the value limit is at most an 8th of a record's bound
)

// Option configures [Open].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	size      int
	heartbeat time.Duration
	sync      time.Duration
	value     int

	// Faults and paths chosen by tests; zero in a program.
	allocate func(fd uintptr, size int64) error
	// namedTemp prepares the file under a name, as where the file system
	// cannot make one without a name.
	namedTemp bool
	// created is called once the named file is created, before it is
	// locked; prepared once the file is allocated, before it is named.
	created  func()
	prepared func(*os.File)
}

// WithSize sets the size of the journal file in bytes, from 2 MiB to
// 1 GiB ([DefaultSize] unless given). The file holds a header, a 64th for
// resources and scopes, and segments of 256 KiB to 8 MiB.
func WithSize(bytes int) Option {
	return optionFunc(func(c *config) { c.size = bytes })
}

// WithHeartbeat sets the heartbeat interval, from 10 ms to an hour
// ([DefaultHeartbeat] unless given).
func WithHeartbeat(d time.Duration) Option {
	return optionFunc(func(c *config) { c.heartbeat = d })
}

// WithSyncInterval makes the journal flush its file to the disk (msync)
// at this interval, from 10 ms to an hour, on its own goroutine: a power
// loss then costs at most the last interval's records. Without it (the
// default) the journal never flushes: what it wrote survives the death of
// the process, which leaves the kernel's page cache intact, but not a power
// loss or a kernel crash, which cost what the kernel had not yet written
// back (on Linux, about 30 s by default: vm.dirty_expire_centisecs).
func WithSyncInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.sync = d })
}

// WithValueLimit sets the bound of every string a record holds, in bytes
// ([DefaultValueLimit] unless given), from 16 to an 8th of the record
// bound (a quarter of a segment, at most 1 MiB). A longer string is cut at
// a UTF-8 boundary and counted in [Stats].CutStrings.
func WithValueLimit(bytes int) Option {
	return optionFunc(func(c *config) { c.value = bytes })
}

func newConfig(opts []Option) (config, geometry, error) {
	c := config{size: DefaultSize, heartbeat: DefaultHeartbeat, value: DefaultValueLimit}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.size < minSize || c.size > maxSize {
		return c, geometry{}, fmt.Errorf("journal: size %d bytes is out of range (%d to %d)", c.size, minSize, maxSize)
	}
	if c.heartbeat < minInterval || c.heartbeat > maxInterval {
		return c, geometry{}, fmt.Errorf("journal: heartbeat interval %v is out of range (%v to %v)", c.heartbeat, minInterval, maxInterval)
	}
	if c.sync != 0 && (c.sync < minInterval || c.sync > maxInterval) {
		return c, geometry{}, fmt.Errorf("journal: sync interval %v is out of range (0, or %v to %v)", c.sync, minInterval, maxInterval)
	}
	g := geometryFor(c.size)
	if top := g.maxPayload() / maxValueFrac; c.value < minValue || c.value > top {
		return c, geometry{}, fmt.Errorf("journal: value limit %d bytes is out of range (%d to %d for a journal of %d bytes)", c.value, minValue, top, c.size)
	}
	return c, g, nil
}
