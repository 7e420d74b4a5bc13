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
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Open creates this process's journal file in dir (created, mode 0700, if
// missing), allocates it in full, maps it, and starts the heartbeat. The
// file is named omni-PID-RANDOM.journal and locked (flock) while the
// journal is open: [Recover] never reads a locked file, and two processes
// never share one. A directory that cannot hold the file (missing
// permission, a read-only file system, a full disk, a path that is not a
// directory) is an error naming it; nothing is left behind.
//
// The file is made without a name (O_TMPFILE), allocated, locked and
// given its header, and only then named: a process that dies in Open
// leaves nothing, and a reader never sees a journal without its header
// or its lock. Where the file system cannot make a file without a name,
// it is made as .omni-PID-RANDOM.tmp, locked at once, and renamed; one
// left by a death in Open is removed by the next [Recover] (counted in
// Unfinished).
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
	if !cfg.namedTemp {
		j, err := openUnnamed(dir, cfg, geo)
		if !errors.Is(err, errNoUnnamed) {
			return j, err
		}
	}
	return openNamed(dir, cfg, geo)
}

// errNoUnnamed: the file system cannot make a file without a name.
var errNoUnnamed = errors.New("journal: no O_TMPFILE")

// baseName returns a new journal's name without its suffix.
func baseName() string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("omni-%d-%s", os.Getpid(), hex.EncodeToString(rnd[:]))
}

// suffix names journal files.
const suffix = ".journal"

// tempPrefix and tempSuffix name the file a journal is prepared in where
// it cannot be made without a name; Recover removes a dead process's.
const (
	tempPrefix = ".omni-"
	tempSuffix = ".tmp"
)

func isTempName(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix) && len(name) > len(tempPrefix)+len(tempSuffix)
}

// openFlags are added to every open of a file Recover found: it never
// follows a symbolic link put in a journal's place, never waits on a
// FIFO, and leaves no descriptor to a program the process runs.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// openUnnamed makes the journal as a file without a name, then names it.
func openUnnamed(dir string, cfg config, geo geometry) (*Journal, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EISDIR), errors.Is(err, unix.EINVAL):
		return nil, errNoUnnamed
	case err != nil:
		return nil, fmt.Errorf("journal: cannot create a file in %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed journal)"))
	path := filepath.Join(dir, baseName()+suffix)
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: locking a new file in %s: %w", dir, err)
	}
	j, err := prepare(f, path, cfg, geo)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := link(fd, path); err != nil {
		j.abandon()
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
			return nil, errNoUnnamed // no /proc, and not allowed to link by descriptor
		}
		return nil, fmt.Errorf("journal: naming %s: %w", path, err)
	}
	go j.background()
	return j, nil
}

// link gives the file without a name open as fd the name path.
func link(fd int, path string) error {
	err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.ENOENT) {
		// No /proc: by descriptor, which needs CAP_DAC_READ_SEARCH.
		err = unix.Linkat(fd, "", unix.AT_FDCWD, path, unix.AT_EMPTY_PATH)
	}
	return err
}

// openNamed makes the journal as a file named .omni-PID-RANDOM.tmp,
// which Recover does not read as a journal, then renames it. The file is
// created and locked under a shared lock of the directory: Recover takes
// the directory's lock before it tells an unlocked one from a dead
// process's (see lockDir).
func openNamed(dir string, cfg config, geo geometry) (*Journal, error) {
	base := baseName()
	tmp := filepath.Join(dir, tempPrefix+base[len("omni-"):]+tempSuffix)
	path := filepath.Join(dir, base+suffix)
	d, err := lockDir(dir, syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o600)
	if err == nil && cfg.created != nil {
		cfg.created()
	}
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}
	_ = d.Close() // releases the directory's lock
	if err != nil {
		return nil, fmt.Errorf("journal: cannot create a file in %s: %w", dir, err)
	}
	j, err := prepare(f, path, cfg, geo)
	if err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		j.abandon()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("journal: naming %s: %w", path, err)
	}
	go j.background()
	return j, nil
}

// lockDir locks dir (flock, how: shared or exclusive, waiting for it
// unless LOCK_NB is given) and returns it open; closing it unlocks it.
// Processes making a named file hold it shared from the file's creation
// to its lock; Recover holds it exclusive while it looks at such a file.
func lockDir(dir string, how int) (*os.File, error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("journal: directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(d.Fd()), how); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("journal: locking directory %s: %w", dir, err)
	}
	return d, nil
}

// prepare allocates f, locked, in full, maps it and writes its header:
// the journal that will be named path once this returns.
func prepare(f *os.File, path string, cfg config, geo geometry) (*Journal, error) {
	fd := int(f.Fd())
	size := geo.fileSize()
	alloc := cfg.allocate
	if alloc == nil {
		alloc = allocate
	}
	if err := alloc(f.Fd(), int64(size)); err != nil {
		return nil, fmt.Errorf("journal: cannot allocate %d bytes for a journal in %s: %w", size, filepath.Dir(path), err)
	}
	if cfg.prepared != nil {
		cfg.prepared(f)
	}
	mem, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("journal: mapping the file of %s: %w", path, err)
	}
	j := &Journal{cfg: cfg, geo: geo, path: path, f: f, mem: mem}
	j.init()
	j.writeHeader(time.Now())
	return j, nil
}

// abandon undoes prepare: the file is unmapped and closed.
func (j *Journal) abandon() {
	_ = syscall.Munmap(j.mem)
	j.mem = nil
	_ = j.f.Close()
}

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

// The directory lock Recover takes, and its error when a process holds it.
const lockExclusiveNB = syscall.LOCK_EX | syscall.LOCK_NB

var errWouldBlock = syscall.EWOULDBLOCK
