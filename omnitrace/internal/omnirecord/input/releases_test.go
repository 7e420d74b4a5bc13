// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnikeys"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/internal/plan"
	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// logOf prefixes each message with a vLLM log prefix and joins them with
// CRLF, as vLLM's formatter writes a multi-line message.
func logOf(msgs ...string) []byte {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("INFO 11-30 09:14:15 [stats.py:590] " + m + "\r\n")
	}
	return []byte(b.String())
}

// TestOmniTimingLinesOfEachRelease: the [OmniTiming] line differs between
// releases; each form gives its request and stage times.
func TestOmniTimingLinesOfEachRelease(t *testing.T) {
	cases := []struct {
		name, line string
		total      time.Duration
		gen        map[int]time.Duration
		extra      map[string]string // request or stage attribute: its value
	}{
		{"stage labels with names", "[OmniTiming] req=a total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]",
			ms(3320), map[int]time.Duration{0: ms(810), 1: ms(2410)}, map[string]string{"omni.record.transfer.total_time_ms": "4.75"}},
		{"stage ids without names, no preprocess", "[OmniTiming] req=a total=238.90s engine=238.90s stages=[0:238.89s]",
			ms(238900), map[int]time.Duration{0: ms(238890)}, nil},
		{"unnamed stages of several", "[OmniTiming] req=a total=30.19s preprocess=2.80s engine=27.39s stages=[0:16.23s,1:13.96s] transfers=[0->1=0.55ms]",
			ms(27390), map[int]time.Duration{0: ms(16230), 1: ms(13960)}, map[string]string{"omni.record.input_preprocess_time_s": "2.8"}},
		{"hand-offs and ar2diffusion", "[OmniTiming] req=a total=32.99s preprocess=2.80s engine=30.19s ar2diffusion=0.01s stages=[0:ar=16.23s,1:diffusion=13.96s] handoffs=[0->1=12.345ms(ar2diffusion=10.500ms)] transfers=[0->1=0.780ms]",
			ms(30190), map[int]time.Duration{0: ms(16230), 1: ms(13960)},
			map[string]string{"omni.record.stage_handoff_time_ms": "12.345", "omni.record.ar2diffusion_time_ms": "10.5", "omni.record.ar2diffusion_time_s": "0.01"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col := readAll(t, logOf(c.line), Options{})
			if len(col.problems) > 0 || len(col.reqs) != 1 {
				t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
			}
			r := col.reqs[0]
			if r.Total == nil || r.Total.D != c.total || r.Total.Resolution != 10*time.Millisecond {
				t.Errorf("total %+v, want %v at 10ms", r.Total, c.total)
			}
			if len(r.Stages) != len(c.gen) {
				t.Fatalf("%d stages, want %d", len(r.Stages), len(c.gen))
			}
			kv := append([]attribute.KeyValue(nil), r.Extra...)
			for i := range r.Stages {
				st := &r.Stages[i]
				if st.GenTime == nil || st.GenTime.D != c.gen[st.ID] {
					t.Errorf("stage %d: generation time %+v, want %v", st.ID, st.GenTime, c.gen[st.ID])
				}
				kv = append(kv, st.Extra...)
			}
			for k, want := range c.extra {
				i := slices.IndexFunc(kv, func(kv attribute.KeyValue) bool { return string(kv.Key) == k })
				if i < 0 || kv[i].Value.String() != want {
					t.Errorf("%s: %v, want %s", k, kv, want)
				}
			}
		})
	}
}

// TestDuplexTurnMarkerIsNoProblem: a duplex turn's [OmniTiming] line holds
// no timing (the tables after it do): it is neither a request nor a
// problem.
func TestDuplexTurnMarkerIsNoProblem(t *testing.T) {
	col := readAll(t, logOf("[OmniTiming] req=duplex-s.sid1.i.3.e.0.r.7 response=resp-turn turn=3 reason=stop"), Options{})
	if len(col.problems) > 0 || len(col.reqs) != 0 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	// A line without total= that is no marker is still reported.
	col = readAll(t, logOf("[OmniTiming] req=a engine=1.00s"), Options{})
	if len(col.problems) != 1 {
		t.Errorf("problems %q, want one", col.problems)
	}
}

// secondsTable is a stage table of a release that writes diffusion values
// in seconds, three decimals in a box table.
var secondsTable = []string{
	"",
	"[StageRequestStats [request_id=s]]",
	"+------------------------------+--------+",
	"| Field                        |      0 |",
	"+------------------------------+--------+",
	"| diffusion_engine_exec_time_s | 13.802 |",
	"| kv_recv_time_s               |  0.001 |",
	"| scheduler_queue_wait_s       |  0.000 |",
	"| stage_gen_time_ms            | 13,960.000 |",
	"+------------------------------+--------+",
}

// secondsSummary is the same request's [Summary], at full precision.
var secondsSummary = "[Summary] {'stage_table': [{'request_id': 's', 'stages': [{'stage_id': 0, " +
	"'diffusion_engine_exec_time_s': 13.8019, 'kv_recv_time_s': 0.0007, 'scheduler_queue_wait_s': 0.00042, " +
	"'stage_gen_time_ms': 13960.0}]}], 'trans_table': [], 'e2e_table': [{'request_id': 's', 'e2e_total_ms': 14000.0}]}"

// TestTableValuesAreAsFineAsTheirDecimals: a box table's "13.802" in
// seconds is good to a millisecond, and a summary's full value of the same
// figure wins whichever comes first.
func TestTableValuesAreAsFineAsTheirDecimals(t *testing.T) {
	table := readAll(t, logOf(secondsTable...), Options{})
	if len(table.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(table.reqs), table.problems)
	}
	st := &table.reqs[0].Stages[0]
	phase(t, st, spans.Exec, ms(13802), forms.Quality{Resolution: time.Millisecond, Summed: true})
	phase(t, st, spans.KVRecv, ms(1), forms.Quality{Resolution: time.Millisecond, Summed: true})
	phase(t, st, spans.QueueWait, 0, forms.Quality{Resolution: time.Millisecond, Summed: true})

	for _, order := range [][]string{append(slices.Clone(secondsTable), secondsSummary), append([]string{secondsSummary}, secondsTable...)} {
		col := readAll(t, logOf(order...), Options{})
		if len(col.reqs) != 1 {
			t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
		}
		st := &col.reqs[0].Stages[0]
		phase(t, st, spans.Exec, 13801900*time.Microsecond, forms.Quality{Summed: true})
		phase(t, st, spans.KVRecv, 700*time.Microsecond, forms.Quality{Summed: true})
		phase(t, st, spans.QueueWait, 420*time.Microsecond, forms.Quality{Summed: true})
	}
}

// TestAMeasurementTakesBackAnUnmeasuredZero: a table's 0.000 send time is
// read as "not measured"; the summary's 0.0004 of the same hand-over is a
// measurement, and the field is no longer listed as unmeasured.
func TestAMeasurementTakesBackAnUnmeasuredZero(t *testing.T) {
	table := []string{
		"[TransferEdgeStats [request_id=u]]",
		"+-------------------+-------+",
		"| Field             |  0->1 |",
		"+-------------------+-------+",
		"| rx_decode_time_ms | 1.500 |",
		"| tx_time_ms        | 0.000 |",
		"+-------------------+-------+",
	}
	summary := "[Summary] {'stage_table': [], 'trans_table': [{'request_id': 'u', 'transfers': [{'edge': '0->1', " +
		"'tx_time_ms': 0.0004, 'rx_decode_time_ms': 1.5}]}], 'e2e_table': [{'request_id': 'u', 'e2e_total_ms': 10.0}]}"
	for _, order := range [][]string{append(slices.Clone(table), summary), append([]string{summary}, table...)} {
		col := readAll(t, logOf(order...), Options{})
		if len(col.reqs) != 1 {
			t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
		}
		st := &col.reqs[0].Stages[len(col.reqs[0].Stages)-1]
		phase(t, st, plan.TransferTx, 400*time.Nanosecond, forms.Quality{Summed: true})
		if slices.Contains(st.Unmeasured, "tx_time_ms") {
			t.Errorf("tx_time_ms listed as unmeasured %v beside its measurement", st.Unmeasured)
		}
	}
}

// TestEventLogTotalRepeatsTheLastChunk: the older event log's
// transfer_total_stats holds the last chunk's size, not the sum of the
// chunks, which the import adds itself.
func TestEventLogTotalRepeatsTheLastChunk(t *testing.T) {
	ev := func(typ, size, tx string) []string {
		return []string{"{'type': '" + typ + "',", " 'from_stage': 0,", " 'to_stage': 1,", " 'request_id': 'c',",
			" 'size_bytes': " + size + ",", " 'tx_time_ms': " + tx + "}"}
	}
	var lines []string
	lines = append(lines, ev("transfer_stats", "65536", "1.25")...)
	lines = append(lines, ev("transfer_stats", "32768", "0.75")...)
	lines = append(lines, ev("transfer_total_stats", "32768", "0.75")...)
	col := readAll(t, logOf(lines...), Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	st := &col.reqs[0].Stages[len(col.reqs[0].Stages)-1]
	if st.RxBytes == nil || *st.RxBytes != 65536+32768 || !st.RxBytesSummed {
		t.Errorf("bytes %v (summed %v), want the chunks' sum", st.RxBytes, st.RxBytesSummed)
	}
	phase(t, st, plan.TransferTx, ms(2), forms.Quality{Summed: true})
}

// TestImportedSpansSayTheyAreReconstructed: every imported span carries
// omni.timing.reconstructed, and a single-stage request, which has no
// omni.stage span, keeps its stage's generation time.
func TestImportedSpansSayTheyAreReconstructed(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "one", "stages": [{"stage_id": 0, "stage": "0", "stage_gen_time_ms": 1850.25, ` +
		`"diffusion_engine_exec_time_ms": 1800}]}], "e2e_table": [{"request_id": "one", "e2e_total_ms": 5000.0}]}` + "\n" +
		`{"stage_table": [{"request_id": "two", "stages": [{"stage_id": 0, "stage_gen_time_ms": 10}, {"stage_id": 1, "stage_gen_time_ms": 20}]}],` +
		` "e2e_table": [{"request_id": "two", "e2e_total_ms": 40.0}]}`
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 2 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	names := map[string]int{}
	for _, s := range emitted(t, col.reqs...) {
		names[s.Name()]++
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			got[kv.Key] = kv.Value
		}
		if v, ok := got[attrs.ReconstructedKey]; !ok || !v.AsBool() {
			t.Errorf("%s: no omni.timing.reconstructed", s.Name())
		}
		if s.Name() == spans.RequestSpanName && got[attrs.RequestIDKey].AsString() == "one" {
			if v := got["omni.record.stage_gen_time_ms"]; v.AsFloat64() != 1850.25 {
				t.Errorf("single-stage request: stage_gen_time_ms %v, want 1850.25", v.String())
			}
			if d := s.EndTime().Sub(s.StartTime()); d != 5*time.Second {
				t.Errorf("single-stage request lasts %v, want its e2e 5s", d)
			}
		}
	}
	if names[spans.RequestSpanName] != 2 || names[spans.StageSpanName] != 2 {
		t.Errorf("spans %v: want two requests, and two stages (of the second only)", names)
	}
}

// TestInterleavedTablesReadTheSameEveryTime: two processes writing tables
// into one log at once leave neither table whole; the first is reported
// as unfinished, and the result never depends on the order a map is
// walked in.
func TestInterleavedTablesReadTheSameEveryTime(t *testing.T) {
	data := fixture(t, "interleaved_tables.log")
	first := readAll(t, data, Options{})
	if len(first.problems) == 0 || !strings.Contains(first.problems[0], "left unfinished") {
		t.Errorf("problems %q, want the unfinished table reported", first.problems)
	}
	for range 20 {
		again := readAll(t, data, Options{})
		if a, b := fmtRequests(first), fmtRequests(again); a != b || strings.Join(first.problems, "|") != strings.Join(again.problems, "|") {
			t.Fatalf("two reads differ:\n%s\n%s", a, b)
		}
	}
}

func fmtRequests(c *collected) string {
	var b strings.Builder
	for _, r := range c.reqs {
		b.WriteString(r.ID)
		for _, st := range r.Stages {
			b.WriteString(" " + itoa(st.ID) + ":")
			for _, p := range plan.Phases() {
				if d, ok := st.Durations[p]; ok {
					b.WriteString(" " + p.String() + "=" + d.String())
				}
			}
			if st.GenTime != nil {
				b.WriteString(" gen=" + st.GenTime.D.String())
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestAStageWithNothingOfItsOwnMeasuredSaysSo: a stage whose record gives
// no length of its own (only its tokens, or only the hand-over into it)
// keeps its span, for its attributes and its hand-over, marked
// omni.timing.length_unmeasured: its zero length is no measurement.
func TestAStageWithNothingOfItsOwnMeasuredSaysSo(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "7", "stages": [{"stage_id": 0, "stage": "0:thinker", "num_tokens_out": 5}, ` +
		`{"stage_id": 1, "stage": "1:dit", "diffusion_engine_exec_time_ms": 100}, {"stage_id": 2, "stage": "2:vae"}]}], ` +
		`"trans_table": [{"request_id": "7", "transfers": [{"edge": "1->2", "tx_time_ms": 1.5}]}], ` +
		`"e2e_table": [{"request_id": "7", "e2e_total_ms": 300}]}`
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	unmeasured := map[int64]bool{}
	for _, s := range emitted(t, col.reqs[0]) {
		if s.Name() != spans.StageSpanName {
			continue
		}
		var id int64 = -1
		flag := false
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case attrs.StageIDKey:
				id = kv.Value.AsInt64()
			case omnikeys.LengthUnmeasured:
				flag = kv.Value.AsBool()
			}
		}
		unmeasured[id] = flag
	}
	if want := map[int64]bool{0: true, 1: false, 2: true}; !maps.Equal(unmeasured, want) {
		t.Errorf("stages marked length_unmeasured %v, want %v", unmeasured, want)
	}
}

// TestBadFieldsAreReportedAndLeftOut: a summary's or a log's field that
// cannot be a duration (negative, NaN, text, beyond 2262), a stage without
// a usable id, an edge that is no edge: each is reported and left out, and
// the rest of the request is imported.
func TestBadFieldsAreReportedAndLeftOut(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "7", "stages": [` +
		`{"stage_id": 0, "stage": "0:dit", "stage_gen_time_ms": -812.25, "diffusion_engine_exec_time_ms": NaN, "forward_time_ms": 20, "vae_decode_time_ms": "abc"}, ` +
		`{"stage_id": 5000000, "stage": "x", "stage_gen_time_ms": 100}]}], ` +
		`"trans_table": [{"request_id": "7", "transfers": [{"edge": "0=>1", "tx_time_ms": 3.25}]}], ` +
		`"e2e_table": [{"request_id": "7", "e2e_total_ms": 1e999}]}` + "\n"
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	st := &col.reqs[0].Stages[0]
	phase(t, st, spans.Forward, ms(20), forms.Quality{Resolution: time.Millisecond, Summed: true})
	phase(t, st, spans.Exec, -1, forms.Quality{})
	phase(t, st, spans.VAEDecode, -1, forms.Quality{})
	if st.GenTime != nil || col.reqs[0].Total != nil || len(col.reqs[0].Stages) != 1 {
		t.Errorf("generation time %v, total %v, %d stages: the bad ones are left out", st.GenTime, col.reqs[0].Total, len(col.reqs[0].Stages))
	}
	for _, want := range []string{"stage_gen_time_ms: -812.25", "diffusion_engine_exec_time_ms: NaN", "vae_decode_time_ms: abc", "stage id", `edge "0=>1"`, "e2e_total_ms: 1e999"} {
		found := false
		for _, p := range col.problems {
			found = found || (strings.Contains(p, want) && strings.HasSuffix(p, forms.ErrLeftOut.Error()))
		}
		if !found {
			t.Errorf("no problem reporting %s left out among %q", want, col.problems)
		}
	}
	// An [OmniTiming] figure beyond what a span can carry, likewise.
	col = readAll(t, logOf("[OmniTiming] req=a total=99999999999.00s engine=99999999999.00s stages=[0:x=1e300s,1:y=1.00s]"), Options{})
	if len(col.reqs) != 1 || len(col.problems) != 2 || col.reqs[0].Total != nil {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
}

// TestIDsThatDifferPastWhatASpanShowsStayApart: two ids that share their
// first kilobytes, or differ only in invalid bytes, are two requests (with
// two trace ids), not one merged.
func TestIDsThatDifferPastWhatASpanShowsStayApart(t *testing.T) {
	long := strings.Repeat("A", 2*forms.MaxIDBytes)
	var lines []string
	for _, id := range []string{long + "1", long + "2", "bad\xff", "bad\xfe"} {
		lines = append(lines, `{"type": "transfer_stats", "request_id": "`+id+`", "from_stage": 0, "to_stage": 1, "size_bytes": 100, "tx_time_ms": 5}`,
			`{"type": "request_level_metrics", "request_id": "`+id+`", "e2e_time_ms": 50}`)
	}
	col := readAll(t, []byte(strings.Join(lines, "\n")), Options{})
	if len(col.reqs) != 4 {
		t.Fatalf("%d requests, want 4; problems %q", len(col.reqs), col.problems)
	}
	keys := map[[16]byte]bool{}
	for _, r := range col.reqs {
		keys[r.Key()] = true
		if st := &r.Stages[len(r.Stages)-1]; st.RxBytes == nil || *st.RxBytes != 100 {
			t.Errorf("request of %d bytes: %v bytes, want 100 (not two requests' sum)", len(r.ID), st.RxBytes)
		}
	}
	if len(keys) != 4 {
		t.Errorf("%d distinct trace ids, want 4", len(keys))
	}
}

// TestStagesOfARequestAreBounded: a summary row list of a million stages
// costs at most MaxStages stages, and says so.
func TestStagesOfARequestAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"stage_table": [{"request_id": "many", "stages": [`)
	for i := range 3 * forms.MaxStages {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"stage_id": ` + itoa(i) + `, "stage_gen_time_ms": 1}`)
	}
	b.WriteString(`]}], "e2e_table": [{"request_id": "many", "e2e_total_ms": 5}]}`)
	col := readAll(t, []byte(b.String()), Options{})
	if len(col.reqs) != 1 || len(col.reqs[0].Stages) != forms.MaxStages {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	if len(col.problems) != 1 || !strings.Contains(col.problems[0], "more than") {
		t.Errorf("problems %q, want one saying the stages beyond were left out", col.problems)
	}
}

// TestSummaryEntriesThatCannotBeReadAreReported: an entry without a usable
// request_id, one that is not an object, and a second entry of one request
// in one table are each reported and skipped; the other requests are read.
func TestSummaryEntriesThatCannotBeReadAreReported(t *testing.T) {
	doc := `{"stage_table": [{"stages": []}, {"request_id": "", "stages": []}, {"request_id": NaN, "stages": []}, 7, ` +
		`{"request_id": "a", "stages": [{"stage_id": 0, "stage_gen_time_ms": 10}]}, {"request_id": "a", "stages": [{"stage_id": 0, "stage_gen_time_ms": 99}]}], ` +
		`"e2e_table": [{"request_id": "a", "e2e_total_ms": 20}, {"request_id": "a", "e2e_total_ms": 30}]}`
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 1 || col.reqs[0].Stages[0].GenTime.D != ms(10) || col.reqs[0].Total.D != ms(20) {
		t.Fatalf("%d requests %+v: want request a as its first entries give it", len(col.reqs), col.reqs)
	}
	if len(col.problems) != 6 {
		t.Errorf("problems %q, want 6", col.problems)
	}
}

// TestAStrayLineCostsNoSummaryAfterIt: a line of garbage, or a stray
// closing brace, between summary documents is reported alone; every
// document around it is read.
func TestAStrayLineCostsNoSummaryAfterIt(t *testing.T) {
	col := readAll(t, fixture(t, "summaries_with_strays.json"), Options{})
	var ids []string
	for _, r := range col.reqs {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, " ") != "7 8 9 10" || len(col.problems) != 2 {
		t.Errorf("requests %v, problems %q: want all four, and the two stray lines", ids, col.problems)
	}
}

// TestASecondHandOverIntoAStageIsReported: a stage's span carries one
// hand-over into it; a second edge into the same stage is reported and
// left out, never mixed with the first.
func TestASecondHandOverIntoAStageIsReported(t *testing.T) {
	col := readAll(t, fixture(t, "fan_in.json"), Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	var into2 *forms.Stage
	for i := range col.reqs[0].Stages {
		if col.reqs[0].Stages[i].ID == 2 {
			into2 = &col.reqs[0].Stages[i]
		}
	}
	if into2 == nil || into2.RxFrom == nil || *into2.RxFrom != 0 {
		t.Fatalf("stage 2 %+v: want its hand-over from stage 0, the first read", into2)
	}
	phase(t, into2, plan.TransferTx, ms(30), forms.Quality{Summed: true})
	if len(col.problems) != 1 || !strings.Contains(col.problems[0], "edge 1->2") {
		t.Errorf("problems %q, want the second edge into stage 2 reported", col.problems)
	}
}

// TestAnOversizedEntryCostsNothingAfterIt: an entry of a summary's table
// beyond the bound of one unit is reported and skipped to its own end,
// whatever its strings hold; the rest of its document, and the document
// after it, are read.
func TestAnOversizedEntryCostsNothingAfterIt(t *testing.T) {
	defer func(n int) { maxUnitBytes = n }(maxUnitBytes)
	maxUnitBytes = 4096
	var lines []string
	lines = append(lines, `{"stage_table": [{"request_id": "big", "stages": [`)
	for i := range 200 {
		lines = append(lines, `   {"stage_id": `+itoa(i)+`, "stage_gen_time_ms": 1, "note": "}]{["},`)
	}
	lines = append(lines, `   {"stage_id": 999}]}],`, ` "e2e_table": [{"request_id": "big", "e2e_total_ms": 5}]}`,
		`{"e2e_table": [{"request_id": "after", "e2e_total_ms": 7}]}`)
	col := readAll(t, []byte(strings.Join(lines, "\n")), Options{Format: FormatSummary})
	if len(col.reqs) != 2 || col.reqs[0].ID != "big" || len(col.reqs[0].Stages) != 0 || col.reqs[1].ID != "after" {
		t.Fatalf("%d requests %+v, problems %q: want big from its end-to-end entry, and the document after", len(col.reqs), col.reqs, col.problems)
	}
	if len(col.problems) != 1 || !strings.Contains(col.problems[0], "larger than") {
		t.Errorf("problems %q, want the oversized entry alone", col.problems)
	}
}

// TestALeftOutTotalIsNoAttributeAndAMeasurementInEitherUnitCounts: an
// end-to-end time left out as no duration is not kept as an attribute
// either; and a phase measured in seconds takes back its millisecond key
// read as "not measured".
func TestALeftOutTotalIsNoAttributeAndAMeasurementInEitherUnitCounts(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "a", "stages": [{"stage_id": 0, "preprocess_time_ms": 0}]}], ` +
		`"e2e_table": [{"request_id": "a", "e2e_total_ms": -5, "engine_pipeline_time_ms": 7}]}` + "\n" +
		`{"stage_table": [{"request_id": "a", "stages": [{"stage_id": 0, "preprocess_time_s": 0.25}]}]}`
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 2 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	first := col.reqs[0]
	if first.Total == nil || first.Total.D != ms(7) {
		t.Errorf("total %+v, want engine_pipeline_time_ms's 7 ms", first.Total)
	}
	for _, kv := range first.Extra {
		if kv.Key == "omni.record.e2e_total_ms" || kv.Key == "omni.record.engine_pipeline_time_ms" {
			t.Errorf("%s kept as an attribute", kv.Key)
		}
	}
	// The log form: a table's 0 in ms, then the summary's seconds.
	log := logOf("[StageRequestStats [request_id=b]]", "+--+--+", "| Field | 0 |", "+--+--+",
		"| preprocess_time_ms | 0.000 |", "| stage_gen_time_ms | 5.000 |", "+--+--+",
		"[Summary] {'stage_table': [{'request_id': 'b', 'stages': [{'stage_id': 0, 'preprocess_time_s': 0.00025}]}], 'e2e_table': [{'request_id': 'b', 'e2e_total_ms': 9.0}]}")
	col = readAll(t, log, Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	st := &col.reqs[0].Stages[0]
	phase(t, st, spans.Preprocess, 250*time.Microsecond, forms.Quality{Summed: true})
	if len(st.Unmeasured) != 0 {
		t.Errorf("unmeasured %v beside preprocess's measurement", st.Unmeasured)
	}
}

// TestOmniTimingItemsThatCannotBeReadAreReported: a stage, transfer or
// hand-off item that is no duration, and a key written twice, are each
// reported and left out; a number of the line is always a double.
func TestOmniTimingItemsThatCannotBeReadAreReported(t *testing.T) {
	col := readAll(t, fixture(t, "omnitiming_bad_items.log"), Options{})
	if len(col.reqs) != 5 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	for _, want := range []string{`"0:thinker": -0.81s`, `"1:dit": NaNs`, `"0->1": -4.75ms`, `1e400s`, `"1:dit": 0.5 is`,
		`abcms`, `ar2diffusion=-0.01s`, `total= a second time`, `engine= a second time`} {
		found := false
		for _, p := range col.problems {
			found = found || (strings.Contains(p, want) && strings.HasSuffix(p, forms.ErrLeftOut.Error()))
		}
		if !found {
			t.Errorf("nothing reports %s among %q", want, col.problems)
		}
	}
	e := col.byID(t, "e")
	if e.Total == nil || e.Total.D != ms(3320) {
		t.Errorf("request e lasts %+v, want the first engine=, 3.32 s", e.Total)
	}
	c := col.byID(t, "c")
	for _, st := range c.Stages {
		for _, kv := range st.Extra {
			if kv.Key == "omni.record.stage_handoff_time_ms" && kv.Value.Type() != attribute.FLOAT64 {
				t.Errorf("%s is a %v, want a double", kv.Key, kv.Value.Type())
			}
		}
	}
}

// TestOnePhaseInTwoUnitsMustAgree: a summary's or a table's x_ms and x_s
// of one phase (or a row written twice) that disagree beyond their
// resolution are reported and both left out, as a record line's would be
// refused; ones that agree make one phase.
func TestOnePhaseInTwoUnitsMustAgree(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "7", "stages": [{"stage_id": 0, "diffusion_engine_exec_time_ms": 2301, "diffusion_engine_exec_time_s": 1.0, ` +
		`"forward_time_ms": 2105, "forward_time_s": 2.1054, "scheduler_queue_wait_ms": 5, "scheduler_queue_wait_s": 0.0}]}]}`
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	st := &col.reqs[0].Stages[0]
	phase(t, st, spans.Exec, -1, forms.Quality{})
	phase(t, st, spans.QueueWait, -1, forms.Quality{})
	if _, ok := st.Durations[spans.Forward]; !ok {
		t.Error("forward's two agreeing units make no phase")
	}
	if len(col.problems) != 2 {
		t.Errorf("problems %q, want the two disagreements", col.problems)
	}
}

// TestTheCheckpointNeverCutsARecord: while a dict, a table or a summary
// document spread over lines is half read, the checkpoint is at its first
// line; and at a stop, the requests whose records lie in a file rotated
// away are handed on, the others kept for the restart.
func TestTheCheckpointNeverCutsARecord(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		form  string
	}{
		{"a dict", []string{"INFO 11-30 05:20:01 [log_utils.py:31] {'type': 'transfer_stats',", "INFO 11-30 05:20:01 [log_utils.py:31]  'from_stage': 0,"}, ""},
		{"a table", []string{"INFO 11-30 05:20:01 [stats.py:5] [StageRequestStats [request_id=7]]", "INFO 11-30 05:20:01 [stats.py:5] +---+---+"}, ""},
		{"a summary", []string{`{"stage_table": [`, `  {"request_id": "7", "stages": []}`}, FormatSummary},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &collected{}
			in, err := NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Options{Format: c.form, Settle: -1}, h)
			if err != nil {
				t.Fatal(err)
			}
			first := "INFO 11-30 05:20:00 [omni.py:1] [OmniTiming] req=done total=1.00s engine=1.00s stages=[0:1.00s]"
			if c.form == FormatSummary {
				first = `{"e2e_table": [{"request_id": "done", "e2e_total_ms": 5}]}`
			}
			off := int64(0)
			for _, l := range append([]string{first}, c.lines...) {
				in.Line([]byte(l), off)
				off += int64(len(l)) + 1
			}
			start := int64(len(first)) + 1
			if got, _, _ := in.Checkpoint(off); got != start || len(h.reqs) != 1 {
				t.Errorf("checkpoint at %d (%d handed on), want the half-read record's first line, %d", got, len(h.reqs), start)
			}
		})
	}
	h := &collected{}
	in, err := NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Options{}, h)
	if err != nil {
		t.Fatal(err)
	}
	in.Line([]byte("INFO 11-30 05:20:00 [stats.py:5] [StageRequestStats [request_id=old]]"), 0)
	for i, l := range []string{"+---+---+", "| Field | 0 |", "+---+---+", "| stage_gen_time_ms | 5.000 |", "+---+---+"} {
		in.Line([]byte("INFO 11-30 05:20:00 [stats.py:5] "+l), int64(100*(i+1)))
	}
	in.Rotated()
	in.Line([]byte("INFO 11-30 05:20:01 [stats.py:5] [StageRequestStats [request_id=new]]"), 0)
	for i, l := range []string{"+---+---+", "| Field | 0 |", "+---+---+", "| stage_gen_time_ms | 5.000 |", "+---+---+"} {
		in.Line([]byte("INFO 11-30 05:20:01 [stats.py:5] "+l), int64(100*(i+1)))
	}
	in.Stop()
	if len(h.reqs) != 1 || h.reqs[0].ID != "old" {
		t.Errorf("handed on at the stop: %d requests; want old, whose records were rotated away, alone", len(h.reqs))
	}
}

// TestATableLeftOpenIsDroppedAfterAThousandLines: a table or dict that
// other messages interrupt for more than a thousand lines is reported and
// dropped, so that it never holds the checkpoint back for good.
func TestATableLeftOpenIsDroppedAfterAThousandLines(t *testing.T) {
	lines := []string{"[StageRequestStats [request_id=P]]", "+---+---+", "| Field | 0 |"}
	for i := range maxOpenGap + 1 {
		lines = append(lines, "[OmniTiming] req=r"+itoa(i)+" total=1.00s engine=1.00s stages=[0:1.00s]")
	}
	h := &collected{}
	in, err := NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Options{Settle: -1}, h)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	for _, l := range strings.SplitAfter(string(logOf(lines...)), "\n") {
		if l == "" {
			continue
		}
		in.Line([]byte(strings.TrimRight(l, "\r\n")), off)
		off += int64(len(l))
	}
	if got, _, _ := in.Checkpoint(off); got != off {
		t.Errorf("checkpoint at %d, want %d: the table left open holds it back", got, off)
	}
	if len(h.problems) != 1 || !strings.Contains(h.problems[0], "left unfinished") {
		t.Errorf("problems %q, want the open table reported", h.problems)
	}
}

// TestPartsOutlastingExecWithinTheResolutionAreImported: int()-truncated
// values may make forward a millisecond longer than exec; within the
// writer's resolution the request is imported, exec placed to cover its
// parts, and no phase sticks out of its parent.
func TestPartsOutlastingExecWithinTheResolutionAreImported(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "s", "stages": [{"stage_id": 0, "diffusion_engine_exec_time_ms": 10, "forward_time_ms": 11}]}], ` +
		`"e2e_table": [{"request_id": "s", "e2e_total_ms": 30.0}]}`
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	var exec, fwd sdktrace.ReadOnlySpan
	for _, s := range emitted(t, col.reqs[0]) {
		switch s.Name() {
		case spans.Exec.SpanName():
			exec = s
		case spans.Forward.SpanName():
			fwd = s
		}
	}
	if exec == nil || fwd == nil || fwd.EndTime().After(exec.EndTime()) || fwd.StartTime().Before(exec.StartTime()) {
		t.Fatalf("exec %v, forward %v: forward must lie inside exec", exec, fwd)
	}
}

// TestAShorterEndToEndTimeIsKept: when a stage ends after the measured
// end-to-end time, the request span reaches the stage's end and the
// measurement is kept as an attribute, not lost.
func TestAShorterEndToEndTimeIsKept(t *testing.T) {
	doc := `{"stage_table": [{"request_id": "o", "stages": [{"stage_id": 0, "stage_gen_time_ms": 150}, {"stage_id": 1, "stage_gen_time_ms": 10}]}], ` +
		`"e2e_table": [{"request_id": "o", "e2e_total_ms": 120.0}]}`
	col := readAll(t, []byte(doc), Options{})
	if len(col.reqs) != 1 {
		t.Fatalf("%d requests, problems %q", len(col.reqs), col.problems)
	}
	for _, s := range emitted(t, col.reqs[0]) {
		if s.Name() != spans.RequestSpanName {
			continue
		}
		found := false
		for _, kv := range s.Attributes() {
			found = found || (kv.Key == "omni.record.e2e_total_ms" && kv.Value.AsFloat64() == 120)
		}
		if d := s.EndTime().Sub(s.StartTime()); d <= 120*time.Millisecond || !found {
			t.Errorf("request span of %v, e2e kept %v: want longer than 120 ms, and 120 kept", d, found)
		}
	}
}

// TestAFieldATableWritesTwiceMustAgree: any field a box table writes twice
// (a stage's generation time, an end-to-end time, a send time, as well as
// a phase) keeps one value when both agree, and is reported and left out
// when they differ.
func TestAFieldATableWritesTwiceMustAgree(t *testing.T) {
	col := readAll(t, fixture(t, "row_twice.log"), Options{})
	var left []string
	for _, p := range col.problems {
		if strings.Contains(p, "written twice") {
			left = append(left, p)
		}
	}
	for _, want := range []string{"stage_gen_time_ms", "e2e_total_ms", "tx_time_ms"} {
		found := false
		for _, p := range left {
			found = found || strings.Contains(p, want)
		}
		if !found {
			t.Errorf("%s written twice with two values is not reported: %q", want, col.problems)
		}
	}
}

// emitted returns the spans the requests make, placed from a fixed
// anchor; a request refused fails the test.
func emitted(t *testing.T, reqs ...*forms.Request) []sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	for _, r := range reqs {
		ss, err := emitStubs(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), r)
		if err != nil {
			t.Fatalf("request %q refused: %v", r.ID, err)
		}
		out = append(out, ss...)
	}
	return out
}

// TestARecordLineAfterAHeldRequestIsNotSentTwice: a JSON-lines record read
// while an event's request from before it is held lies after the
// checkpoint; a restart reads it again and does not hand it on twice.
func TestARecordLineAfterAHeldRequestIsNotSentTwice(t *testing.T) {
	lines := []string{
		`{"type": "transfer_stats", "request_id": "E", "from_stage": 0, "to_stage": 1, "size_bytes": 10, "tx_time_ms": 1}`,
		oneLine(good),
	}
	feed := func(in *Input, from int64) {
		off := int64(0)
		for _, l := range lines {
			if off >= from {
				in.Line([]byte(l), off)
			}
			off += int64(len(l)) + 1
		}
	}
	first := &collected{}
	in, err := NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Options{}, first)
	if err != nil {
		t.Fatal(err)
	}
	feed(in, 0)
	off, lines0, done := in.Checkpoint(int64(len(lines[0]) + len(lines[1]) + 2))
	if off != 0 || len(first.reqs) != 1 {
		t.Fatalf("checkpoint at %d with %d handed on: want 0 (E held) and the record", off, len(first.reqs))
	}
	again := &collected{}
	in, err = NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Options{}, again)
	if err != nil {
		t.Fatal(err)
	}
	in.Resume(done, int64(len(lines[0])+len(lines[1])+2), lines0)
	feed(in, off)
	in.End()
	if len(again.reqs) != 1 || again.reqs[0].ID != "E" {
		var ids []string
		for _, r := range again.reqs {
			ids = append(ids, r.ID)
		}
		t.Errorf("the restart handed on %v, want E alone", ids)
	}
}
