// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// logRecord is one thing a vLLM log says about requests.
type logRecord struct {
	at     time.Time // the time of its first line
	offset int64     // where its first line starts in the input
	lineNo int       // its first line's number
	text   string    // what it says, for the request's digest
	timing *forms.OmniTiming
	table  *boxTable
	// value is an event dict; sum a [Summary] dict read, which ends at
	// end in the input (summary says the record is one).
	value   *literal.Value
	summary bool
	sum     *summaryReader
	end     int64
}

// boxTable is a per-request table of the log (vllm_omni/metrics/utils.py,
// _format_table): a title naming the request, a header of stages or
// edges, a row per field; a blank cell is a field that stage did not have.
type boxTable struct {
	kind      string // StageRequestStats, TransferEdgeStats, RequestE2EStats
	requestID string
	header    []string
	rows      [][]string
	borders   int
	lines     int
	bytes     int
}

var tableKinds = []string{"StageRequestStats", "TransferEdgeStats", "RequestE2EStats"}

// Bounds of one multi-line record of a log (a dict is a unit: see
// maxUnitBytes).
const (
	maxTableLines = 1000
	maxTableBytes = 4 << 20
)

// logScanner turns the lines of a vLLM log into records. It keeps at most
// one open table (of at most maxTableBytes) and one open literal: an event
// dict of at most maxUnitBytes, or a [Summary] dict, read as it comes (see
// summaryReader). Its memory is bounded by those, never by the log's
// length.
type logScanner struct {
	ref time.Time
	// zone is the zone the log's times are read in (see Options.Zone).
	zone *time.Location
	emit func(logRecord)
	bad  func(lineNo int, err error)
	last time.Time
	n    int // the number of the line being read
	// lineOff and lineEnd are where the line being read starts and ends
	// in the input.
	lineOff, lineEnd int64
	// src, when not nil, reads the input again: a [Summary] dict's
	// entries are read again from it rather than held (see summaryReader).
	src *entrySource

	tables map[string]*boxTable
	tabAt  map[string]logRecord
	// gap counts the lines since the open table or dict was last
	// continued.
	gap int

	// undated: a record was read with no date before it, and said so.
	undated bool
	stamps  forms.StampCache

	litOpen bool
	lit     valueScan
	litSum  *summaryReader
	litRec  logRecord
	// maxPending bounds the requests a [Summary] dict holds.
	maxPending int
}

func newLogScanner(ref time.Time, emit func(logRecord), bad func(int, error)) *logScanner {
	return &logScanner{ref: ref, zone: time.UTC, emit: emit, bad: bad, tables: map[string]*boxTable{}, tabAt: map[string]logRecord{}}
}

// maxOpenGap is how many lines of other messages a table or dict may stay
// open across (another process writing into the same log) before it is
// reported unfinished and dropped: an open record holds the checkpoint
// back, and must not hold it past what a restart can tell apart.
const maxOpenGap = 1000

// line reads line number n (without its line end), which starts at offset
// and ends at end in the input.
func (s *logScanner) line(line string, offset, end int64, n int) {
	s.n, s.lineOff, s.lineEnd = n, offset, end
	if s.gap++; s.gap > maxOpenGap && (s.litOpen || len(s.tables) > 0) {
		s.dropOpen(fmt.Sprintf("left unfinished for %d lines", maxOpenGap))
	}
	line = strings.TrimRight(line, "\r")
	st, msg := forms.SplitLogLine(line, s.ref, s.zone, &s.stamps)
	t := st.T
	if st.Dated {
		if !st.Alt.IsZero() && t.Before(s.last) && !st.Alt.Before(s.last) {
			// A wall clock shown twice: the second time, when the first
			// would go back before the line before it.
			t = st.Alt
		}
		t = t.UTC() // an instant: how it prints depends on no zone
		s.last = t
	} else {
		// A line that continues a message, or one written without a date,
		// is as old as the last dated line.
		t = s.last
	}
	if s.litOpen && strings.HasPrefix(msg, " ") {
		s.literalLine(msg)
		return
	}
	trimmed := strings.TrimSpace(msg)
	if trimmed == "" {
		return
	}
	switch c := trimmed[0]; {
	case c == '+' || c == '|':
		s.tableLine(trimmed)
		return
	case c == '[' && strings.HasPrefix(trimmed, forms.OmniTimingTag):
		tm, err := forms.ParseOmniTiming(trimmed)
		if errors.Is(err, forms.ErrTurnMarker) {
			return
		}
		if err != nil {
			s.bad(n, fmt.Errorf("[OmniTiming]: %w", err))
			return
		}
		s.record(logRecord{at: t, offset: offset, lineNo: n, text: trimmed, timing: tm})
		return
	case c == '[':
		if kind, id, ok := tableTitle(trimmed); ok {
			// One table is open at a time (a writer prints a table whole):
			// one still open is left unfinished, and said so.
			for open, tb := range s.tables {
				if tb != nil {
					s.bad(s.tabAt[open].lineNo, fmt.Errorf("a %s table left unfinished by the next table", open))
				}
			}
			clear(s.tables)
			s.gap = 0
			s.tables[kind] = &boxTable{kind: kind, requestID: id}
			s.tabAt[kind] = logRecord{at: t, offset: offset, lineNo: n}
			return
		}
		if strings.HasPrefix(trimmed, "[Summary] {") {
			s.openLiteral(strings.TrimPrefix(trimmed, "[Summary] "), logRecord{at: t, offset: offset, lineNo: n, summary: true})
		}
		return
	case c == '{':
		s.openLiteral(trimmed, logRecord{at: t, offset: offset, lineNo: n})
	}
}

// record hands on one record. A record with no dated line at or before
// it has no time: its request is placed as a summary's is, and the input
// says so once.
func (s *logScanner) record(rec logRecord) {
	if rec.at.IsZero() && !s.undated {
		s.undated = true
		s.bad(rec.lineNo, fmt.Errorf("a record of a line without a date (and no dated line before it): its request is placed from -start or the input's modification time, and so is every such request of this input: %w", forms.ErrLeftOut))
	}
	s.emit(rec)
}

// tableTitle reads "[StageRequestStats [request_id=ID]]".
func tableTitle(msg string) (string, string, bool) {
	for _, k := range tableKinds {
		prefix := "[" + k + " [request_id="
		if strings.HasPrefix(msg, prefix) && strings.HasSuffix(msg, "]]") {
			return k, msg[len(prefix) : len(msg)-2], true
		}
	}
	return "", "", false
}

func (s *logScanner) tableLine(msg string) {
	s.gap = 0
	// A table line belongs to the one table open: tables of one request
	// are printed one after another, each whole.
	var tb *boxTable
	var kind string
	for k, t := range s.tables {
		if t != nil {
			tb, kind = t, k
			break
		}
	}
	if tb == nil {
		return
	}
	tb.bytes += len(msg)
	if tb.lines++; tb.lines > maxTableLines || tb.bytes > maxTableBytes {
		delete(s.tables, kind)
		s.bad(s.tabAt[kind].lineNo, fmt.Errorf("a %s table of more than %d lines or %d MiB", kind, maxTableLines, maxTableBytes>>20))
		return
	}
	if msg[0] == '+' {
		if tb.borders++; tb.borders == 3 {
			delete(s.tables, kind)
			rec := s.tabAt[kind]
			rec.table = tb
			rec.text = kind + "\x00" + tb.requestID + "\x00" + fmt.Sprint(tb.header, tb.rows)
			s.record(rec)
		}
		return
	}
	cells := strings.Split(strings.Trim(msg, "|"), "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	if tb.header == nil {
		tb.header = cells
		return
	}
	tb.rows = append(tb.rows, cells)
}

// tableRows turns a table into the rows a summary dict would hold: a row
// per column (stage or edge), or the one row of an end-to-end table.
func (tb *boxTable) tableRows() []literal.Value {
	if len(tb.header) < 2 {
		return nil // a table without columns: nothing to read
	}
	colKey := map[string]string{"StageRequestStats": "stage", "TransferEdgeStats": "edge"}[tb.kind]
	ncol := len(tb.header) - 1
	if colKey == "" {
		ncol = 1
	}
	out := make([]literal.Value, 0, ncol)
	for c := 1; c <= ncol && c < len(tb.header); c++ {
		row := literal.Value{Kind: literal.Object}
		if colKey != "" {
			row.Keys = append(row.Keys, colKey)
			row.Vals = append(row.Vals, literal.Value{Kind: literal.String, Str: strings.TrimSpace(tb.header[c])})
		}
		for _, r := range tb.rows {
			if len(r) <= c || r[0] == "" || r[c] == "" {
				continue // a blank cell: that column has no such field
			}
			// A field written twice stays twice: a phase's two readings
			// must agree, or both are reported and left out.
			row.Keys = append(row.Keys, r[0])
			row.Vals = append(row.Vals, cellValue(r[c]))
		}
		out = append(out, row)
	}
	return out
}

// cellValue reads a cell as _format_table writes it: numbers with
// thousands separators, True and False, or text.
func cellValue(cell string) literal.Value {
	switch cell {
	case "True":
		return literal.Value{Kind: literal.Bool, Bool: true}
	case "False":
		return literal.Value{Kind: literal.Bool}
	}
	if f, ok := forms.PlainNumber(cell); ok {
		return literal.Value{Kind: literal.Number, Num: f, Str: strings.ReplaceAll(cell, ",", "")}
	}
	return literal.Value{Kind: literal.String, Str: cell}
}

func (s *logScanner) openLiteral(first string, rec logRecord) {
	if s.litOpen {
		s.bad(s.litRec.lineNo, errors.New("a dict left open by the next one"))
	}
	s.litOpen, s.litRec, s.litSum = true, rec, nil
	if rec.summary {
		line := rec.lineNo
		s.litSum = newSummaryReader(true, s.maxPending, s.src, func(err error) { s.bad(line, err) })
	} else {
		s.lit.reset(true, true)
	}
	s.literalLine(first)
}

// literalLine reads a line of the open literal (the message of the log
// line being read), and hands the literal on once its brackets close.
// Strings never span lines in pformat's output.
func (s *logScanner) literalLine(line string) {
	s.gap = 0
	b := []byte(line)
	var end int
	var done bool
	if s.litSum != nil {
		end, done = s.litSum.feed(b, 0, s.lineOff, s.lineEnd)
	} else {
		end, done = s.lit.feed(b, 0)
	}
	if !done {
		return
	}
	s.litOpen = false
	rec := s.litRec
	if len(bytes.TrimSpace(b[end:])) > 0 {
		s.bad(rec.lineNo, errors.New("a dict of the log: text after it on its last line"))
	}
	if s.litSum != nil {
		rec.sum, rec.end = s.litSum, s.lineEnd
		s.litSum = nil
		s.emit(rec)
		return
	}
	if s.lit.tooLarge {
		s.bad(rec.lineNo, fmt.Errorf("a dict larger than %d bytes", maxUnitBytes))
		return
	}
	text := string(s.lit.text)
	s.lit.reset(true, true)
	v, err := literal.ParsePython(text, maxUnitValues)
	if err != nil {
		s.bad(rec.lineNo, fmt.Errorf("a dict of the log: %w", err))
		return
	}
	rec.value, rec.text = &v, text
	s.record(rec)
}

// rebase says the input moved to a new file: a record still open began in
// the old one, which a restart cannot read; its offset falls back to the
// new file's start, and its line numbers are the new file's.
func (s *logScanner) rebase() {
	for kind, rec := range s.tabAt {
		rec.offset, rec.lineNo = 0, 0
		s.tabAt[kind] = rec
	}
	s.litRec.offset, s.litRec.lineNo = 0, 0
}

// dropOpen reports and drops the table and the dict open, if any.
func (s *logScanner) dropOpen(why string) {
	for kind, tb := range s.tables {
		if tb != nil {
			s.bad(s.tabAt[kind].lineNo, fmt.Errorf("a %s table %s", kind, why))
		}
	}
	clear(s.tables)
	if s.litOpen {
		s.bad(s.litRec.lineNo, fmt.Errorf("a dict %s", why))
		s.closeLiteral()
	}
}

// openFrom returns the offset and line number of the first line of a
// record not yet read whole (a table, a literal spread over lines), if one
// is open.
func (s *logScanner) openFrom() (int64, int, bool) {
	off, line, ok := int64(0), 0, false
	for kind, tb := range s.tables {
		if tb != nil {
			off, line, ok = s.tabAt[kind].offset, s.tabAt[kind].lineNo, true
		}
	}
	if s.litOpen && (!ok || s.litRec.offset < off) {
		off, line, ok = s.litRec.offset, s.litRec.lineNo, true
	}
	return off, line, ok
}

// end reports what the input ended inside of: a table or a dict cut off
// (a truncated last line).
func (s *logScanner) end() {
	for kind, tb := range s.tables {
		if tb != nil {
			s.bad(s.tabAt[kind].lineNo, fmt.Errorf("the input ends inside a %s table", kind))
		}
	}
	s.tables = map[string]*boxTable{}
	if s.litOpen {
		err := errors.New("the input ends inside a dict")
		if s.litSum != nil && s.litSum.broken != nil {
			err = s.litSum.broken // a dict that could not be read: said once
		}
		s.closeLiteral()
		s.bad(s.litRec.lineNo, err)
	}
}

// SetNow tells a followed log (or stdin) what time it is: a line's year is
// the one that puts it at most a day after that, so that a log followed
// across a New Year gets the new year's lines right.
func (in *Input) SetNow(now time.Time) { in.scan.ref = now }

// closeLiteral drops the literal open.
func (s *logScanner) closeLiteral() {
	s.litOpen, s.litSum = false, nil
	s.lit.reset(true, true)
}
