// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// readFrom reads data as the import reads a file: line by line, and, when
// again is set, able to read it again at its offsets.
func readFrom(t *testing.T, data []byte, opts Options, again io.ReaderAt) *collected {
	t.Helper()
	c := &collected{}
	in, err := NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.Local), opts, c)
	if err != nil {
		t.Fatal(err)
	}
	if again != nil {
		in.ReadAgain(again)
	}
	// Lines end at \n alone, as the import splits them: a \r stays.
	var off int64
	for line := range bytes.Lines(data) {
		in.Line(bytes.TrimSuffix(line, []byte("\n")), off)
		off += int64(len(line))
	}
	in.End()
	return c
}

// summaryDoc writes a summary of n requests as vLLM-Omni writes it,
// indented, each table in its order; bad adds entries that cannot be read
// and a second entry of one request.
func summaryDoc(n int, bad bool) []byte {
	var b strings.Builder
	b.WriteString("{\"final_stage_id\": {\"*\": 1},\n \"overall_summary\": {\"e2e_requests\": 3},\n \"stage_table\": [\n")
	for i := range n {
		fmt.Fprintf(&b, "  {\"request_id\": \"r%d\",\n   \"stages\": [{\"stage_id\": 0, \"stage\": \"0:thinker\", \"stage_gen_time_ms\": %d.5},\n              {\"stage_id\": 1, \"stage\": \"1:dit\", \"forward_time_ms\": 7}]},\n", i, i)
	}
	if bad {
		b.WriteString("  7, {\"stages\": []}, {\"request_id\": \"r3\", \"stages\": []},\n")
	}
	b.WriteString("  {\"request_id\": \"last\", \"stages\": [{\"stage_id\": 0, \"stage_gen_time_ms\": 1}]}],\n \"trans_table\": [\n")
	for i := range n {
		fmt.Fprintf(&b, "  {\"request_id\": \"r%d\", \"transfers\": [{\"edge\": \"0->1\", \"tx_time_ms\": 3.25}]},\n", i)
	}
	b.WriteString("  {\"request_id\": \"last\", \"transfers\": []}],\n \"e2e_table\": [\n")
	for i := range n {
		fmt.Fprintf(&b, "  {\"request_id\": \"r%d\", \"e2e_total_ms\": %d}%s\n", i, 1000+i, map[bool]string{true: ",", false: ""}[i < n-1])
	}
	b.WriteString(" ]}\n")
	return []byte(b.String())
}

// keysOf returns each request's id, trace key and digest, sorted.
func keysOf(c *collected) []string {
	var out []string
	for _, r := range c.reqs {
		out = append(out, fmt.Sprintf("%s %s %016x %d", r.ID, r.Key(), r.Digest, len(r.Stages)))
	}
	slices.Sort(out)
	return out
}

// TestASummaryTooLargeToHoldIsReadInParts: a summary whose requests are
// more than the import holds at once is read again from its file, once per
// part of its requests, and makes the same requests, each once, as when it
// is held whole; what is wrong with it is reported once. From an input that
// cannot be read again, it is reported and counted, and the document after
// it read.
func TestASummaryTooLargeToHoldIsReadInParts(t *testing.T) {
	doc := summaryDoc(200, true)
	whole := readFrom(t, doc, Options{MaxPending: 1000}, nil)
	if len(whole.reqs) != 201 {
		t.Fatalf("%d requests, problems %q", len(whole.reqs), whole.problems)
	}
	if len(whole.problems) != 3 {
		t.Fatalf("problems %q, want the three entries that cannot be read", whole.problems)
	}
	for _, maxPending := range []int{150, 30, 7} {
		parts := readFrom(t, doc, Options{MaxPending: maxPending}, bytes.NewReader(doc))
		if got, want := keysOf(parts), keysOf(whole); !slices.Equal(got, want) {
			t.Errorf("held %d at once: %d requests, want the same %d as held whole; problems %q", maxPending, len(got), len(want), parts.problems)
		}
		if !slices.Equal(parts.problems, whole.problems) {
			t.Errorf("held %d at once: problems %q, want %q", maxPending, parts.problems, whole.problems)
		}
	}
	after := `{"e2e_table": [{"request_id": "after", "e2e_total_ms": 7}]}`
	stdin := readFrom(t, append(slices.Clone(doc), after...), Options{MaxPending: 30}, nil)
	if len(stdin.reqs) != 1 || stdin.reqs[0].ID != "after" {
		t.Errorf("from stdin: %d requests, want the document after the one too large", len(stdin.reqs))
	}
	if len(stdin.problems) != 3 || !strings.Contains(stdin.problems[2], "cannot be read again") {
		t.Errorf("from stdin: problems %q, want the entries and the document said", stdin.problems)
	}
}

// TestALogSummaryTooLargeToHoldIsReadInParts: the same of a [Summary]
// dict of a log, its lines among other lines of the log.
func TestALogSummaryTooLargeToHoldIsReadInParts(t *testing.T) {
	var lines []string
	lines = append(lines, "[Summary] {'stage_table': [")
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("  {'request_id': 'r%d', 'stages': [{'stage_id': 0, 'stage_gen_time_ms': %d.25}]},", i, i))
		if i == 50 {
			lines = append(lines, "(EngineCore pid=7) another process's line")
		}
	}
	lines = append(lines, "  {'request_id': ('r' '100'), 'stages': []}],", " 'e2e_table': [")
	for i := range 101 {
		lines = append(lines, fmt.Sprintf("  {'request_id': 'r%d', 'e2e_total_ms': %d}%s", i, 500+i, map[bool]string{true: ",", false: "]}"}[i < 100]))
	}
	log := logOf(lines...)
	whole := readFrom(t, log, Options{MaxPending: 1000}, nil)
	if len(whole.reqs) != 101 || len(whole.problems) != 0 {
		t.Fatalf("%d requests, problems %q", len(whole.reqs), whole.problems)
	}
	parts := readFrom(t, log, Options{MaxPending: 9}, bytes.NewReader(log))
	if got, want := keysOf(parts), keysOf(whole); !slices.Equal(got, want) || len(parts.problems) != 0 {
		t.Errorf("%d requests, want the same %d as held whole; problems %q", len(got), len(want), parts.problems)
	}
	stdin := readFrom(t, log, Options{MaxPending: 9}, nil)
	if len(stdin.reqs) != 0 || len(stdin.problems) != 1 || !strings.Contains(stdin.problems[0], "cannot be read again") {
		t.Errorf("from stdin: %d requests, problems %q", len(stdin.reqs), stdin.problems)
	}
}

// changing reads what it holds, and something else once it has been read
// once: a file rewritten while its summary is read again.
type changing struct {
	data  []byte
	reads int
}

func (c *changing) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	if c.reads > 1 {
		alt := bytes.ReplaceAll(c.data, []byte("r1"), []byte("x1"))
		return bytes.NewReader(alt).ReadAt(p, off)
	}
	return bytes.NewReader(c.data).ReadAt(p, off)
}

// TestAFileChangedWhileReadAgainIsSaid: a file whose summary is not what
// it was when read again imports nothing it cannot trust of it, and says so.
func TestAFileChangedWhileReadAgainIsSaid(t *testing.T) {
	doc := summaryDoc(200, false)
	c := readFrom(t, doc, Options{MaxPending: 30}, &changing{data: doc})
	if len(c.problems) != 1 || !strings.Contains(c.problems[0], "changed") {
		t.Errorf("problems %q, want the change said", c.problems)
	}
	if len(c.reqs) > 200 {
		t.Errorf("%d requests from 201", len(c.reqs))
	}
	for _, r := range c.reqs {
		if strings.HasPrefix(r.ID, "x") {
			t.Errorf("request %q of the changed file imported", r.ID)
		}
	}
}

// TestSummaryShapesWithinALinesBounds: documents whose every line is
// within a line's bounds, but which no record bound holds, are read with
// what each entry is bounded by, and reported; the requests around them
// are read.
func TestSummaryShapesWithinALinesBounds(t *testing.T) {
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	var manyKeys strings.Builder
	for i := range 200000 {
		fmt.Fprintf(&manyKeys, "\"k%d\": %d,\n", i, i)
	}
	var zeros strings.Builder
	for range 3000 {
		zeros.WriteString(strings.TrimSuffix(strings.Repeat("0,", 2000), ",") + ",\n")
	}
	var stages strings.Builder
	for i := range 200000 {
		fmt.Fprintf(&stages, "{\"stage_id\": %d, \"stage_gen_time_ms\": 1},\n", i)
	}
	var giant strings.Builder
	for range 5000 {
		giant.WriteString("  '" + strings.Repeat("x", 1000) + "'\n")
	}
	good := `{"request_id": "good", "stages": [{"stage_id": 0, "stage_gen_time_ms": 2}]}`
	cases := []struct {
		name, doc string
		opts      Options
		problem   string
	}{
		{"nesting 5 000 deep", `{"stage_table": [{"request_id": "deep", "stages": [` + deep + `]}, ` + good + `]}`, Options{}, "deeper"},
		{"200 000 keys at the top", "{" + manyKeys.String() + `"stage_table": [` + good + `]}`, Options{}, ""},
		{"an entry of lines of zeros", `{"stage_table": [{"request_id": "z", "stages": [{"x": [` + "\n" + zeros.String() + "0]}]},\n" + good + `]}`, Options{}, "larger than"},
		{"a request of 200 000 stages", `{"stage_table": [{"request_id": "many", "stages": [` + "\n" + stages.String() + "{}]},\n" + good + `]}`, Options{}, "larger than"},
		{"a dict of the log with a string split over 5 000 lines", string(logOf("{'type': 'request_level_metrics', 'request_id': 'g', 'x': (",
			giant.String()+" )}", "[OmniTiming] req=good total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s] transfers=[]")), Options{}, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m runtimeBytes
			var col *collected
			alloc := m.during(func() { col = readFrom(t, []byte(c.doc), c.opts, nil) })
			if len(col.reqs) != 1 || col.reqs[0].ID != "good" {
				t.Errorf("%d requests %v, want the good one; problems %q", len(col.reqs), keysOf(col), col.problems)
			}
			if c.problem == "" && len(col.problems) != 0 || c.problem != "" && (len(col.problems) != 1 || !strings.Contains(col.problems[0], c.problem)) {
				t.Errorf("problems %q, want one saying %q", col.problems, c.problem)
			}
			// Work stays linear in the input: allocations are a few times
			// its size at most, however it nests or spreads.
			if alloc > 8*uint64(len(c.doc))+64<<20 {
				t.Errorf("%d bytes allocated for %d bytes of input", alloc, len(c.doc))
			}
		})
	}
}

// TestADocumentThatCannotBeReadIsSaidIfItNeverEnds: a summary broken by a
// string over lines, whose brackets then never close, is said at the
// input's end, with what broke it.
func TestADocumentThatCannotBeReadIsSaidIfItNeverEnds(t *testing.T) {
	doc := "{\"stage_table\": [{\"request_id\": \"a\", \"note\": \"\n" + strings.Repeat(strings.Repeat("x\"]}{[", 100)+"\n", 3) + "\"}]}\n"
	c := readFrom(t, []byte(doc), Options{}, nil)
	if len(c.problems) != 2 || !strings.Contains(c.problems[1], "expected") {
		t.Errorf("problems %q, want the entry and the document said", c.problems)
	}
}

// TestEntriesReadAgainAreTheEntriesRead: of a file, a summary's entries
// are held as where they lie and read again once it ends; what that makes
// is what holding their text makes, whatever the lines look like (CR LF
// ends, a byte-order mark, an entry on the document's first line, two
// documents on one line, entries over lines, a log's [Summary] dict among
// other processes' lines, coloured prefixes); and an entry that is no
// longer what was read is said, not imported.
func TestEntriesReadAgainAreTheEntriesRead(t *testing.T) {
	cases := map[string][]byte{
		"a summary":                  summaryDoc(20, true),
		"CR LF ends and a BOM":       append([]byte("\ufeff"), bytes.ReplaceAll(summaryDoc(5, false), []byte("\n"), []byte("\r\n"))...),
		"an entry on the first line": []byte(`{"stage_table": [{"request_id": "a", "stages": [{"stage_id": 0, "forward_time_ms": 2}]},` + "\n" + `{"request_id": "b", "stages": [{"stage_id": 0, "forward_time_ms": 3}]}], "e2e_table": [{"request_id": "a", "e2e_total_ms": 9}]}` + "\n"),
		"two documents on one line":  []byte(`{"e2e_table": [{"request_id": "a", "e2e_total_ms": 9}]} {"e2e_table": [{"request_id": "b",` + "\n" + ` "e2e_total_ms": 4}]}` + "\n"),
		"a log's [Summary] dict": logOf("[Summary] {'stage_table': [{'request_id': 'a', 'stages': [{'stage_id': 0,",
			"                                              'forward_time_ms': 2}]},",
			"(EngineCore pid=7) a line of another process",
			"  {'request_id': 'b', 'stages': [{'stage_id': 0, 'forward_time_ms': 3}]}],",
			" 'e2e_table': [{'request_id': 'a', 'e2e_total_ms': 9}]}"),
		"coloured prefixes": []byte("\x1b[32mINFO\x1b[0m 11-30 09:14:15 [stats.py:590] [Summary] {'e2e_table': [{'request_id': 'a',\n" +
			"\x1b[32mINFO\x1b[0m 11-30 09:14:15 [stats.py:590]  'e2e_total_ms': 9}]}\n"),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			held := readFrom(t, data, Options{}, nil)
			again := readFrom(t, data, Options{}, bytes.NewReader(data))
			if len(held.reqs) == 0 {
				t.Fatalf("no request read; problems %q", held.problems)
			}
			if got, want := keysOf(again), keysOf(held); !slices.Equal(got, want) {
				t.Errorf("read again: %q, held: %q", got, want)
			}
			for i := range held.reqs {
				if i < len(again.reqs) && !reflect.DeepEqual(again.reqs[i], held.reqs[i]) {
					t.Errorf("request %d read again:\n%+v\nheld:\n%+v", i, again.reqs[i], held.reqs[i])
				}
			}
			if !slices.Equal(again.problems, held.problems) {
				t.Errorf("problems read again %q, held %q", again.problems, held.problems)
			}
			// The same file, its first end-to-end time 1 ms more after it
			// was read.
			i := bytes.Index(data, []byte("e2e_total_ms"))
			j := i + bytes.IndexAny(data[i:], "0123456789")
			changed := slices.Clone(data)
			changed[j]++
			c := readFrom(t, data, Options{}, bytes.NewReader(changed))
			if !slices.ContainsFunc(c.problems, func(p string) bool { return strings.Contains(p, "changed") }) {
				t.Errorf("a changed entry: problems %q, want the change said", c.problems)
			}
			if got, want := len(c.reqs), len(held.reqs); got >= want {
				t.Errorf("a changed entry: %d requests imported of %d", got, want)
			}
		})
	}
}
