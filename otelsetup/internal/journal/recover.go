// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// Attributes of a recovered span.
const (
	// RecoveredKey marks every span rebuilt from a journal (bool): one that
	// had ended keeps its own end and status; one still open when its
	// process died ends at the journal's last heartbeat before the death,
	// with status Error and error.type = ErrorProcessDied.
	RecoveredKey = attribute.Key("omni.recovered")
	// ErrorProcessDied is the error.type of a span that was still open
	// when its process died (SIGKILL, the OOM killer, a fatal runtime
	// error).
	ErrorProcessDied = "process_died"

	errorTypeKey = semconv.ErrorTypeKey
)

// BatchSize is how many spans Recover gives the exporter at a time.
const BatchSize = 512

// Report says what [Recover] found and did.
type Report struct {
	// Files: journals of dead processes read.
	Files int
	// Removed: of those, the files removed, exp done with every span they
	// held.
	Removed int
	// Live: journals whose process still runs (the caller's own among
	// them), and files a live process is making its journal in, left
	// alone.
	Live int
	// Unreadable: files named like journals that this build cannot read
	// (another format version, a damaged header, not a regular file, no
	// permission), left in place and named in the error.
	Unreadable int
	// Unfinished: files a process died making its journal in, before the
	// journal held a span (see [Open]), removed.
	Unfinished int
	// Ended: spans that left the journal (exp returned nil for their
	// batch) as they ended.
	Ended int
	// Open: spans still open at the death that left the journal, ended
	// then, with status Error.
	Open int
	// Failed: spans of batches exp returned an error for, left in the
	// file for the next Recover.
	Failed int
	// Torn: stretches between records that held no whole record (a record
	// cut short by the death, a page torn by a power loss), skipped.
	Torn int
	// Corrupt: records whose checksum held but that did not decode,
	// skipped.
	Corrupt int
}

// Recover exports, through exp, every span journalled in dir by a
// process that is gone and never confirmed exported, then removes that
// process's file. A span that had ended is exported as it ended; one
// still open as ended at the process's last heartbeat (never before its
// start), with status Error, error.type = process_died. Every recovered
// span carries omni.recovered = true, and its trace id, span id, parent
// span id, trace flags and state, remote flags, resource and
// instrumentation scope as the dead process had them.
//
// exp returns nil once it is done with a batch: sent whole, or taken by
// the collector with some spans rejected (an OTLP partial success), or
// refused span by span for what OTLP cannot carry; otelsetup's exporter
// tells these apart. Any error it returns means the batch did not reach
// its destination: the batch and the rest of its file stay for the next
// Recover, which sends none of the batches exp was done with, and the
// other files are still read. A death between exp returning nil and the
// batch's marks sends that batch again, with the same ids.
//
// Files held by a live process (the caller's own journal among them) are
// left alone. A file Recover cannot read (another format version, a
// damaged header, not a regular file, no permission) is counted, named
// in the error and left in place; it never stops the other files. The
// file a process died making its journal in is removed (Unfinished).
// Files are read one at a time, a segment at a time.
func Recover(ctx context.Context, dir string, exp sdktrace.SpanExporter) (Report, error) {
	var rep Report
	if !supported {
		return rep, ErrUnsupported
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if exp == nil {
		return rep, errors.New("journal: Recover needs an exporter")
	}
	d, err := os.Open(dir)
	if err != nil {
		return rep, fmt.Errorf("journal: reading %s: %w", dir, err)
	}
	defer d.Close()
	var errs fileErrors
	for {
		// A few names at a time: a directory of a million files costs no
		// more memory than one of ten.
		names, err := d.Readdirnames(256)
		for _, name := range names {
			isJournal := strings.HasSuffix(name, suffix)
			if !isJournal && !isTempName(name) {
				continue
			}
			if err := ctx.Err(); err != nil {
				errs.add(err)
				return rep, errs.err()
			}
			path := filepath.Join(dir, name)
			if isJournal {
				errs.add(recoverFile(ctx, path, exp, &rep))
			} else {
				errs.add(removeUnfinished(path, &rep))
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
			return rep, errs.err()
		}
		if err != nil {
			errs.add(fmt.Errorf("journal: reading %s: %w", dir, err))
			return rep, errs.err()
		}
	}
}

// maxFileErrors bounds the errors Recover names: each file's error
// holds its path.
const maxFileErrors = 16

// fileErrors are the first maxFileErrors errors of a Recover, and a
// count of the others.
type fileErrors struct {
	errs []error
	more int
}

func (f *fileErrors) add(err error) {
	switch {
	case err == nil:
	case len(f.errs) < maxFileErrors:
		f.errs = append(f.errs, err)
	default:
		f.more++
	}
}

func (f *fileErrors) err() error {
	if f.more > 0 {
		return errors.Join(append(f.errs, fmt.Errorf("journal: and %d more errors", f.more))...)
	}
	return errors.Join(f.errs...)
}

// openDead opens the file at path, which ReadDir found, for recovery:
// never through a symbolic link, never one that is not a regular file,
// and only once the lock no live process holds is taken. It returns nil
// and no error when there is nothing to do: the file is gone (another
// recovery took it meanwhile) or held by a live process (counted in
// Live). A file that cannot be opened is counted unreadable.
func openDead(path string, flag int, rep *Report) (*os.File, error) {
	f, err := os.OpenFile(path, flag|openFlags, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		rep.Unreadable++
		return nil, fmt.Errorf("journal: cannot open %s (left in place): %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("journal: %s is not a regular file, left in place", path)
	}
	if err != nil {
		_ = f.Close()
		rep.Unreadable++
		return nil, err
	}
	locked, err := tryLock(f)
	if err != nil || !locked {
		_ = f.Close()
		if err != nil {
			rep.Unreadable++
			return nil, fmt.Errorf("journal: locking %s (left in place): %w", path, err)
		}
		rep.Live++
		return nil, nil
	}
	// Another process may have recovered and removed the file between our
	// open and our lock.
	if pi, err := os.Lstat(path); err != nil || !os.SameFile(fi, pi) {
		_ = f.Close()
		return nil, nil
	}
	return f, nil
}

// removeUnfinished removes the file at path that a process died making
// its journal in: its lock is free, so its process is gone, and it never
// held a span (its journal had no name yet). A process between the
// file's creation and its lock holds the directory's lock shared: while
// one does, its file cannot be told from a dead one's, and is counted
// live.
func removeUnfinished(path string, rep *Report) error {
	d, err := lockDir(filepath.Dir(path), lockExclusiveNB)
	if err != nil {
		if errors.Is(err, errWouldBlock) {
			rep.Live++
			return nil
		}
		rep.Unreadable++
		return fmt.Errorf("journal: %s (left in place): %w", path, err)
	}
	defer d.Close()
	f, err := openDead(path, os.O_RDONLY, rep)
	if f == nil {
		return err
	}
	defer f.Close() // releases the lock, after the removal
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		rep.Unreadable++
		return fmt.Errorf("journal: removing %s, which a process died making its journal in: %w", path, err)
	}
	rep.Unfinished++
	return nil
}

type recovery struct {
	ctx    context.Context
	f      *os.File
	path   string
	exp    sdktrace.SpanExporter
	geo    geometry
	avail  int
	rep    *Report
	res    map[uint32]*resource.Resource
	scopes map[uint32]instrumentation.Scope
	death  time.Time

	batch []sdktrace.ReadOnlySpan
	marks []int
	ended int
	open  int
}

func recoverFile(ctx context.Context, path string, exp sdktrace.SpanExporter, rep *Report) error {
	f, err := openDead(path, os.O_RDWR, rep)
	if f == nil {
		return err
	}
	defer f.Close() // releases the lock
	fi, err := f.Stat()
	if err != nil {
		rep.Unreadable++
		return fmt.Errorf("journal: %s: %w", path, err)
	}
	r := &recovery{ctx: ctx, f: f, path: path, exp: exp, rep: rep, avail: int(min(fi.Size(), int64(maxSize)+headerSize+maxDefsSize))}
	var hdr [headerSize]byte
	n, _ := f.ReadAt(hdr[:], 0)
	hb, err := r.header(hdr[:n])
	if err != nil {
		rep.Unreadable++
		return err
	}
	rep.Files++
	r.definitions()
	if err := r.spans(hb); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("journal: removing %s after recovering it: %w", path, err)
	}
	rep.Removed++
	return nil
}

// header checks the file header and returns the last heartbeat and the
// heartbeat interval.
func (r *recovery) header(h []byte) ([2]time.Duration, error) {
	if len(h) < hdrClosed+8 || string(h[:len(fileMagic)]) != fileMagic {
		return [2]time.Duration{}, fmt.Errorf("journal: %s is not a journal (no header), left in place", r.path)
	}
	le := binary.LittleEndian
	if v := le.Uint32(h[hdrVersion:]); v != formatVersion {
		return [2]time.Duration{}, fmt.Errorf("journal: %s was written in format version %d; this build reads version %d: left in place", r.path, v, formatVersion)
	}
	if crc32c(h[:hdrCRC]) != le.Uint32(h[hdrCRC:]) {
		return [2]time.Duration{}, fmt.Errorf("journal: %s has a damaged header, left in place", r.path)
	}
	g := geometry{segSize: int(le.Uint32(h[hdrSegSize:])), segCount: int(le.Uint32(h[hdrSegCount:])), defsSize: int(le.Uint32(h[hdrDefsSize:]))}
	pow2 := g.segSize&(g.segSize-1) == 0
	if !pow2 || g.segSize < minSegSize || g.segSize > maxSegSize || g.segCount < 1 || g.segCount > maxSize/minSegSize ||
		g.defsSize < minDefsSize || g.defsSize > maxDefsSize || g.defsSize%8 != 0 {
		return [2]time.Duration{}, fmt.Errorf("journal: %s has a header this build cannot lay out, left in place", r.path)
	}
	r.geo = g
	r.avail = min(r.avail, g.fileSize())
	return [2]time.Duration{time.Duration(le.Uint64(h[hdrHeartbeat:])), time.Duration(le.Uint64(h[hdrInterval:]))}, nil
}

// read reads [off, off+len(b)) of the file, or what of it the file holds.
func (r *recovery) read(b []byte, off int) []byte {
	if off >= r.avail {
		return nil
	}
	b = b[:min(len(b), r.avail-off)]
	n, err := r.f.ReadAt(b, int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		return b[:0]
	}
	return b[:n]
}

// scan calls fn with every whole record of generation gen in b, a region
// read from the file at base, from offset start. A stretch that holds no
// record is stepped over 8 bytes at a time to the next whole record, and
// counted as torn when one follows.
func scan(b []byte, start int, gen uint32, maxPayload int, fn func(loc int, p []byte, live bool)) (torn int) {
	le := binary.LittleEndian
	gap := false
	for pos := start; pos+recHeaderSize <= len(b); {
		n := int(le.Uint32(b[pos+recLen:]))
		if le.Uint32(b[pos+recGen:]) == gen && n > 0 && n <= maxPayload && n <= len(b)-pos-recHeaderSize &&
			le.Uint32(b[pos+recCRC:]) == recordCRC(b[pos:], n) {
			if gap {
				torn++
				gap = false
			}
			fn(pos, b[pos+recHeaderSize:pos+recHeaderSize+n], le.Uint32(b[pos+recState:]) != stateDone)
			pos += recordSize(n)
			continue
		}
		gap = true
		pos += 8
	}
	return torn
}

func (r *recovery) definitions() {
	r.res = map[uint32]*resource.Resource{}
	r.scopes = map[uint32]instrumentation.Scope{}
	b := r.read(make([]byte, r.geo.defsSize), r.geo.defsOff())
	r.rep.Torn += scan(b, 0, defsGen, r.geo.maxPayload(), func(_ int, p []byte, _ bool) {
		d, err := decodeDefinition(p)
		if err != nil {
			r.rep.Corrupt++
			return
		}
		if d.typ == recResource {
			r.res[d.id] = resource.NewWithAttributes(d.schema, d.attrs...)
		} else {
			r.scopes[d.id] = d.scope()
		}
	})
}

// spans exports the file's live span records.
func (r *recovery) spans(hb [2]time.Duration) error {
	le := binary.LittleEndian
	type seg struct {
		i   int
		gen uint64
	}
	var segs []seg
	var head [segHeaderSize]byte
	for i := 0; i < r.geo.segCount; i++ {
		if h := r.read(head[:], r.geo.segOff(i)); len(h) == segHeaderSize && le.Uint32(h) == segMagic {
			segs = append(segs, seg{i, le.Uint64(h[segGenOff:])})
		}
	}
	sort.Slice(segs, func(a, b int) bool { return segs[a].gen < segs[b].gen })
	buf := make([]byte, r.geo.segSize)
	maxPayload := r.geo.maxPayload()

	// Pass 1: which spans have a live end, which a live start, and the
	// latest time the journal saw near its last heartbeat.
	beat := time.Unix(0, int64(hb[0]))
	latest := beat
	window := beat.Add(2 * hb[1])
	ends := map[spanKey]int{}
	starts := map[spanKey]int{}
	// Live ends that leave their attributes to their start record.
	leaning := map[spanKey]bool{}
	torn := 0
	for _, s := range segs {
		b := r.read(buf, r.geo.segOff(s.i))
		base := r.geo.segOff(s.i)
		torn += scan(b, segHeaderSize, uint32(s.gen), maxPayload, func(loc int, p []byte, live bool) {
			if len(p) < prefixSize || (p[pType] != recStart && p[pType] != recEnd) {
				return // counted in pass 2
			}
			st, et := recordTimes(p)
			for _, t := range [2]time.Time{st, et} {
				if t.After(latest) && !t.After(window) {
					latest = t
				}
			}
			if !live {
				return
			}
			k := recordKey(p)
			m := starts
			if p[pType] == recEnd {
				m = ends
			}
			if _, dup := m[k]; !dup {
				m[k] = base + loc
			}
			if p[pType] == recEnd && p[pFlags]&flagAttrsAtStart != 0 {
				leaning[k] = true
			}
		})
	}
	r.rep.Torn += torn
	r.death = latest
	// A death between the marks of a confirmed span's start and of its end
	// (the start is marked first) leaves its end live and its start done:
	// the span is sent again, with the attributes its start record holds.
	for k := range leaning {
		if _, ok := starts[k]; ok {
			delete(leaning, k)
		}
	}
	doneStarts := map[spanKey]int{}
	for _, s := range segs {
		if len(leaning) == len(doneStarts) {
			break
		}
		b := r.read(buf, r.geo.segOff(s.i))
		base := r.geo.segOff(s.i)
		scan(b, segHeaderSize, uint32(s.gen), maxPayload, func(loc int, p []byte, live bool) {
			if live || len(p) < prefixSize || p[pType] != recStart {
				return
			}
			if k := recordKey(p); leaning[k] {
				if _, dup := doneStarts[k]; !dup {
					doneStarts[k] = base + loc
				}
			}
		})
	}

	// Pass 2: export.
	for _, s := range segs {
		b := r.read(buf, r.geo.segOff(s.i))
		base := r.geo.segOff(s.i)
		var err error
		scan(b, segHeaderSize, uint32(s.gen), maxPayload, func(loc int, p []byte, live bool) {
			if !live || err != nil {
				return
			}
			loc += base
			if len(p) < prefixSize || (p[pType] != recStart && p[pType] != recEnd) {
				r.rep.Corrupt++
				r.mark(loc)
				return
			}
			k := recordKey(p)
			sl, started := starts[k]
			if p[pType] == recStart {
				if sl != loc {
					r.mark(loc) // an earlier copy stands for it
					return
				}
				if _, ended := ends[k]; ended {
					return // marked with its end
				}
			} else if ends[k] != loc {
				r.mark(loc)
				return
			}
			sr, derr := decodeSpan(p)
			if derr == nil && sr.attrsAtStart {
				if started {
					derr = r.startAttrs(&sr, sl, b, base)
				} else if dl, ok := doneStarts[k]; ok {
					derr = r.startAttrs(&sr, dl, b, base)
				}
			}
			if derr != nil {
				r.rep.Corrupt++
				r.mark(loc)
				return
			}
			if sr.typ == recEnd && started {
				// The start is marked before the end, as the live journal
				// does: a death between the two leaves the end, which is
				// sent again as it ended, never the start alone, which
				// would be sent as open.
				r.marks = append(r.marks, sl)
			}
			r.add(sr, loc)
			if len(r.batch) >= BatchSize {
				err = r.flush()
			}
		})
		if err != nil {
			return err
		}
	}
	return r.flush()
}

// startAttrs gives an end record whose attributes are its start record's
// those attributes, read from the start record at loc: in b (the segment
// read at base) when it lies there, else from the file.
func (r *recovery) startAttrs(s *spanRecord, loc int, b []byte, base int) error {
	var rec []byte
	if loc >= base && loc+recHeaderSize <= base+len(b) {
		rec = b[loc-base:]
	} else {
		var h [recHeaderSize]byte
		if n, _ := r.f.ReadAt(h[:], int64(loc)); n != recHeaderSize {
			return errCorrupt
		}
		n := int(binary.LittleEndian.Uint32(h[recLen:]))
		if n > r.geo.maxPayload() {
			return errCorrupt
		}
		rec = make([]byte, recHeaderSize+n)
		if m, _ := r.f.ReadAt(rec, int64(loc)); m != len(rec) {
			return errCorrupt
		}
	}
	n := int(binary.LittleEndian.Uint32(rec[recLen:]))
	if n > len(rec)-recHeaderSize || binary.LittleEndian.Uint32(rec[recCRC:]) != recordCRC(rec, n) {
		return errCorrupt
	}
	st, err := decodeSpan(rec[recHeaderSize : recHeaderSize+n])
	if err != nil || st.typ != recStart {
		return errCorrupt
	}
	s.attrs = st.attrs
	return nil
}

// add turns a record into the span it stands for and adds it to the batch.
func (r *recovery) add(s spanRecord, loc int) {
	res := r.res[s.res]
	if res == nil {
		res = resource.Empty()
	}
	sp := &recoveredSpan{
		name:     s.name,
		sc:       s.sc,
		parent:   s.parent,
		kind:     s.kind,
		start:    s.start,
		end:      s.end,
		events:   s.events,
		links:    s.links,
		status:   s.status,
		dropped:  s.dropped,
		children: s.children,
		res:      res,
		scope:    r.scopes[s.scope],
	}
	if s.typ == recStart {
		sp.end = s.start
		if r.death.After(s.start) {
			sp.end = r.death
		}
		sp.status = sdktrace.Status{Code: codes.Error, Description: "the process died while the span was open"}
		sp.attrs = withAttrs(s.attrs, RecoveredKey.Bool(true), errorTypeKey.String(ErrorProcessDied))
		r.open++
	} else {
		sp.attrs = withAttrs(s.attrs, RecoveredKey.Bool(true))
		r.ended++
	}
	sp.repairStrings()
	r.batch = append(r.batch, sp)
	r.marks = append(r.marks, loc)
}

// recoveredSpan is a span rebuilt from a journal, as exporters read a
// span: every method of sdktrace.ReadOnlySpan returns what the record
// held. The embedded interface is nil; it is there for the interface's
// unexported method, and no method reaches it.
type recoveredSpan struct {
	sdktrace.ReadOnlySpan

	name       string
	sc, parent trace.SpanContext
	kind       trace.SpanKind
	start, end time.Time
	attrs      []attribute.KeyValue
	events     []sdktrace.Event
	links      []sdktrace.Link
	status     sdktrace.Status
	dropped    [3]int // attributes, events, links
	children   int
	res        *resource.Resource
	scope      instrumentation.Scope
}

func (s *recoveredSpan) Name() string                                { return s.name }
func (s *recoveredSpan) SpanContext() trace.SpanContext              { return s.sc }
func (s *recoveredSpan) Parent() trace.SpanContext                   { return s.parent }
func (s *recoveredSpan) SpanKind() trace.SpanKind                    { return s.kind }
func (s *recoveredSpan) StartTime() time.Time                        { return s.start }
func (s *recoveredSpan) EndTime() time.Time                          { return s.end }
func (s *recoveredSpan) Attributes() []attribute.KeyValue            { return s.attrs }
func (s *recoveredSpan) Links() []sdktrace.Link                      { return s.links }
func (s *recoveredSpan) Events() []sdktrace.Event                    { return s.events }
func (s *recoveredSpan) Status() sdktrace.Status                     { return s.status }
func (s *recoveredSpan) InstrumentationScope() instrumentation.Scope { return s.scope }
func (s *recoveredSpan) Resource() *resource.Resource                { return s.res }
func (s *recoveredSpan) DroppedAttributes() int                      { return s.dropped[0] }
func (s *recoveredSpan) DroppedEvents() int                          { return s.dropped[1] }
func (s *recoveredSpan) DroppedLinks() int                           { return s.dropped[2] }
func (s *recoveredSpan) ChildSpanCount() int                         { return s.children }

//lint:ignore SA1019 the exporters of this SDK version still read it
func (s *recoveredSpan) InstrumentationLibrary() instrumentation.Library { return s.scope }

// repairStrings makes every string of a recovered span valid UTF-8: the
// journal keeps what the span held (its length already bounded), and an
// OTLP exporter refuses a whole batch for one string that is not valid.
func (s *recoveredSpan) repairStrings() {
	s.name = sanitize.String(s.name, 0)
	s.status.Description = sanitize.String(s.status.Description, 0)
	s.attrs = sanitize.KeyValues(s.attrs, 0, 0)
	for i := range s.events {
		s.events[i].Name = sanitize.String(s.events[i].Name, 0)
		s.events[i].Attributes = sanitize.KeyValues(s.events[i].Attributes, 0, 0)
	}
	for i := range s.links {
		s.links[i].Attributes = sanitize.KeyValues(s.links[i].Attributes, 0, 0)
	}
	sc := &s.scope
	sc.Name, sc.Version, sc.SchemaURL = sanitize.String(sc.Name, 0), sanitize.String(sc.Version, 0), sanitize.String(sc.SchemaURL, 0)
}

// withAttrs returns attrs with add set, replacing any of the same keys.
func withAttrs(attrs []attribute.KeyValue, add ...attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs)+len(add))
	for _, kv := range attrs {
		keep := true
		for _, a := range add {
			keep = keep && kv.Key != a.Key
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// flush exports the batch and, once exp accepts it, marks its records.
func (r *recovery) flush() error {
	if len(r.batch) == 0 {
		for _, loc := range r.marks {
			r.mark(loc)
		}
		r.marks = r.marks[:0]
		return nil
	}
	if err := r.ctx.Err(); err != nil {
		return fmt.Errorf("journal: recovering %s: %w", r.path, err)
	}
	if err := r.exp.ExportSpans(r.ctx, r.batch); err != nil {
		r.rep.Failed += len(r.batch)
		return fmt.Errorf("journal: recovering %s: the export of a batch of %d spans failed (it and the rest of the file are left for the next recovery): %w", r.path, len(r.batch), err)
	}
	for _, loc := range r.marks {
		r.mark(loc)
	}
	r.rep.Ended += r.ended
	r.rep.Open += r.open
	r.batch, r.marks, r.ended, r.open = nil, r.marks[:0], 0, 0
	return nil
}

var doneWord = binary.LittleEndian.AppendUint32(nil, stateDone)

// mark turns the record at loc done in the file.
func (r *recovery) mark(loc int) {
	_, _ = r.f.WriteAt(doneWord, int64(loc+recState))
	if afterMark != nil {
		afterMark()
	}
}

// afterMark, set by tests, runs after each record a recovery marks.
var afterMark func()
