// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"strings"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// A summary dict holds every request of a run (vLLM-Omni's orchestrator
// writes it at the run's end): tens of megabytes, over as many lines as
// its writer likes. It is never held whole. Its top level is walked as its
// lines come, and each entry of its tables (one request's rows in one
// table) is a unit of its own, bounded by maxUnitBytes and maxUnitValues.
// A request's entries lie in three tables one after another, so what each
// request has of them is kept until the dict ends: at most
// Options.MaxPending requests and summaryHeldBytes. Of an input that can
// be read again (a file), that is where each entry lies, a few dozen bytes
// whatever the entry holds, and the entries are read again from there once
// the dict ends, one at a time; of one that cannot (stdin, -follow), their
// text. A dict of more is read again from its file, once per part of its
// requests that fits (the requests whose id hashes to that part), so that
// memory never depends on its length.

// Bounds of one unit read over lines: an entry of a summary's table, the
// value of one of its other keys, an event dict of a log.
const (
	// MaxLine bounds one line of input; a longer one is skipped unread.
	MaxLine       = 1 << 20
	maxUnitValues = 1 << 16
)

// maxUnitBytes bounds one unit's text (a variable for tests).
var maxUnitBytes = 4 << 20

// summaryHeldBytes bounds the text of the entries of a summary kept until
// it ends (a variable for tests).
var summaryHeldBytes = maxHeldBytes

// heldOverhead is what a request kept of a summary costs beside its id
// and the text of its entries: its heldRequest, and its places in held
// and order.
const heldOverhead = 320

// maxSummaryPasses bounds how many times one summary is read again.
const maxSummaryPasses = 256

// summaryTables are the tables of a summary dict, and the key of the rows
// of each entry (the end-to-end table's entry is its row).
var summaryTables = [...]struct{ name, rows string }{{"stage_table", "stages"}, {"trans_table", "transfers"}, {"e2e_table", ""}}

// The other keys of a summary dict: the run's own, checked, never a request's.
var runKeys = [...]string{"overall_summary", "final_stage_id"}

// valueScan follows one value (JSON, or a Python literal) over lines, to
// its end, counting brackets outside strings; it keeps at most
// maxUnitBytes of its text when asked to, and a digest of all of it.
type valueScan struct {
	python, keep bool
	text         []byte
	tooLarge     bool
	sum          uint64
	started      bool
	scalar       bool
	depth        int
	quote        byte
	esc          bool
}

func (v *valueScan) reset(python, keep bool) {
	text := v.text[:0]
	if cap(text) > 64<<10 {
		text = nil // a large unit's buffer is not kept for the next
	}
	*v = valueScan{python: python, keep: keep, text: text, sum: fnvOffset}
}

// feed reads line from i, and returns where the value ends and true, or
// len(line) and false when it goes on to the next line. A string is never
// continued on the next line (neither JSON nor a repr breaks one): one
// left open is closed at its line's end, and the value fails to parse.
func (v *valueScan) feed(line []byte, i int) (int, bool) {
	start := i
	if !v.started {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return i, false // the value begins on a later line
		}
		start = i
		v.started = true
		if c := line[i]; !(c == '{' || c == '[' || v.python && c == '(') {
			v.scalar = true
		}
	}
	for ; i < len(line); i++ {
		c := line[i]
		switch {
		case v.quote != 0:
			switch {
			case v.esc:
				v.esc = false
			case c == '\\':
				v.esc = true
			case c == v.quote:
				v.quote = 0
				if v.depth == 0 && !v.scalar {
					v.add(line[start : i+1])
					return i + 1, true
				}
			}
		case c == '"' || v.python && c == '\'':
			v.quote = c
		case v.scalar:
			if isSpace(c) || c == ',' || c == ':' || c == '}' || c == ']' || c == ')' {
				v.add(line[start:i])
				return i, true
			}
		case c == '{' || c == '[' || v.python && c == '(':
			v.depth++
		case c == '}' || c == ']' || v.python && c == ')':
			if v.depth--; v.depth <= 0 {
				v.add(line[start : i+1])
				return i + 1, true
			}
		}
	}
	v.add(line[start:])
	if v.scalar && v.quote == 0 {
		return len(line), true // a number or a word ends with its line
	}
	v.quote, v.esc = 0, false
	v.add(newline)
	return len(line), false
}

var newline = []byte{'\n'}

func (v *valueScan) add(b []byte) {
	if !v.keep {
		return
	}
	h := v.sum
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	v.sum = h
	if v.tooLarge {
		return
	}
	if len(v.text)+len(b) > maxUnitBytes {
		v.tooLarge, v.text = true, v.text[:0]
		return
	}
	v.text = append(v.text, b...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// The places of a summary dict's top level a reader can be at.
const (
	atOpen    = iota // before its {
	atKey            // a key or its }
	atColon          // the : after a key
	atValue          // a key's value
	inValue          // inside a value that is no table
	atItem           // an entry of a table, or its ]
	inItem           // inside an entry
	atItemSep        // the , or ] after an entry
	atAfter          // the , or } after a value
	inBroken         // in a document that could not be read, to its end
)

// What the value being read is.
const (
	valueSkipped = iota
	valueEntry
	valueRun
)

// heldRequest is what a summary holds of one request until it ends: its
// first entry in each table (where it lies in the input, or its text), and
// how many more it had.
type heldRequest struct {
	id    string
	held  uint8 // the tables it has an entry in, by bit
	at    [len(summaryTables)]entryAt
	texts [len(summaryTables)][]byte
	dups  [len(summaryTables)]int
}

// entryAt is where an entry of a summary's table lies in its input: from
// the start of the line it begins on (of the log line, in a log) to the
// end of the line it ends on, beginning at byte col of its first line as
// read (the line's message, in a log; first: the dict's first line, whose
// message is read after its [Summary] tag), with the digest of its text.
type entryAt struct {
	from, to int64
	col      int
	first    bool
	sum      uint64
}

// entrySource reads the entries of a summary again from an input that
// can be read again, where they were read the first time.
type entrySource struct {
	r      io.ReaderAt
	python bool
	ref    time.Time // a log's, to find each line's message
	br     *bufio.Reader
}

func newEntrySource(r io.ReaderAt, python bool, ref time.Time) *entrySource {
	if r == nil {
		return nil
	}
	return &entrySource{r: r, python: python, ref: ref}
}

// text returns the text of the entry at at, as it was read the first time.
func (s *entrySource) text(at *entryAt) ([]byte, error) {
	var v valueScan
	v.reset(s.python, true)
	col, done := at.col, false
	feed := func(line []byte, _, _ int64) {
		if !done {
			_, done = v.feed(line, col)
			col = 0
		}
	}
	if s.python {
		feed = literalLinesFrom(s.ref, at.first, feed)
	}
	sec := io.NewSectionReader(s.r, at.from, at.to-at.from)
	if s.br == nil {
		s.br = bufio.NewReaderSize(sec, 16<<10)
	} else {
		s.br.Reset(sec)
	}
	if err := linesOf(s.br, at.from, feed); err != nil {
		return nil, fmt.Errorf("reading the summary again: %w", err)
	}
	if !done || v.tooLarge || v.sum != at.sum {
		return nil, errChanged
	}
	return v.text, nil
}

// errChanged: what a summary read again holds is not what was read.
var errChanged = errors.New("the file changed while its summary was read again: the rest of it is not imported")

// summaryReader reads one summary dict over lines, in one pass: all its
// requests, or in a pass again over a dict too large to hold at once,
// those whose id hashes to res modulo mod.
type summaryReader struct {
	python bool
	// first: the first pass, which reports what is wrong with the dict
	// and its entries; later passes report only their requests'.
	first    bool
	mod, res uint64
	seed     maphash.Seed
	maxReqs  int
	maxBytes int
	bad      func(error)

	at     int
	comma  bool
	key    string
	what   int
	table  int
	index  int
	seen   uint8 // summary keys met, by bit
	depth  int
	val    valueScan
	lines  int
	fed    int64
	sum    uint64
	closed bool

	// src reads the entries held again; nil: their text is held.
	src *entrySource
	// lineFrom and lineTo are where the line being read lies in the
	// input; cur is where the entry being read lies.
	lineFrom, lineTo int64
	cur              entryAt

	held    map[string]*heldRequest
	order   []*heldRequest
	bytes   int
	over    bool
	overAt  int64 // bytes fed when the bound was passed
	entries [len(summaryTables)]int
	tables  uint8 // tables met
	notList int   // a table whose value is not a list, -1 when none
	broken  error
}

// newSummaryReader returns a reader of a summary dict, which holds at
// most maxReqs requests; src, when not nil, reads its entries again.
func newSummaryReader(python bool, maxReqs int, src *entrySource, bad func(error)) *summaryReader {
	if maxReqs <= 0 {
		maxReqs = DefaultMaxPending
	}
	return &summaryReader{python: python, first: true, mod: 1, seed: maphash.MakeSeed(), maxReqs: maxReqs, src: src,
		maxBytes: summaryHeldBytes, bad: bad, held: map[string]*heldRequest{}, notList: -1, sum: fnvOffset}
}

// again returns a reader of the same dict for a pass over the requests
// whose id hashes to res modulo mod.
func (r *summaryReader) again(mod, res uint64) *summaryReader {
	return &summaryReader{python: r.python, mod: mod, res: res, seed: r.seed, maxReqs: r.maxReqs, src: r.src,
		maxBytes: r.maxBytes, bad: func(error) {}, held: map[string]*heldRequest{}, notList: -1, sum: fnvOffset}
}

func (r *summaryReader) notation() string {
	if r.python {
		return "a dict of the log"
	}
	return forms.ErrNotJSON.Error()
}

// fail stops reading the dict: what it holds is dropped, and the rest of
// it is skipped to its end.
func (r *summaryReader) fail(line []byte, i int, format string, args ...any) (int, bool) {
	r.broken = fmt.Errorf("%s: line %d of the document, byte %d: %s", r.notation(), r.lines, i+1, fmt.Sprintf(format, args...))
	depth := r.depth
	if r.at == inValue || r.at == inItem {
		depth += r.val.depth
	}
	quote := r.val.quote
	r.held, r.order = nil, nil
	r.at = inBroken
	r.val.reset(r.python, false)
	r.val.started, r.val.depth, r.val.quote = true, depth, quote
	return r.step(line, i)
}

// feed reads line from i (a line of the dict, its line end removed),
// which lies from from to to in the input (in a log: the log line whose
// message it is), and returns where the dict ends and true, or len(line)
// and false.
func (r *summaryReader) feed(line []byte, i int, from, to int64) (int, bool) {
	r.lines++
	r.lineFrom, r.lineTo = from, to
	end, closed := r.step(line, i)
	seg := line[i:end]
	r.fed += int64(len(seg)) + 1
	h := r.sum
	for _, c := range seg {
		h ^= uint64(c)
		h *= fnvPrime
	}
	h ^= '\n'
	h *= fnvPrime
	r.sum = h
	r.closed = closed
	return end, closed
}

func (r *summaryReader) step(line []byte, i int) (int, bool) {
	for {
		if r.at != inValue && r.at != inItem && r.at != inBroken {
			for i < len(line) && isSpace(line[i]) {
				i++
			}
			if i == len(line) {
				return i, false
			}
		}
		var c byte // of a skeleton's place; a value's reader reads its own
		if i < len(line) {
			c = line[i]
		}
		switch r.at {
		case atOpen:
			if c != '{' {
				return r.fail(line, i, "expected {")
			}
			r.depth, r.at, r.comma = 1, atKey, false
			i++
		case atKey:
			if c == '}' {
				if r.comma && !r.python {
					return r.fail(line, i, "expected a key")
				}
				r.depth = 0
				return i + 1, true
			}
			j, key, ok := r.readKey(line, i)
			if !ok {
				return r.fail(line, i, "expected a key on one line")
			}
			r.key, r.at, i = key, atColon, j
		case atColon:
			if c != ':' {
				return r.fail(line, i, "expected :")
			}
			r.at = atValue
			i++
		case atValue:
			if c == ',' || c == '}' || c == ']' {
				return r.fail(line, i, "expected a value")
			}
			r.what = valueSkipped
			r.table = tableIndex(r.key)
			bit := uint8(0)
			if r.table >= 0 {
				bit = 1 << r.table
			} else if k := runKeyIndex(r.key); k >= 0 && !r.python {
				bit = 1 << (len(summaryTables) + k)
			}
			switch {
			case bit == 0:
			case r.seen&bit != 0:
				r.bad(fmt.Errorf("%w: %s appears twice in one summary: the second is left out", forms.ErrBadField, r.key))
			case r.table >= 0:
				r.seen |= bit
				r.tables |= bit
				if c == '[' {
					r.depth, r.at, r.comma, r.index = 2, atItem, false, 0
					i++
					continue
				}
				if r.notList < 0 {
					r.notList = r.table
				}
			default:
				r.seen |= bit
				r.what = valueRun
			}
			r.val.reset(r.python, r.what == valueRun)
			r.at = inValue
		case inValue:
			j, done := r.val.feed(line, i)
			if !done {
				return j, false
			}
			if r.val.scalar && len(r.val.text) == 0 && r.what == valueRun {
				return r.fail(line, j, "expected a value")
			}
			if r.what == valueRun {
				r.runValue()
				if r.broken != nil {
					return r.fail(line, j, "%s: %v", r.key, r.broken)
				}
			}
			r.at, i = atAfter, j
		case atItem:
			if c == ']' {
				if r.comma && !r.python {
					return r.fail(line, i, "expected an entry")
				}
				r.depth, r.at = 1, atAfter
				i++
				continue
			}
			if c == ',' || c == '}' {
				return r.fail(line, i, "expected an entry")
			}
			r.val.reset(r.python, true)
			r.cur = entryAt{from: r.lineFrom, col: i, first: r.lines == 1}
			r.at = inItem
		case inItem:
			j, done := r.val.feed(line, i)
			if !done {
				return j, false
			}
			r.cur.to, r.cur.sum = r.lineTo, r.val.sum
			r.entry()
			r.index++
			r.at, i = atItemSep, j
		case atItemSep:
			switch c {
			case ',':
				r.at, r.comma = atItem, true
			case ']':
				r.depth, r.at = 1, atAfter
			default:
				return r.fail(line, i, "expected , or ]")
			}
			i++
		case atAfter:
			switch c {
			case ',':
				r.at, r.comma = atKey, true
			case '}':
				r.depth = 0
				return i + 1, true
			default:
				return r.fail(line, i, "expected , or }")
			}
			i++
		case inBroken:
			return r.val.feed(line, i)
		}
	}
}

// readKey reads a key at line[i]: a quoted string on one line (or, in a
// Python dict, a number or a word).
func (r *summaryReader) readKey(line []byte, i int) (int, string, bool) {
	q := line[i]
	if q != '"' && !(r.python && q == '\'') {
		if !r.python {
			return i, "", false
		}
		j := i
		for j < len(line) && !isSpace(line[j]) && line[j] != ':' && line[j] != ',' && line[j] != '}' {
			j++
		}
		return j, string(line[i:j]), j > i
	}
	esc := false
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == q:
			var v literal.Value
			var err error
			if r.python {
				v, err = literal.ParsePython(string(line[i:j+1]), 1)
			} else {
				v, err = literal.ParseJSON(line[i:j+1], 1)
			}
			return j + 1, v.Str, err == nil
		}
	}
	return i, "", false
}

func tableIndex(key string) int {
	for i, t := range summaryTables {
		if t.name == key {
			return i
		}
	}
	return -1
}

func runKeyIndex(key string) int {
	for i, k := range runKeys {
		if k == key {
			return i
		}
	}
	return -1
}

func (r *summaryReader) parse(text []byte) (literal.Value, error) {
	if r.python {
		return literal.ParsePython(string(text), maxUnitValues)
	}
	return literal.ParseJSON(text, maxUnitValues)
}

// runValue checks the value of a key of the run's own (one too large to
// parse is taken as it is): such a key tells no request, but a summary that
// holds a broken one is broken.
func (r *summaryReader) runValue() {
	if !r.first || r.val.tooLarge {
		return // the first pass checked it
	}
	if _, err := r.parse(r.val.text); err != nil {
		r.broken = err
	}
}

// entry reads the entry of a table just read: the first pass reports an
// entry that cannot be read (too large, not parsed, not an object, no
// usable request_id); the entries of the requests of this pass are kept
// until the dict ends.
func (r *summaryReader) entry() {
	t := r.table
	name := summaryTables[t].name
	r.entries[t]++
	if !r.first {
		// A later pass: the first read each entry whole and reported what
		// it could not. An id that can be seen without parsing (a plain
		// string, first in its entry, as vLLM-Omni writes it) tells at
		// once whether the entry is this pass's.
		if id, ok := sniffID(r.val.text, r.python); ok && !r.val.tooLarge {
			r.hold(t, id)
			return
		}
	}
	if r.val.tooLarge {
		r.bad(fmt.Errorf("%w: %s entry %d is larger than %d bytes", forms.ErrBadField, name, r.index, maxUnitBytes))
		return
	}
	v, err := r.parse(r.val.text)
	if err != nil {
		r.bad(fmt.Errorf("%s: %s entry %d: %v", r.notation(), name, r.index, err))
		return
	}
	if v.Kind != literal.Object {
		r.bad(fmt.Errorf("%w: %s entry %d is not an object", forms.ErrBadField, name, r.index))
		return
	}
	idv, _ := v.Get("request_id")
	id, err := forms.IDOf(idv, "request_id")
	if err != nil {
		r.bad(fmt.Errorf("%s entry %d: %w", name, r.index, err))
		return
	}
	r.hold(t, id)
}

// hold keeps the entry just read of table t, of request id, when the id
// is this pass's.
func (r *summaryReader) hold(t int, id string) {
	if r.over || r.mod > 1 && maphash.String(r.seed, id)%r.mod != r.res {
		return
	}
	h := r.held[id]
	if h == nil {
		h = &heldRequest{id: id}
		r.held[id] = h
		r.order = append(r.order, h)
		r.bytes += heldOverhead + len(id)
	}
	if h.held&(1<<t) != 0 {
		h.dups[t]++
		return
	}
	h.held |= 1 << t
	if r.src != nil {
		h.at[t] = r.cur // read again once the dict ends
	} else {
		h.texts[t] = bytes.Clone(r.val.text)
		r.bytes += len(h.texts[t])
	}
	if len(r.order) > r.maxReqs || r.bytes > r.maxBytes {
		r.over, r.overAt = true, r.fed
		r.held, r.order, r.bytes = nil, nil, 0
	}
}

// sniffID returns the request_id of an entry's text when it is a plain
// string (no escape, not empty, one literal) written first in the entry.
func sniffID(text []byte, python bool) (string, bool) {
	i := 0
	skip := func() {
		for i < len(text) && isSpace(text[i]) {
			i++
		}
	}
	str := func() ([]byte, bool) {
		if i >= len(text) || !(text[i] == '"' || python && text[i] == '\'') {
			return nil, false
		}
		q := text[i]
		j := i + 1
		for j < len(text) && text[j] != q {
			if text[j] == '\\' || text[j] < 0x20 {
				return nil, false
			}
			j++
		}
		if j >= len(text) {
			return nil, false
		}
		s := text[i+1 : j]
		i = j + 1
		return s, true
	}
	if skip(); i >= len(text) || text[i] != '{' {
		return "", false
	}
	i++
	skip()
	if k, ok := str(); !ok || string(k) != "request_id" {
		return "", false
	}
	if skip(); i >= len(text) || text[i] != ':' {
		return "", false
	}
	i++
	skip()
	id, ok := str()
	if !ok || len(id) == 0 {
		return "", false
	}
	if skip(); i >= len(text) || text[i] != ',' && text[i] != '}' {
		return "", false
	}
	return string(id), true
}

// problem returns what keeps the dict read from making requests: a
// document that could not be read, a table that is not a list, or, in
// JSON, a dict with no table at all (in a log, such a dict of the whole
// run is passed over).
func (r *summaryReader) problem() error {
	switch {
	case r.broken != nil:
		return r.broken
	case r.notList >= 0:
		return fmt.Errorf("%w: %s is not a list", forms.ErrBadField, summaryTables[r.notList].name)
	case r.tables == 0 && !r.python:
		return forms.ErrNotSummary
	}
	return nil
}

// requests hands on each request kept, in the order its first entry came:
// its entries as a summary of its own, which summaryRows groups as it
// groups a whole dict's. It stops at an entry that cannot be read again as
// it was read (the file changed).
func (r *summaryReader) requests(bad func(error), fn func(sr *forms.SummaryRequest)) error {
	order := r.order
	r.order, r.held = nil, nil
	for i, h := range order {
		order[i] = nil
		doc := literal.Value{Kind: literal.Object}
		for t, text := range h.texts {
			for range h.dups[t] {
				bad(fmt.Errorf("%s: a second entry of request %q", summaryTables[t].name, literal.Clip(h.id)))
			}
			if h.held&(1<<t) == 0 {
				continue
			}
			if r.src != nil {
				var err error
				if text, err = r.src.text(&h.at[t]); err != nil {
					return err
				}
			}
			v, err := r.parse(text)
			if err != nil {
				continue // reported by the first pass
			}
			doc.Keys = append(doc.Keys, summaryTables[t].name)
			doc.Vals = append(doc.Vals, literal.Value{Kind: literal.Array, Items: []literal.Value{v}})
		}
		if len(doc.Keys) == 0 {
			continue
		}
		reqs, err := forms.SummaryRows(&doc, bad)
		if err != nil {
			bad(err)
			continue
		}
		for j := range reqs {
			fn(&reqs[j])
		}
	}
	return nil
}

// passes reads the dict again, from read, once per part of its requests
// that fits the bounds, and hands on each part's requests; feedAll feeds
// the dict's lines to a reader as the first pass was fed them. It returns
// an error when the dict could not be read whole again (the file changed,
// or it would take more than maxSummaryPasses passes).
func (r *summaryReader) passes(feedAll func(*summaryReader) error, bad func(error), fn func(*forms.SummaryRequest)) error {
	// As many parts as the bounds need, by the entries counted and the
	// text read, with a margin: a part that still does not fit is halved.
	most := 0
	for _, n := range r.entries {
		most = max(most, n)
	}
	parts := max(most*5/(4*r.maxReqs)+1, int(r.fed*5/(4*int64(r.maxBytes)))+1, 2)
	type part struct{ mod, res uint64 }
	var todo []part
	for i := parts - 1; i >= 0; i-- {
		todo = append(todo, part{uint64(parts), uint64(i)})
	}
	for n := 0; len(todo) > 0; n++ {
		if n >= maxSummaryPasses {
			return fmt.Errorf("a summary that takes more than %d passes of %d requests (raise -max-pending): the rest of it is not imported", maxSummaryPasses, r.maxReqs)
		}
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		pass := r.again(p.mod, p.res)
		if err := feedAll(pass); err != nil {
			return fmt.Errorf("reading the summary again: %w: the rest of it is not imported", err)
		}
		if !pass.closed || pass.sum != r.sum {
			return errChanged
		}
		if pass.over {
			todo = append(todo, part{2 * p.mod, p.res + p.mod}, part{2 * p.mod, p.res})
			continue
		}
		if err := pass.requests(bad, fn); err != nil {
			return err
		}
	}
	return nil
}

// readLines feeds fn the lines of r from off to end as the import reads
// them: split at line ends, which are removed, and a line longer than
// MaxLine skipped; each with where it lies.
func readLines(r io.ReaderAt, off, end int64, fn func(line []byte, from, to int64)) error {
	return linesOf(bufio.NewReaderSize(io.NewSectionReader(r, off, end-off), 64<<10), off, fn)
}

// linesOf feeds fn the lines of br, which begins at offset off of the
// input, as readLines does.
func linesOf(br *bufio.Reader, off int64, fn func(line []byte, from, to int64)) error {
	var long []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !tooLong && len(long)+len(chunk) <= MaxLine {
				long = append(long, chunk...)
			} else {
				tooLong, long = true, long[:0]
			}
			off += int64(len(chunk))
			continue
		}
		line := chunk
		if len(long) > 0 {
			line = append(long, chunk...)
		}
		from := off - int64(len(line)-len(chunk))
		off += int64(len(chunk))
		line = bytes.TrimSuffix(line, newline)
		if !tooLong && (len(line) > 0 || err == nil) && len(line) <= MaxLine {
			fn(line, from, from+int64(len(line)))
		}
		long, tooLong = long[:0], false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// literalLines returns, of the lines of a log, the text a literal begun on
// the first of them was read from (see logScanner.line): its first line's
// message after [Summary], and each line continuing it (a message that
// begins with a space).
func literalLines(ref time.Time, fn func(line []byte, from, to int64)) func([]byte, int64, int64) {
	return literalLinesFrom(ref, true, fn)
}

// literalLinesFrom is literalLines of lines whose first is the literal's
// first only when first is set.
func literalLinesFrom(ref time.Time, first bool, fn func(line []byte, from, to int64)) func([]byte, int64, int64) {
	return func(line []byte, from, to int64) {
		l := strings.TrimRight(string(line), "\r")
		if first {
			l = strings.TrimPrefix(l, literal.BOM)
		}
		_, msg := forms.SplitLogLine(l, ref, time.UTC, nil) // only the message is read again
		if first {
			first = false
			fn([]byte(strings.TrimPrefix(strings.TrimSpace(msg), "[Summary] ")), from, to)
			return
		}
		if strings.HasPrefix(msg, " ") {
			fn([]byte(msg), from, to)
		}
	}
}

// The FNV-1a hash's constants, of the digests of what is read.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)
