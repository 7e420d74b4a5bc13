// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// timeBase is what places the requests of an input that lack times: the
// input's reference time (a file's modification time, or now), -start,
// and the zone of a log.
type timeBase struct {
	ref, start time.Time
	zone       *time.Location
}

func (b timeBase) String() string {
	z := "UTC"
	if b.zone != nil {
		z = b.zone.String()
	}
	return fmt.Sprintf("ref %s start %s zone %s", b.ref.Format(time.RFC3339Nano), b.start.Format(time.RFC3339Nano), z)
}

// placedSpan is an exported span's times, and the import that made it.
type placedSpan struct {
	name       string
	start, end int64
	where      string
}

// spanLedger holds every span id exported by the imports of a test, with
// its times.
type spanLedger map[[24]byte]placedSpan

// add records the spans of ss, made by the import where, and returns the
// first span id it had already seen with other times.
func (l spanLedger) add(ss ptrace.SpanSlice, where string) error {
	for _, s := range ss.All() {
		var k [24]byte
		tid, sid := s.TraceID(), s.SpanID()
		copy(k[:16], tid[:])
		copy(k[16:], sid[:])
		p := placedSpan{s.Name(), int64(s.StartTimestamp()), int64(s.EndTimestamp()), where}
		if prev, ok := l[k]; ok && (prev.start != p.start || prev.end != p.end) {
			return fmt.Errorf("span %s/%s (%s) is %d..%d in %s and %d..%d in %s", tid, sid, p.name, prev.start, prev.end, prev.where, p.start, p.end, where)
		}
		l[k] = p
	}
	return nil
}

// importSpans reads the inputs (each in its form, as several inputs of one
// import: the forms of a request merged) on time base b, the first again
// from its bytes when again is set, and returns the spans they make.
func importSpans(t testing.TB, b timeBase, again bool, inputs ...[]byte) ptrace.SpanSlice {
	t.Helper()
	out := ptrace.NewSpanSlice()
	em := emit.NewEmitter(defaultLimits, nil)
	emitOne := func(r *forms.Request, anchor time.Time) {
		_ = em.Emit(r, anchor, &out) // a request that cannot be placed makes no span
	}
	join := NewJoiner(DefaultMaxPending)
	for i, data := range inputs {
		last := i == len(inputs)-1
		h := &handlerFunc{request: func(r *forms.Request, anchor time.Time) {
			switch {
			case len(inputs) == 1 || !forms.Joins(r):
				emitOne(r, anchor)
			case !last:
				for _, j := range join.Hold(r, anchor, "") {
					emitOne(j.R, j.Anchor)
				}
			default:
				if j, ok := join.Take(r, anchor, ""); ok {
					emitOne(j.R, j.Anchor)
				}
			}
		}}
		in, err := NewInput(b.ref, Options{Start: b.start, Zone: b.zone, Settle: 2, MaxPending: 4}, h)
		if err != nil {
			t.Fatal(err)
		}
		if again {
			in.ReadAgain(bytes.NewReader(data))
		}
		var off int64
		for _, line := range bytes.Split(data, []byte("\n")) {
			in.Line(line, off)
			off += int64(len(line)) + 1
		}
		in.End()
	}
	for _, j := range join.Rest() {
		emitOne(j.R, j.Anchor)
	}
	return out
}

type handlerFunc struct {
	request func(*forms.Request, time.Time)
}

func (h *handlerFunc) Request(r *forms.Request, anchor time.Time) { h.request(r, anchor) }
func (h *handlerFunc) Problem(int, error)                         {}

// idInputs are inputs of every form, from the fixtures.
func idInputs(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, name := range []string{"summary.json", "vllm.log", "events.log", "interleaved_tables.log", "run/summary.json", "run/vllm.log", "run/events.log", "run/events.jsonl"} {
		b, err := os.ReadFile("../testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, []byte(oneLine(good)+"\n"))
}

// zones are the zones a log is read in by the tests of ids.
var zones = func() []*time.Location {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		panic(err)
	}
	return []*time.Location{nil, tokyo, time.FixedZone("-0530", -(5*3600 + 1800))}
}()

// baseOf makes a time base of the fuzzer's numbers, within the years an
// import can place at.
func baseOf(ref, start int64, zone uint8) timeBase {
	const lo, hi = 365 * 24 * 3600, 290 * 365 * 24 * 3600 // 1971 to 2260
	clamp := func(s int64) int64 { return lo + (s%(hi-lo)+(hi-lo))%(hi-lo) }
	b := timeBase{ref: time.Unix(clamp(ref), ref&0x3fffffff%1e9).UTC(), zone: zones[int(zone)%len(zones)]}
	if start != 0 {
		b.start = time.Unix(clamp(start), start&0x3fffffff%1e9).UTC()
	}
	return b
}

// FuzzNoSpanIDHasTwoTimes imports inputs of any form, alone and as two
// forms of one run, on varied time bases: no span id is ever exported with
// two different start or end times, and the same input on the same time
// base, read once or again from its bytes, makes the same spans.
func FuzzNoSpanIDHasTwoTimes(f *testing.F) {
	ins := idInputs(f)
	for i, a := range ins {
		b := ins[(i+1)%len(ins)]
		f.Add(a, b, int64(1796000000), int64(1796000000+366*24*3600), int64(0), int64(1700000000), uint8(i))
	}
	f.Fuzz(func(t *testing.T, a, b []byte, refA, refB, startA, startB int64, zone uint8) {
		ledger := spanLedger{}
		bases := []timeBase{baseOf(refA, startA, zone), baseOf(refB, startA, zone), baseOf(refA, startB, zone+1), baseOf(refB, startB, zone+2)}
		for _, base := range bases {
			for _, set := range [][][]byte{{a}, {b}, {a, b}} {
				once := importSpans(t, base, false, set...)
				again := importSpans(t, base, true, set...)
				for _, x := range []struct {
					ss  ptrace.SpanSlice
					how string
				}{{once, "read once"}, {again, "read again"}} {
					if err := ledger.add(x.ss, fmt.Sprintf("%d inputs %s, %v", len(set), x.how, base)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}

// TestNoSpanIDHasTwoTimes runs the property of FuzzNoSpanIDHasTwoTimes over
// every pair of the fixtures, each on many time bases drawn at random
// (from a seed printed, to replay a failure), and checks that time bases
// that place a request differently do give it other ids: the property
// holds without every span id being new.
func TestNoSpanIDHasTwoTimes(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ins := idInputs(t)
	ledger := spanLedger{}
	rounds := 12
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		base := baseOf(rng.Int64(), rng.Int64()*int64(round%2), uint8(rng.IntN(3)))
		for i, a := range ins {
			for j, b := range ins {
				set := [][]byte{a, b}
				if i == j {
					set = set[:1]
				}
				once, again := importSpans(t, base, false, set...), importSpans(t, base, true, set...)
				if err := ledger.add(once, fmt.Sprintf("inputs %d+%d, %v", i, j, base)); err != nil {
					t.Fatal(err)
				}
				if err := ledger.add(again, fmt.Sprintf("inputs %d+%d read again, %v", i, j, base)); err != nil {
					t.Fatal(err)
				}
				if once.Len() != again.Len() {
					t.Errorf("inputs %d+%d: %d spans read once, %d read again", i, j, once.Len(), again.Len())
				}
			}
		}
	}
	// Each round placed the fixtures' undated requests elsewhere, with
	// other ids: far more span ids than one round's.
	one := spanLedger{}
	for _, a := range ins {
		if err := one.add(importSpans(t, baseOf(1, 0, 0), false, a), ""); err != nil {
			t.Fatal(err)
		}
	}
	if len(ledger) < 2*len(one) {
		t.Errorf("%d span ids over %d time bases, %d on one: time bases that place requests elsewhere do not change their ids", len(ledger), rounds, len(one))
	}
}
