// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/input"
)

// checkpoint is where a followed file was read up to: the file (its device
// and inode, which a rotation changes), the offset to read it again from
// (the first record of the oldest request still held, or of a record not
// yet read whole), the requests already exported whose records lie after
// that offset (each with where its records lie, so that a new request
// reusing an id is not taken for it), and the form the file was found in.
type checkpoint struct {
	Version int          `json:"version"`
	Dev     uint64       `json:"dev"`
	Ino     uint64       `json:"ino"`
	Offset  int64        `json:"offset"`
	Next    int64        `json:"next"`
	Format  string       `json:"format,omitempty"`
	Done    []input.Done `json:"done,omitempty"`
	// Line is the number of lines before Offset.
	Line int `json:"line,omitempty"`
	// Head is a digest of the file's first HeadLen bytes: a file deleted
	// and made again may take the old one's inode, and is not the old one.
	Head    string `json:"head,omitempty"`
	HeadLen int64  `json:"head_len,omitempty"`
	// Stream: the file is a pipe (or another file that is no regular
	// one), which cannot be read again: no offset is kept, and the
	// requests it names, exported already, match no record read again.
	Stream bool `json:"stream,omitempty"`
}

// headLen is how much of the file's head its fingerprint covers.
const headLen = 4096

// head returns the digest of f's first n bytes.
func head(f *os.File, n int64) (string, error) {
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// checkpointV1 is the form an earlier version wrote: the ids exported,
// without where their records lie.
type checkpointV1 struct {
	Done []string `json:"done"`
}

// maxCheckpoint bounds a checkpoint file read back: what a checkpoint
// holds is bounded too (at most 4 096 requests exported, each id at most
// a few hundred bytes).
const maxCheckpoint = 16 << 20

// checkpointVersion is the version of what save writes.
const checkpointVersion = 2

func loadCheckpoint(path string) (checkpoint, error) {
	var cp checkpoint
	if path == "" {
		return cp, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return cp, nil
	}
	if err != nil {
		return cp, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCheckpoint))
	if err != nil {
		return cp, err
	}
	var head struct {
		Version int `json:"version"`
	}
	bad := fmt.Errorf("checkpoint %s is not one this version wrote", filepath.Base(path))
	if err := json.Unmarshal(b, &head); err != nil {
		return checkpoint{}, bad
	}
	switch head.Version {
	case 1:
		// Every id exported stands for the whole stretch read again.
		var v1 checkpointV1
		var rest struct {
			Dev, Ino     uint64
			Offset, Next int64
		}
		if json.Unmarshal(b, &v1) != nil || json.Unmarshal(b, &rest) != nil {
			return checkpoint{}, bad
		}
		cp = checkpoint{Version: 1, Dev: rest.Dev, Ino: rest.Ino, Offset: rest.Offset, Next: rest.Next}
		for _, id := range v1.Done {
			cp.Done = append(cp.Done, input.Done{Key: input.DoneKey(id), First: 0, Last: rest.Next})
		}
	case checkpointVersion:
		if err := json.Unmarshal(b, &cp); err != nil {
			return checkpoint{}, bad
		}
	default:
		return checkpoint{}, bad
	}
	if cp.Offset < 0 || cp.Next < cp.Offset || cp.HeadLen < 0 || cp.HeadLen > headLen || cp.HeadLen > cp.Offset || cp.Line < 0 {
		return checkpoint{}, bad
	}
	return cp, nil
}

// save writes the checkpoint so that a crash leaves the old one or the
// new one, never half of one.
func (cp checkpoint) save(path string) error {
	if path == "" {
		return nil
	}
	cp.Version = checkpointVersion
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync() // on disk before it replaces the old one
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// checkpointError ends a -follow whose checkpoint could not be saved: the
// requests it held are not exported (a restart reads them again from the
// last checkpoint saved), and it says how many, with those exported since
// that checkpoint, which a restart exports again.
type checkpointError struct {
	path      string
	err       error
	held      int
	sinceSave int
}

func (e *checkpointError) Error() string {
	return fmt.Sprintf("stopped: the checkpoint %s cannot be saved: %v", e.path, e.err)
}

// report says what the stop left undone.
func (e *checkpointError) report(w io.Writer) {
	fmt.Fprintf(w, "omnitrace import: requests held, not exported: %d; exported since the last checkpoint saved: %d (a restart from that checkpoint, or from the file's start with none, reads the first again, and exports the second again)\n", e.held, e.sinceSave)
}

func fileID(fi os.FileInfo) (uint64, uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}

// follow reads path as the engine appends to it: complete lines as they
// come, a rotated file to its end before the new one from its start, a
// truncated file again from its start. Requests are exported once
// complete and settled, or idle; the position is saved to the checkpoint
// every second and on the way out, and read back at start, so that a
// restart neither loses a request nor exports one twice. It returns when
// ctx is done.
func follow(ctx context.Context, path string, fl importFlags, opts input.Options, im *importer) error {
	im.mu.Lock()
	im.name = path
	im.mu.Unlock()
	cp, err := loadCheckpoint(fl.checkpoint)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(path); err == nil && cp.Format != "" && (opts.Format == "" || opts.Format == input.FormatAuto) {
		// Resuming inside the file: its first line read again need not
		// be one that tells its form.
		if dev, ino := fileID(fi); dev == cp.Dev && ino == cp.Ino {
			opts.Format = cp.Format
		}
	}
	in, err := input.NewInput(time.Now().UTC(), opts, im)
	if err != nil {
		return err
	}
	t := &tail{ctx: ctx, path: path, in: in, skipFrom: -1, tooLong: func() {
		in.SkipLine()
		im.Problem(0, fmt.Errorf("a line longer than %d bytes", maxLine))
	}}
	if err := t.open(); err != nil {
		return err
	}
	defer func() { t.f.Close() }()
	if fl.checkpoint != "" {
		// Where the checkpoint cannot be saved, nothing is read: a
		// follower that could not say where it stopped would export again,
		// after a restart, what it exported.
		probe := cp
		if probe.Version == 0 {
			probe = checkpoint{Dev: t.dev, Ino: t.ino, Stream: t.stream}
		}
		if err := probe.save(fl.checkpoint); err != nil {
			return fmt.Errorf("the checkpoint %s cannot be saved: %w: nothing was read", sanitize.Display(fl.checkpoint, 256), err)
		}
	}
	if cp.Version != 0 {
		same := cp.Dev == t.dev && cp.Ino == t.ino && cp.Stream == t.stream && (t.stream || cp.Offset <= t.size())
		if same && cp.HeadLen > 0 && !t.stream {
			h, err := head(t.f, cp.HeadLen)
			same = err == nil && h == cp.Head
		}
		if same && t.stream {
			// What a pipe held is gone: its exported requests are
			// remembered, to tell late records and to count reused ids.
			in.Resume(cp.Done, 0, 0)
		} else if same {
			if _, err := t.f.Seek(cp.Offset, io.SeekStart); err != nil {
				return err
			}
			t.off = cp.Offset
			in.Resume(cp.Done, cp.Next, cp.Line)
		} else {
			// Rotated, replaced or truncated while the import was stopped:
			// what the old file held after the checkpoint cannot be read.
			fmt.Fprintf(im.stderr, "omnitrace import: %s is not the file the checkpoint was saved for (rotated, replaced or truncated while stopped): reading it from its start; what the old one held after the checkpoint is not read\n", sanitize.Display(path, 256))
		}
	}
	saved, handedAtSave := time.Now(), im.handedOn()
	stopped := func(err error) error {
		im.noteStats(in)
		return &checkpointError{path: sanitize.Display(fl.checkpoint, 256), err: err, held: in.Held(), sinceSave: im.handedOn() - handedAtSave}
	}
	tick := time.NewTicker(fl.poll)
	defer tick.Stop()
	for {
		// A rotation, or a truncation refilled since the last look, is
		// told before reading on: new bytes are never read at old offsets.
		if rotated, err := t.rotated(); err != nil {
			return err
		} else if rotated {
			continue
		}
		in.SetNow(time.Now())
		if err := t.drain(); err != nil {
			return err
		}
		in.Tick(time.Now(), fl.idle)
		if time.Since(saved) >= time.Second {
			if err := t.checkpoint().save(fl.checkpoint); err != nil {
				// Stopped, holding what it held: the last checkpoint saved
				// names where those requests' records begin.
				if t.stream {
					in.End() // a pipe's records cannot be read again
				} else {
					in.Stop()
				}
				return stopped(err)
			}
			saved, handedAtSave = time.Now(), im.handedOn()
		}
		select {
		case <-ctx.Done():
			// Read what was written up to the interrupt, across a rotation
			// (the file as it is: bounded; a request the exporter cannot
			// take is counted, not waited for).
			t.ctx = nil
			for {
				if rotated, err := t.rotated(); err != nil || !rotated {
					break
				}
			}
			if t.stream {
				// What the pipe holds, not what a writer that never stops
				// writes after: at most the largest pipe buffer.
				t.limit = t.off + maxPipeBuffer
			}
			if err := t.drain(); err != nil {
				return err
			}
			if t.stream && len(t.partial) > 0 && t.skipFrom < 0 {
				// A pipe's last line, not ended, is all it will give of it.
				t.in.Line(t.partial, t.off-int64(len(t.partial)))
				t.partial = t.partial[:0]
			}
			switch {
			case fl.checkpoint == "" || t.stream:
				// Nowhere to resume from (no checkpoint, or a pipe, which
				// cannot be read again): export what is held.
				in.End()
			default:
				// Every request held, finished or not, is read again from
				// the checkpoint after a restart, and exported whole then.
				in.Stop()
			}
			if err := t.checkpoint().save(fl.checkpoint); err != nil {
				return stopped(err)
			}
			im.noteStats(in)
			return nil
		case <-tick.C:
		}
	}
}

// tail reads a growing file line by line.
type tail struct {
	// ctx ends a drain at an interrupt; nil reads to the end.
	ctx      context.Context
	path     string
	in       *input.Input
	tooLong  func()
	f        *os.File
	dev, ino uint64
	off      int64  // of the first byte not yet read
	partial  []byte // a line not yet ended
	buf      []byte
	// skipFrom is where a line too long to keep began, while the rest of
	// it is being read and dropped; -1 otherwise. The tail of a long line
	// is never read as a line of its own.
	skipFrom int64
	// headSum is the digest of the file's first headN bytes as read: a
	// file truncated and written past the offset again between two looks
	// is told by its head, not its size.
	headSum string
	headN   int64
	// stream: the file is no regular file (a named pipe, a device): it
	// has no size or head, cannot be read again, and is read without ever
	// waiting (through raw), so that an interrupt is seen at the next look.
	stream bool
	raw    syscall.RawConn
	// limit, when above 0, is the offset a drain stops at.
	limit int64
}

// maxPipeBuffer is the most a pipe holds on Linux (fs.pipe-max-size).
const maxPipeBuffer = 1 << 20

// open opens the file without waiting: a named pipe no writer has opened
// yet opens at once, and reads as ended until one does.
func (t *tail) open() error {
	f, err := os.OpenFile(t.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	t.stream, t.raw = !fi.Mode().IsRegular(), nil
	if t.stream {
		if t.raw, err = f.SyscallConn(); err != nil {
			f.Close()
			return err
		}
	}
	t.f, t.off, t.partial, t.skipFrom, t.headN = f, 0, t.partial[:0], -1, 0
	t.dev, t.ino = fileID(fi)
	return nil
}

// read reads what the file holds now. A regular file never waits; a
// stream is read once, without waiting for more (io.EOF: no writer).
func (t *tail) read(buf []byte) (int, error) {
	if !t.stream {
		return t.f.Read(buf)
	}
	n, rerr := 0, error(nil)
	err := t.raw.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), buf)
		return true // one attempt: the follow loop looks again after -poll
	})
	switch {
	case err != nil:
		return 0, err
	case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		return 0, nil // nothing now
	case rerr != nil:
		return 0, rerr
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}

func (t *tail) size() int64 {
	fi, err := t.f.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}

// drain reads what the file holds now, and feeds its complete lines.
func (t *tail) drain() error {
	if t.buf == nil {
		t.buf = make([]byte, 256<<10)
	}
	for t.ctx == nil || t.ctx.Err() == nil {
		buf := t.buf
		if t.limit > 0 {
			if t.off >= t.limit {
				return nil
			}
			buf = buf[:min(int64(len(buf)), t.limit-t.off)]
		}
		n, err := t.read(buf)
		if n > 0 {
			t.feed(buf[:n])
		}
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// feed splits data into lines; the last, unended one waits for more.
func (t *tail) feed(data []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if t.skipFrom >= 0 {
			if i < 0 {
				t.off += int64(len(data))
				return
			}
			t.off += int64(i + 1)
			t.skipFrom = -1
			data = data[i+1:]
			continue
		}
		if i < 0 {
			if len(t.partial)+len(data) > maxLine {
				t.tooLong()
				t.skipFrom = t.off - int64(len(t.partial))
				t.partial = t.partial[:0]
			} else {
				t.partial = append(t.partial, data...)
			}
			t.off += int64(len(data))
			return
		}
		line := data[:i]
		start := t.off - int64(len(t.partial))
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
		}
		t.off += int64(i + 1)
		if len(line) <= maxLine {
			t.in.Line(line, start)
		} else {
			t.tooLong()
		}
		t.partial = t.partial[:0]
		data = data[i+1:]
	}
}

// rotated reports whether the file at path is no longer the one read (a
// rotation) or has shrunk (a truncation), and then switches to it, after
// reading the old one to its end.
func (t *tail) rotated() (bool, error) {
	fi, err := os.Stat(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // between a rename and the new file's creation
	}
	if err != nil {
		return false, err
	}
	dev, ino := fileID(fi)
	switch {
	case dev != t.dev || ino != t.ino:
		if err := t.drain(); err != nil {
			return false, err
		}
		if len(t.partial) > 0 && t.skipFrom < 0 {
			// The rotated file's last line is all it will ever get.
			t.in.Line(t.partial, t.off-int64(len(t.partial)))
		}
		t.f.Close()
		t.in.Rotated()
		return true, t.open()
	case t.stream:
		return false, nil // no size, no head: nothing else to tell
	case fi.Size() < t.off || t.headChanged():
		if _, err := t.f.Seek(0, io.SeekStart); err != nil {
			return false, err
		}
		// Truncated (a copy-truncate rotation): what was read is gone,
		// as after a rotation.
		t.off, t.partial, t.skipFrom, t.headN = 0, t.partial[:0], -1, 0
		t.in.Rotated()
		return true, nil
	}
	if n := min(t.off, headLen); n > t.headN {
		if h, err := head(t.f, n); err == nil {
			t.headSum, t.headN = h, n
		}
	}
	return false, nil
}

// headChanged reports whether the head read earlier is no longer the
// file's.
func (t *tail) headChanged() bool {
	if t.headN == 0 {
		return false
	}
	h, err := head(t.f, t.headN)
	return err != nil || h != t.headSum
}

func (t *tail) checkpoint() checkpoint {
	next := t.off - int64(len(t.partial))
	if t.skipFrom >= 0 {
		next = t.skipFrom // the long line is read, and skipped, again
	}
	off, line, done := t.in.Checkpoint(next)
	if t.stream {
		// A pipe is never read again: no offset, and no record of the
		// requests exported will come again.
		for i := range done {
			done[i].First, done[i].Last = -1, -1
		}
		return checkpoint{Dev: t.dev, Ino: t.ino, Stream: true, Done: done, Format: t.in.Format()}
	}
	cp := checkpoint{Dev: t.dev, Ino: t.ino, Offset: off, Next: next, Done: done, Format: t.in.Format(), Line: line}
	if n := min(off, headLen); n > 0 {
		if h, err := head(t.f, n); err == nil {
			cp.Head, cp.HeadLen = h, n
		}
	}
	return cp
}
