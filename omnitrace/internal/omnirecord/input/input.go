// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// The forms an input can be in.
const (
	FormatAuto    = "auto"    // told by content
	FormatJSONL   = "jsonl"   // this project's records, or event dicts, one JSON object per line
	FormatSummary = "summary" // vLLM-Omni's summary dicts, as JSON, one after another
	FormatLog     = "log"     // a vLLM log: [OmniTiming] lines, per-request tables, event dicts
)

// Formats lists the values -format takes.
var Formats = []string{FormatAuto, FormatJSONL, FormatSummary, FormatLog}

// Options tune how an input is read.
type Options struct {
	// Format is one of [Formats]; empty means auto.
	Format string
	// Start places the requests whose input gives no time (a summary);
	// zero means the input's reference time (a file's modification time).
	Start time.Time
	// RunName names the run the input belongs to; it enters every id.
	RunName string
	// Zone is the zone a log's times are read in: its lines carry none.
	// Nil means UTC; never the importing machine's own zone.
	Zone *time.Location
	// Settle and MaxPending tune the gathering of a log's records (see
	// DefaultSettle and DefaultMaxPending); 0 means the default. A
	// negative Settle means none: a finished request is handed on at once.
	// MaxPending bounds the requests of a summary held until it ends too.
	Settle, MaxPending int
}

// Handler receives what an input holds.
type Handler interface {
	// Request receives one request, with the time to place it from when
	// its input gives none.
	Request(r *forms.Request, anchor time.Time)
	// Problem receives a record that was skipped: line is its first
	// line's number.
	Problem(line int, err error)
}

// Input reads one input line by line, in whichever form it is, and hands
// each request to its handler once it is complete. Its memory is bounded
// by its settings, never by the input's length: a line (MaxLine), a record
// spread over lines (maxUnitBytes, maxUnitValues), and the requests held,
// Options.MaxPending of them (a log's until settled, a summary's until it
// ends; see summaryReader).
type Input struct {
	opts   Options
	ref    time.Time
	h      Handler
	format string
	lineNo int
	coll   *collector
	scan   *logScanner
	// sum reads the summary document open, which began at line
	// sumFirst, whose offset is sumFirstOff, at byte sumStart.
	sum         *summaryReader
	sumFirst    int
	sumFirstOff int64
	sumStart    int64
	reread      io.ReaderAt
	// src reads a summary document's entries again from reread.
	src     *entrySource
	Skipped int // records skipped, and requests dropped unfinished
}

// NewInput returns an input whose reference time is ref: the time a log
// was last written (its lines' year, a summary's default start).
func NewInput(ref time.Time, opts Options, h Handler) (*Input, error) {
	in := &Input{opts: opts, ref: ref, h: h, format: opts.Format}
	switch in.format {
	case "", FormatAuto:
		in.format = ""
	case FormatJSONL, FormatSummary, FormatLog:
	default:
		return nil, fmt.Errorf("unknown format %q (one of %v)", literal.Clip(opts.Format), Formats)
	}
	settle := opts.Settle
	switch {
	case settle == 0:
		settle = DefaultSettle
	case settle < 0:
		settle = 0
	}
	in.coll = newCollector(settle, opts.MaxPending, in.ready)
	in.scan = newLogScanner(ref, in.logRecord, in.problem)
	if opts.Zone != nil {
		in.scan.zone = opts.Zone
	}
	in.scan.maxPending = opts.MaxPending
	return in, nil
}

// Format returns the form the input was found in; empty before its first
// line.
func (in *Input) Format() string { return in.format }

func (in *Input) problem(line int, err error) {
	if !errors.Is(err, forms.ErrLeftOut) {
		in.Skipped++
	}
	in.h.Problem(line, err)
}

// moreLeftOut reports the fields of a request left out beyond those
// reported one by one.
type moreLeftOut struct {
	id string
	n  int
}

func (e *moreLeftOut) Error() string {
	return fmt.Sprintf("request %q: %d more fields: %v", e.id, e.n, forms.ErrLeftOut)
}

func (e *moreLeftOut) Is(target error) bool { return target == forms.ErrLeftOut }

// LeftOutFields returns how many fields a problem wrapping ErrLeftOut says
// were left out: one, or the count of a "more fields" report.
func LeftOutFields(err error) int {
	var more *moreLeftOut
	if errors.As(err, &more) {
		return more.n
	}
	return 1
}

// SkipLine counts a line that was not read (one too long to keep), so that
// the lines after it keep their numbers.
func (in *Input) SkipLine() { in.lineNo++ }

// Line reads the next line of the input (its end of line removed), which
// starts at offset.
func (in *Input) Line(line []byte, offset int64) {
	in.lineNo++
	// base is where the line's bytes lie in the input: a byte-order mark
	// before the first line is taken off.
	base := offset
	if in.lineNo == 1 && bytes.HasPrefix(line, []byte(literal.BOM)) {
		line, base = line[len(literal.BOM):], offset+int64(len(literal.BOM))
	}
	if in.format == "" {
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			return
		}
		in.format = detect(t)
	}
	switch in.format {
	case FormatLog:
		in.scan.line(string(line), offset, base+int64(len(line)), in.lineNo)
	case FormatSummary:
		in.summaryLine(line, offset, base)
	default:
		in.jsonLine(line, offset)
	}
}

// summaryKeys are the top-level keys of a summary dict.
var summaryKeys = []string{"stage_table", "trans_table", "e2e_table", "overall_summary", "final_stage_id"}

// detect tells the form from an input's first line that is not blank:
//   - not an object (a log line's prefix), or a Python dict (a log whose
//     first line is a literal's): a log;
//   - an object with a summary's key at its top: a summary on one line;
//   - another whole object: JSON lines;
//   - an object that does not parse on its line: a summary (spread over
//     lines, or larger than a record) if it holds a summary's key, else
//     JSON lines if it names a request_id (a truncated or malformed record
//     line: it is reported, and the lines after it read), else a summary
//     spread over lines.
func detect(first []byte) string {
	if first[0] != '{' {
		return FormatLog
	}
	if rest := bytes.TrimSpace(first[1:]); len(rest) > 0 && rest[0] == '\'' {
		return FormatLog
	}
	v, err := literal.ParseJSON(first, literal.MaxRecordValues)
	if err != nil {
		// Too large for a record, or not closed on its line.
		for _, k := range summaryKeys {
			if bytes.Contains(first, []byte(`"`+k+`"`)) {
				return FormatSummary
			}
		}
		if bytes.Contains(first, []byte(`"request_id"`)) {
			return FormatJSONL
		}
		return FormatSummary // a JSON document over several lines
	}
	for _, k := range summaryKeys {
		if _, ok := v.Get(k); ok {
			return FormatSummary
		}
	}
	return FormatJSONL
}

func (in *Input) jsonLine(line []byte, offset int64) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return
	}
	top, err := literal.ParseJSON(t, literal.MaxRecordValues)
	if err != nil {
		if errors.Is(err, literal.ErrDuplicate) {
			in.problem(in.lineNo, fmt.Errorf("%w: %v", forms.ErrDuplicateKey, err))
		} else {
			in.problem(in.lineNo, fmt.Errorf("%w: %v", forms.ErrNotJSON, err))
		}
		return
	}
	if top.Kind != literal.Object {
		in.problem(in.lineNo, fmt.Errorf("%w: a JSON %s", forms.ErrNotJSON, top.Kind))
		return
	}
	if _, hasType := top.Get("type"); hasType {
		if _, hasStages := top.Get("stages"); !hasStages || hasEventType(&top) {
			in.coll.line = in.lineNo
			in.event(&top, time.Time{}, offset, string(t))
			return
		}
	}
	r, err := forms.FromRecord(&top)
	if err != nil {
		in.problem(in.lineNo, err)
		return
	}
	if offset < in.coll.resumedUntil && in.coll.wasDone(r.ID, offset) {
		return // handed on before a restart: read again, not sent again
	}
	r.RunName, r.Line = in.opts.RunName, in.lineNo
	r.Digest = digestOf(t)
	if in.coll.queue.Len() > 0 {
		// An event's request held from before this line keeps a checkpoint
		// before it, and a restart reads it again: it is remembered, like
		// a log's requests. (With nothing held, no checkpoint comes before
		// it, and the common case costs nothing.)
		in.coll.remember(Done{Key: DoneKey(r.ID), First: offset, Last: offset})
		in.coll.trim()
	}
	in.h.Request(r, in.anchor())
}

func hasEventType(v *literal.Value) bool {
	_, kind := forms.EventRequestID(v)
	return kind != ""
}

// event gathers one event dict.
func (in *Input) event(ev *literal.Value, at time.Time, offset int64, text string) {
	id, kind := forms.EventRequestID(ev)
	if id == "" {
		return // an event of the whole run, or one without a request
	}
	in.coll.add(id, "events", at, offset, false, func(b *forms.Builder) {
		b.Mix(text)
		b.ApplyEvent(kind, ev)
	})
}

// logRecord gathers one record of a log.
func (in *Input) logRecord(rec logRecord) {
	in.coll.line = rec.lineNo
	switch {
	case rec.timing != nil:
		in.coll.add(rec.timing.ID, "log", rec.at, rec.offset, true, func(b *forms.Builder) {
			b.Mix(rec.text)
			rec.timing.Apply(b)
		})
	case rec.table != nil:
		tb := rec.table
		in.coll.add(tb.requestID, "log", rec.at, rec.offset, false, func(b *forms.Builder) {
			b.Mix(rec.text)
			rows := tb.tableRows()
			for i := range rows {
				rows[i] = b.OnceEach(&rows[i])
				switch tb.kind {
				case "StageRequestStats":
					b.ApplyStageRow(&rows[i], forms.RowSource{Table: true})
				case "TransferEdgeStats":
					b.ApplyTransferRow(&rows[i], forms.RowSource{Table: true})
				default:
					b.ApplyE2ERow(&rows[i], forms.RowSource{Table: true})
				}
			}
		})
	case rec.sum != nil:
		in.logSummary(rec)
	case rec.value != nil:
		in.event(rec.value, rec.at, rec.offset, rec.text)
	}
}

// logSummary gathers the requests of a [Summary] dict of a log, read
// whole: each request's entries are one record of it. A dict too large to
// hold at once is read again from the input, in parts, when it can be.
func (in *Input) logSummary(rec logRecord) {
	r := rec.sum
	bad := func(err error) { in.problem(rec.lineNo, err) }
	if err := r.problem(); err != nil {
		bad(err)
		return
	}
	if r.tables == 0 {
		return // an older summary of the whole run: no request in it
	}
	add := func(sr *forms.SummaryRequest) {
		in.coll.line = rec.lineNo
		in.coll.add(sr.ID, "log", rec.at, rec.offset, false, sr.ApplyTo)
	}
	if !r.over {
		if err := r.requests(bad, add); err != nil {
			bad(err)
		}
		return
	}
	if in.reread == nil {
		bad(fmt.Errorf("a [Summary] dict of more than %d requests or %d MiB of entries, which an input that cannot be read again (stdin, -follow) cannot hold: not imported (raise -max-pending, or import the file by its name)", r.maxReqs, r.maxBytes>>20))
		return
	}
	err := r.passes(func(p *summaryReader) error {
		return readLines(in.reread, rec.offset, rec.end, literalLines(in.scan.ref, func(line []byte, from, to int64) {
			if !p.closed {
				p.feed(line, 0, from, to)
			}
		}))
	}, bad, add)
	if err != nil {
		bad(err)
	}
}

// ready hands on a request the collector finished.
func (in *Input) ready(b *forms.Builder) { in.handOn(b, 0) }

// handOn hands on the request b built, first reporting (at line) each
// field it left out; a request that cannot be made is reported instead.
func (in *Input) handOn(b *forms.Builder, line int) {
	if line == 0 {
		line = b.Line
	}
	// What was left out is said even of a request that cannot be made:
	// it may be why.
	for _, n := range b.Notes {
		in.problem(line, fmt.Errorf("request %q: %s: %w", literal.Clip(b.R.ID), n, forms.ErrLeftOut))
	}
	if b.MoreNotes > 0 {
		in.problem(line, &moreLeftOut{id: literal.Clip(b.R.ID), n: b.MoreNotes})
	}
	r, err := b.Request()
	if err != nil {
		in.problem(line, fmt.Errorf("request %q: %w", literal.Clip(b.R.ID), err))
		return
	}
	r.RunName, r.Line = in.opts.RunName, line
	in.h.Request(r, in.anchor())
}

func (in *Input) anchor() time.Time {
	if !in.opts.Start.IsZero() {
		return in.opts.Start
	}
	return in.ref
}

// summaryLine reads a line of summary documents: each is read as its
// lines come (see summaryReader), and its requests handed on once it
// closes.
func (in *Input) summaryLine(line []byte, offset, base int64) {
	i := 0
	for {
		if in.sum == nil {
			for i < len(line) && isSpace(line[i]) {
				i++
			}
			if i == len(line) {
				return
			}
			if line[i] != '{' {
				// Between documents: a stray line is reported alone, and
				// costs no document after it.
				in.problem(in.lineNo, fmt.Errorf("%w: a line between summary documents", forms.ErrNotJSON))
				return
			}
			first := in.lineNo
			in.sum = newSummaryReader(false, in.opts.MaxPending, in.src, func(err error) { in.problem(first, err) })
			in.sumFirst, in.sumFirstOff, in.sumStart = first, offset, base+int64(i)
		}
		end, closed := in.sum.feed(line, i, base, base+int64(len(line)))
		if !closed {
			return
		}
		r, first, firstOff, start := in.sum, in.sumFirst, in.sumFirstOff, in.sumStart
		in.sum = nil
		in.summaryDone(r, first, firstOff, offset, start, base+int64(end))
		i = end
	}
}

// summaryDone hands on the requests of a summary document read whole,
// which lies from start to end in the input; one too large to hold is
// read again from the input, in parts, when the input can be.
//
// A request's run is which request with its id it is in the input (see
// collector.handedOn), told by the offsets of the document's first and last
// lines.
func (in *Input) summaryDone(r *summaryReader, first int, firstOff, lastOff, start, end int64) {
	if err := r.problem(); err != nil {
		in.problem(first, err)
		return
	}
	bad := func(err error) { in.problem(first, err) }
	handOn := func(sr *forms.SummaryRequest) {
		in.handOn(sr.Build("summary", in.coll.handedOn(sr.ID, firstOff, lastOff)), first)
	}
	if !r.over {
		if err := r.requests(bad, handOn); err != nil {
			in.problem(first, err)
		}
		return
	}
	if in.reread == nil {
		in.problem(first, fmt.Errorf("a summary of more than %d requests or %d MiB of entries, which an input that cannot be read again (stdin, -follow) cannot hold: not imported (raise -max-pending, or import the file by its name)", r.maxReqs, r.maxBytes>>20))
		return
	}
	err := r.passes(func(p *summaryReader) error {
		return readLines(in.reread, start, end, func(line []byte, from, to int64) {
			if !p.closed {
				p.feed(line, 0, from, to)
			}
		})
	}, bad, handOn)
	if err != nil {
		in.problem(first, err)
	}
}

// ReadAgain says the input can be read again at its offsets (a regular
// file): a summary document whose requests are too many to hold at once
// is then read in parts, from r, rather than skipped.
func (in *Input) ReadAgain(r io.ReaderAt) {
	in.reread = r
	in.src = newEntrySource(r, false, in.ref)
	in.scan.src = newEntrySource(r, true, in.ref)
}

// Tick hands on the requests of a followed log that have had no record
// for idle, finished or not.
func (in *Input) Tick(now time.Time, idle time.Duration) {
	in.coll.idle(now, idle)
}

// End reads the end of the input: what it ends inside of is reported, and
// every request held is handed on.
func (in *Input) End() {
	in.scan.end()
	if in.sum != nil {
		// A document that could not be read is said once its end is
		// found, or here.
		err := in.sum.broken
		if err == nil {
			err = errors.New("the input ends inside a summary document")
		}
		in.problem(in.sumFirst, err)
		in.sum = nil
	}
	in.coll.flush()
}

// Stop ends a reading that will resume from [Input.Checkpoint]. Every
// request held, unfinished or finished but not settled (its tables may
// still come after its [OmniTiming] line), is read again from the
// checkpoint, whole, after the restart: handing one on now would export it
// without its later records, and its later records again as a second
// request. Only the requests whose records lie in a file rotated away,
// which no restart can read again, are handed on now.
func (in *Input) Stop() { in.coll.stop() }

// Stats returns the late records (of requests already handed on) and the
// requests dropped unfinished because too many were held.
func (in *Input) Stats() (late, dropped int) { return in.coll.late, in.coll.dropped }

// Checkpoint returns the offset to read the input again from after a
// restart, given that the next line starts at next: the first record of
// the oldest request held, or the start of a record not yet read whole (a
// table, a dict, a summary document spread over lines), whichever comes
// first; the number of lines before it (a restart numbers the lines it
// reads again from there); and the requests remembered as handed on, with
// where their records lie.
func (in *Input) Checkpoint(next int64) (int64, int, []Done) {
	pin, pinLines := next, in.lineNo
	if off, line, ok := in.scan.openFrom(); ok && off < pin {
		pin, pinLines = off, max(line-1, 0)
	}
	if in.sum != nil && in.sumFirstOff < pin {
		pin, pinLines = in.sumFirstOff, max(in.sumFirst-1, 0)
	}
	off, lines := in.coll.checkpoint(pin, pinLines, next, in.lineNo)
	return off, lines, in.coll.remembered()
}

// Rotated says the input moved on to a new file at the same path: the
// offsets of what follows are the new file's.
func (in *Input) Rotated() {
	in.coll.rebase()
	in.scan.rebase()
	in.lineNo = 0
}

// Resume marks requests handed on before a restart, whose records lie
// before until, so that their records read again are not handed on twice;
// the reading starts after lines lines of the input, so that what it
// reports bears the input's line numbers.
func (in *Input) Resume(done []Done, until int64, lines int) {
	in.coll.markDone(done, until)
	in.lineNo = lines
}

// digestOf is the FNV-1a digest of a record's text.
func digestOf(b []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}
