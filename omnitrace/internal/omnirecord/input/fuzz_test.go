// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// FuzzParse feeds the parser arbitrary lines: it must never panic, and a
// line it accepts must make spans none of which is negative or zero-timed.
// The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(oneLine(good)))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := forms.Parse(line)
		if err != nil {
			return
		}
		if r.ID == "" || r.Arrival.IsZero() || len(r.Stages) == 0 {
			t.Fatalf("accepted a record without id, time or stages: %q", line)
		}
		ss, _ := emitStubs(time.Time{}, r)
		for _, s := range ss {
			if s.EndTime().Before(s.StartTime()) || s.StartTime().IsZero() {
				t.Fatalf("%s: %v..%v from %q", s.Name(), s.StartTime(), s.EndTime(), line)
			}
		}
	})
}

// FuzzInput feeds arbitrary text, as a log, a summary and JSON lines, to
// an input: it must never panic, and every request it hands on must make
// spans within what OTLP carries, none ending before it starts.
func FuzzInput(f *testing.F) {
	for _, name := range []string{"vllm.log", "events.log", "summary.json"} {
		b, err := os.ReadFile("../testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
		f.Add(b, uint8(0x80))
	}
	f.Add([]byte("INFO 01-01 00:00:00 [a.py:1] {'type': 'transfer_stats', 'request_id': (\n 'x' 'y'), 'from_stage': 0, 'to_stage': 1, 'tx_time_ms': 1e308}\n"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, form uint8) {
		h := &fuzzHandler{t: t}
		input, err := NewInput(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), Options{Format: Formats[int(form)%len(Formats)], Settle: 2, MaxPending: 4}, h)
		if err != nil {
			t.Fatal(err)
		}
		if form&0x80 != 0 {
			// A summary of more than MaxPending requests is then read
			// again, in parts.
			input.ReadAgain(bytes.NewReader(data))
		}
		var off int64
		for _, line := range bytes.Split(data, []byte("\n")) {
			input.Line(line, off)
			off += int64(len(line)) + 1
		}
		input.End()
	})
}

type fuzzHandler struct {
	t *testing.T
}

func (h *fuzzHandler) Problem(int, error) {}

func (h *fuzzHandler) Request(r *forms.Request, anchor time.Time) {
	ss, err := emitStubs(anchor, r)
	if err != nil {
		return
	}
	for _, s := range ss {
		if s.EndTime().Before(s.StartTime()) || s.StartTime().Before(minTime) || s.EndTime().After(maxTime) {
			h.t.Fatalf("%s: %v..%v", s.Name(), s.StartTime(), s.EndTime())
		}
	}
}

// FuzzMergeForms reads two arbitrary inputs, each in some form, and merges
// the requests they share in both orders: the merge must never panic,
// must not depend on the order, and must make spans within what OTLP
// carries, each with its own id.
func FuzzMergeForms(f *testing.F) {
	for _, pair := range [][2]string{{"run/summary.json", "run/vllm.log"}, {"run/events.log", "run/events.jsonl"}} {
		a, err := os.ReadFile("../testdata/" + pair[0])
		if err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile("../testdata/" + pair[1])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(a, b, uint8(0), uint8(0))
	}
	f.Fuzz(func(t *testing.T, a, b []byte, fa, fb uint8) { mergeForms(t, a, b, fa, fb) })
}

func mergeForms(t *testing.T, a, b []byte, fa, fb uint8) {
	{
		read := func() map[[16]byte][]*forms.Request {
			out := map[[16]byte][]*forms.Request{}
			for _, x := range []struct {
				data []byte
				form uint8
			}{{a, fa}, {b, fb}} {
				c := &collected{}
				input, err := NewInput(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), Options{Format: Formats[int(x.form)%len(Formats)], Settle: 2, MaxPending: 4}, c)
				if err != nil {
					t.Fatal(err)
				}
				var off int64
				for _, line := range bytes.Split(x.data, []byte("\n")) {
					input.Line(line, off)
					off += int64(len(line)) + 1
				}
				input.End()
				for _, r := range c.reqs {
					if forms.Joins(r) {
						out[r.Key()] = append(out[r.Key()], r)
					}
				}
			}
			return out
		}
		ab, ba := read(), read()
		for key, parts := range ab {
			rev := ba[key]
			slices.Reverse(rev)
			x, nx := forms.MergeForms(parts)
			y, ny := forms.MergeForms(rev)
			if !reflect.DeepEqual(x, y) || !slices.Equal(nx, ny) {
				t.Fatalf("request %q merges differently in the other order:\n%+v %q\n%+v %q", x.ID, x, nx, y, ny)
			}
			ss, err := emitStubs(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), x)
			if err != nil {
				continue
			}
			ids := map[[8]byte]bool{}
			for _, s := range ss {
				if s.EndTime().Before(s.StartTime()) || s.StartTime().Before(minTime) || s.EndTime().After(maxTime) {
					t.Fatalf("%s: %v..%v", s.Name(), s.StartTime(), s.EndTime())
				}
				if id := s.SpanContext().SpanID(); ids[id] {
					t.Fatalf("span id %s twice", id)
				} else {
					ids[id] = true
				}
			}
		}
	}
}
