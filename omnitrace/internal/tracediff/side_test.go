// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

var t0 = time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

func sp(tid, id, parent, name string, start, end float64, kv ...attribute.KeyValue) traceview.Span {
	s := traceview.Span{TraceID: tid, SpanID: id, ParentID: parent, Name: name, Start: at(start), End: at(end)}
	if len(kv) > 0 {
		s.Attrs = map[string]attribute.Value{}
		for _, a := range kv {
			s.Attrs[string(a.Key)] = a.Value
		}
	}
	return s
}

func rowOf(t *testing.T, s *Side, table int, k Key) *row {
	t.Helper()
	r := s.row(table, k)
	if r == nil {
		var have []string
		for _, r := range s.table(table) {
			if r != nil {
				have = append(have, r.key.String())
			}
		}
		t.Fatalf("no row %s; rows: %s", k, strings.Join(have, ", "))
	}
	return r
}

// TestUnattributedIsTheLengthLessTheUnionOfItsPhases: two overlapping
// children of a 100 ms request cover 80 ms: 20 ms unattributed, where
// their sum (120 ms) would leave -20.
func TestUnattributedIsTheLengthLessTheUnionOfItsPhases(t *testing.T) {
	s := NewSide(Settings{})
	s.Add([]traceview.Span{
		sp("t", "r", "", "omni.request", 0, 100, attribute.String("omni.output.modality", "image")),
		sp("t", "e", "r", "omni.diffusion.exec", 0, 60),
		sp("t", "q", "r", "omni.diffusion.queue_wait", 40, 80),
	})
	k := Key{Modality: "image", Stage: "diffusion", Phase: PhaseUnattributed}
	k.Stage = stageNone
	if got := rowOf(t, s, 0, k).res.vals; len(got) != 1 || got[0] != 20 {
		t.Errorf("unattributed %v ms, want [20]", got)
	}
}

// TestCriticalSharesOfARequestAddUpToOne: the shares of a multi-stage
// request's leaves on its path (phases, each stage's own time, the
// request's own) add up to 1, and each stage's share is its phases' and
// its own.
func TestCriticalSharesOfARequestAddUpToOne(t *testing.T) {
	s := NewSide(Settings{})
	st := func(id int, name, typ string) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.Int("omni.stage.id", id), attribute.String("omni.stage.name", name), attribute.String("omni.stage.type", typ)}
	}
	s.Add([]traceview.Span{
		sp("t", "r", "", "omni.request", 0, 200, attribute.String("omni.output.modality", "image")),
		sp("t", "s0", "r", "omni.stage", 0, 60, st(0, "ar", "llm")...),
		sp("t", "p0", "s0", "omni.llm.prefill", 2, 20),
		sp("t", "d0", "s0", "omni.llm.decode", 20, 55),
		sp("t", "x", "r", "omni.transfer", 60, 70, attribute.Int("omni.transfer.from_stage", 0), attribute.Int("omni.transfer.to_stage", 1)),
		sp("t", "tx", "x", "omni.transfer.tx", 60, 66),
		sp("t", "s1", "r", "omni.stage", 70, 195, st(1, "dit", "diffusion")...),
		sp("t", "f1", "s1", "omni.diffusion.forward", 75, 190),
	})
	leaves, stages := 0.0, map[string]float64{}
	for _, r := range s.crit {
		if r == nil {
			continue
		}
		v := r.res.vals[0]
		switch r.key.Phase {
		case PhaseStage, PhaseTransfer:
			stages[r.key.Stage] -= v
		default:
			leaves += v
			if r.key.Stage != stageNone {
				stages[r.key.Stage] += v
			}
		}
	}
	if math.Abs(leaves-1) > 1e-9 {
		t.Errorf("the leaves' shares add up to %v, want 1", leaves)
	}
	for st, d := range stages {
		if math.Abs(d) > 1e-9 {
			t.Errorf("%s: its phases and own time differ from its share by %v", st, d)
		}
	}
	want := map[Key]float64{
		{Modality: "image", Stage: "llm 0 ar", Phase: "llm.prefill"}:      18.0 / 200,
		{Modality: "image", Stage: "llm 0 ar", Phase: PhaseSelf}:          7.0 / 200,
		{Modality: "image", Stage: "transfer 0->1", Phase: PhaseSelf}:     4.0 / 200,
		{Modality: "image", Stage: "diffusion 1 dit", Phase: "forward"}:   115.0 / 200,
		{Modality: "image", Stage: stageNone, Phase: PhaseUnattributed}:   5.0 / 200,
		{Modality: "image", Stage: "diffusion 1 dit", Phase: PhaseStage}:  125.0 / 200,
		{Modality: "image", Stage: "transfer 0->1", Phase: "transfer.tx"}: 6.0 / 200,
		{Modality: "image", Stage: "llm 0 ar", Phase: PhaseStage}:         60.0 / 200,
		{Modality: "image", Stage: "transfer 0->1", Phase: PhaseTransfer}: 10.0 / 200,
		{Modality: "image", Stage: "diffusion 1 dit", Phase: PhaseSelf}:   10.0 / 200,
		{Modality: "image", Stage: "llm 0 ar", Phase: "llm.decode"}:       35.0 / 200,
	}
	for k, w := range want {
		if got := rowOf(t, s, 1, k).res.vals[0]; math.Abs(got-w) > 1e-9 {
			t.Errorf("%s: share %v, want %v", k, got, w)
		}
	}
}

// TestHostileSides: what a side makes of traces nobody should write.
func TestHostileSides(t *testing.T) {
	t.Run("a request that ends before it starts is counted, not measured", func(t *testing.T) {
		s := NewSide(Settings{})
		s.Add([]traceview.Span{sp("t", "r", "", "omni.request", 100, 0), sp("t", "e", "r", "omni.diffusion.exec", 0, 50)})
		if s.Requests() != 1 || s.NoLength() != 1 || s.row(0, Key{Modality: stageNone, Stage: stageNone, Phase: PhaseRequest}) != nil {
			t.Errorf("requests %d, without length %d", s.Requests(), s.NoLength())
		}
	})
	t.Run("phases that end before they start, or last 292 years, or are all absent", func(t *testing.T) {
		s := NewSide(Settings{})
		far := traceview.Span{TraceID: "t2", SpanID: "r", Name: "omni.request", Start: time.Unix(0, 0), End: time.Unix(0, math.MaxInt64)}
		s.Add([]traceview.Span{sp("t", "r", "", "omni.request", 0, 100), sp("t", "e", "r", "omni.diffusion.exec", 80, 20)})
		s.Add([]traceview.Span{far, {TraceID: "t2", SpanID: "e", ParentID: "r", Name: "omni.diffusion.exec", Start: time.Unix(0, 0), End: time.Unix(0, math.MaxInt64)}})
		s.Add([]traceview.Span{sp("t3", "r", "", "omni.request", 0, 0)})
		other := NewSide(Settings{})
		other.Add([]traceview.Span{sp("t", "r", "", "omni.request", 0, 100)})
		rep := Compare(s, other, Options{})
		var b strings.Builder
		if err := rep.WriteText(&b, Names{"a", "b"}); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(&b, Names{"a", "b"}); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteCSV(&b); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteHTML(&b, Names{"a", "b"}); err != nil {
			t.Fatal(err)
		}
		exec := s.row(0, Key{Modality: stageNone, Stage: "diffusion", Phase: "exec"})
		if exec == nil || exec.measured != 1 {
			t.Errorf("exec: %+v, want one request measured (the one of 292 years), the one ending first not", exec)
		}
	})
	t.Run("shared span ids, parent loops, link cycles", func(t *testing.T) {
		s := NewSide(Settings{})
		a := sp("t", "a", "b", "omni.request", 0, 100)
		b := sp("t", "b", "a", "omni.diffusion.exec", 10, 90)
		c := sp("t", "c", "a", "omni.diffusion.forward", 20, 30)
		c.Links = []traceview.Link{{TraceID: "t", SpanID: "d"}}
		d := sp("t", "d", "a", "omni.diffusion.forward", 25, 40)
		d.Links = []traceview.Link{{TraceID: "t", SpanID: "c"}, {TraceID: "t", SpanID: "d"}}
		dup := sp("t", "c", "a", "omni.diffusion.vae_decode", 40, 50)
		s.Add([]traceview.Span{a, b, c, d, dup})
		if s.Requests() != 1 {
			t.Errorf("%d requests, want 1", s.Requests())
		}
		if _, bad := s.Traces(); bad != 1 {
			t.Errorf("%d traces with problems, want 1", bad)
		}
	})
}

// TestASideIsBoundedWhateverItsInput: a hundred times more requests, and
// a thousand stage names, than its bounds: at most Samples values a row,
// at most MaxRows rows a table, the rest counted.
func TestASideIsBoundedWhateverItsInput(t *testing.T) {
	set := Settings{Samples: 50, MaxRows: 10}
	s := NewSide(set)
	for i := range 5000 {
		tid := fmt.Sprint(i)
		s.Add([]traceview.Span{
			sp(tid, "r", "", "omni.request", 0, 100),
			sp(tid, "s", "r", "omni.stage", 0, 90, attribute.Int("omni.stage.id", i%1000), attribute.String("omni.stage.name", strings.Repeat("x", i%1000))),
			sp(tid, "p", "s", "omni.llm.prefill", 0, float64(i%97)),
		})
	}
	for tbl := range 2 {
		n := 0
		for _, r := range s.table(tbl) {
			if r == nil {
				continue
			}
			n++
			if len(r.res.vals) > set.Samples {
				t.Errorf("%s keeps %d values, want at most %d", r.key, len(r.res.vals), set.Samples)
			}
		}
		if n > set.MaxRows {
			t.Errorf("table %d: %d rows, want at most %d", tbl, n, set.MaxRows)
		}
	}
	if len(s.keys) > s.maxKeys() || s.Hidden() == 0 {
		t.Errorf("%d keys (at most %d), %d hidden", len(s.keys), s.maxKeys(), s.Hidden())
	}
	r := rowOf(t, s, 0, Key{Modality: stageNone, Stage: stageNone, Phase: PhaseRequest})
	if r.measured != 5000 || r.res.seen != 5000 || len(r.res.vals) != set.Samples {
		t.Errorf("request row: measured %d, seen %d, kept %d", r.measured, r.res.seen, len(r.res.vals))
	}
}

// TestByModelSplitsRows: with ByModel, each model's requests make rows of
// their own, and the table names the model.
func TestByModelSplitsRows(t *testing.T) {
	add := func(s *Side) {
		for i, m := range []string{"Qwen/Qwen-Image", "black-forest-labs/FLUX.1", ""} {
			tid := fmt.Sprint(i)
			s.Add([]traceview.Span{
				sp(tid, "r", "", "omni.request", 0, 100, attribute.String("gen_ai.request.model", m), attribute.String("omni.output.modality", "image")),
				sp(tid, "e", "r", "omni.diffusion.exec", 0, 90),
			})
		}
	}
	by, all := NewSide(Settings{ByModel: true}), NewSide(Settings{})
	add(by)
	add(all)
	for _, m := range []string{"Qwen/Qwen-Image", "black-forest-labs/FLUX.1", stageNone} {
		if r := rowOf(t, by, 0, Key{Modality: "image", Model: m, Stage: "diffusion", Phase: "exec"}); r.measured != 1 {
			t.Errorf("%s: %d requests measured exec, want 1", m, r.measured)
		}
	}
	if r := rowOf(t, all, 0, Key{Modality: "image", Stage: "diffusion", Phase: "exec"}); r.measured != 3 {
		t.Errorf("without ByModel: %d requests measured exec, want 3", r.measured)
	}
	var b strings.Builder
	if err := Compare(by, by, Options{}).WriteText(&b, Names{"a", "a"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nmodel ") || !strings.Contains(b.String(), "black-forest-labs/FLUX.1  image") {
		t.Errorf("the table does not name the models:\n%s", b.String())
	}
}

// TestASideKeepsNoLongStringOfItsInput: requests whose stage names and
// types are 256 KiB each, every one different, leave the side holding
// none of them: its memory stays that of its settings once the traces
// are gone.
func TestASideKeepsNoLongStringOfItsInput(t *testing.T) {
	const traces, long = 200, 256 << 10
	s := NewSide(Settings{})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range traces {
		tid := fmt.Sprint(i)
		name := fmt.Sprintf("%d%s", i, strings.Repeat("n", long))
		typ := fmt.Sprintf("%d%s", i, strings.Repeat("t", long))
		s.Add([]traceview.Span{
			sp(tid, "r", "", "omni.request", 0, 100),
			sp(tid, "s", "r", "omni.stage", 0, 90, attribute.Int("omni.stage.id", 0), attribute.String("omni.stage.name", name), attribute.String("omni.stage.type", typ)),
			sp(tid, "p", "s", "omni.llm.prefill", 0, 50),
		})
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if input := int64(traces * 2 * long); grown > input/10 {
		t.Errorf("the side holds %d bytes more after reading %d bytes of names", grown, input)
	}
	runtime.KeepAlive(s)
}

// TestLongNamesAreCutAndShareARow: models that differ only past 64 bytes
// make one row, whose name is valid UTF-8 of at most 64 bytes.
func TestLongNamesAreCutAndShareARow(t *testing.T) {
	s := NewSide(Settings{ByModel: true})
	for i := range 3 {
		tid := fmt.Sprint(i)
		m := strings.Repeat("é", 100) + fmt.Sprint(i) + "\xff"
		s.Add([]traceview.Span{sp(tid, "r", "", "omni.request", 0, 100, attribute.String("gen_ai.request.model", m)), sp(tid, "e", "r", "omni.diffusion.exec", 0, 90)})
	}
	rows := 0
	for _, r := range s.rows {
		if r != nil && r.key.Phase == "exec" {
			rows++
			if len(r.key.Model) > maxLabel || !utf8.ValidString(r.key.Model) || r.measured != 3 {
				t.Errorf("model %q (%d bytes), %d measured", r.key.Model, len(r.key.Model), r.measured)
			}
		}
	}
	if rows != 1 {
		t.Errorf("%d exec rows, want 1", rows)
	}
}
