//go:build linux

// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Open creates this process's journal file in dir (created, mode 0700, if
// missing), allocates it in full, maps it, and starts the heartbeat. The
// file is named omni-PID-RANDOM.journal and locked (flock) while the
// journal is open: [Recover] never reads a locked file, and two processes
// never share one. A directory that cannot hold the file (missing
// permission, a read-only file system, a full disk, a path that is not a
// directory) is an error naming it; nothing is left behind.
func Open(dir string, opts ...Option) (*Journal, error) {
	cfg, geo, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("journal: no directory given")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: directory %s: %w", dir, err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	base := fmt.Sprintf("omni-%d-%s", os.Getpid(), hex.EncodeToString(rnd[:]))
	// The file is prepared under a name Recover does not read, then renamed:
	// a reader never sees a journal without its header or its lock.
	tmp := filepath.Join(dir, "."+base+".tmp")
	path := filepath.Join(dir, base+suffix)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: cannot create a file in %s: %w", dir, err)
	}
	fail := func(err error) (*Journal, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, err
	}
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fail(fmt.Errorf("journal: locking %s: %w", tmp, err))
	}
	size := geo.fileSize()
	alloc := cfg.allocate
	if alloc == nil {
		alloc = allocate
	}
	if err := alloc(f.Fd(), int64(size)); err != nil {
		return fail(fmt.Errorf("journal: cannot allocate %d bytes for a journal in %s: %w", size, dir, err))
	}
	mem, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("journal: mapping %s: %w", tmp, err))
	}
	j := &Journal{cfg: cfg, geo: geo, path: path, f: f, mem: mem}
	j.init()
	j.writeHeader(time.Now())
	if err := os.Rename(tmp, path); err != nil {
		_ = syscall.Munmap(mem)
		return fail(fmt.Errorf("journal: naming %s: %w", path, err))
	}
	go j.background()
	return j, nil
}

// suffix names journal files; Recover reads no other.
const suffix = ".journal"

// allocate reserves the file's blocks, so that a full disk is an error
// here and never a SIGBUS when a page of the mapping is first written.
func allocate(fd uintptr, size int64) error {
	err := syscall.Fallocate(int(fd), 0, 0, size)
	if err == nil || !(errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)) {
		return err
	}
	// A file system without fallocate: write the zeros.
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		n, err := syscall.Pwrite(int(fd), zero[:min(int64(len(zero)), size-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// msync flushes the file: on Linux, fdatasync writes back the pages
// dirtied through a shared mapping as msync(MS_SYNC) would.
func (j *Journal) msync() error { return syscall.Fdatasync(int(j.f.Fd())) }

func unmap(b []byte) error { return syscall.Munmap(b) }

const supported = true

// tryLock takes f's lock if no live process holds it.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
