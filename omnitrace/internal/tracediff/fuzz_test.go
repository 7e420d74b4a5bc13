// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

var fuzzNames = []string{"omni.request", "omni.stage", "omni.transfer", "omni.diffusion.exec", "omni.diffusion.queue_wait",
	"omni.diffusion.forward", "omni.llm.decode", "omni.transfer.tx", "omni.output", "other\x00\xff"}

// fuzzTraces reads traces from b, seven bytes a span: its trace, id,
// parent, name, start, length (may be negative) and a stage id or
// modality.
func fuzzTraces(b []byte) [][]traceview.Span {
	byTrace := map[byte][]traceview.Span{}
	for i := 0; i+7 <= len(b) && i < 7*512; i += 7 {
		tid, id, parent, name, start, length, extra := b[i]%4, b[i+1]%32, b[i+2]%33, b[i+3], b[i+4], int8(b[i+5]), b[i+6]
		s := traceview.Span{TraceID: fmt.Sprint(tid), SpanID: fmt.Sprint(id), Name: fuzzNames[int(name)%len(fuzzNames)],
			Start: t0.Add(time.Duration(start) * time.Millisecond), Attrs: map[string]attribute.Value{}}
		s.End = s.Start.Add(time.Duration(length) * time.Millisecond)
		if parent < 32 {
			s.ParentID = fmt.Sprint(parent)
		}
		switch extra % 4 {
		case 0:
			s.Attrs["omni.stage.id"] = attribute.Int64Value(int64(int8(extra)) << 40)
		case 1:
			s.Attrs["omni.output.modality"] = attribute.StringValue(strings.Repeat("é", int(extra)))
		case 2:
			s.Attrs["omni.timing.length_unmeasured"] = attribute.BoolValue(true)
		}
		byTrace[tid] = append(byTrace[tid], s)
	}
	var out [][]traceview.Span
	for _, tr := range byTrace {
		out = append(out, tr)
	}
	return out
}

// FuzzCompare: any traces on either side make a report in every format,
// the JSON valid, within the side's bounds: p-values in [0, 1],
// intervals ordered, "~" exactly when not significant, shares of the
// critical path in [0, 1].
func FuzzCompare(f *testing.F) {
	f.Add([]byte{0, 0, 32, 0, 0, 100, 1, 0, 1, 0, 1, 0, 50, 0}, []byte{1, 0, 32, 0, 0, 90, 1})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		set := Settings{Samples: 4, MaxRows: 8}
		sides := [2]*Side{NewSide(set), NewSide(set)}
		for i, in := range [][]byte{a, b} {
			for _, tr := range fuzzTraces(in) {
				sides[i].Add(tr)
			}
		}
		rep := Compare(sides[0], sides[1], Options{})
		if len(rep.Rows) > 2*set.MaxRows || len(rep.Critical) > 2*set.MaxRows {
			t.Fatalf("%d and %d rows, beyond twice %d", len(rep.Rows), len(rep.Critical), set.MaxRows)
		}
		var js strings.Builder
		if err := rep.WriteJSON(&js, Names{"a", "b"}); err != nil {
			t.Fatal(err)
		}
		if !json.Valid([]byte(js.String())) {
			t.Fatalf("invalid JSON:\n%s", js.String())
		}
		for _, w := range []func(io.Writer) error{
			func(w io.Writer) error { return rep.WriteText(w, Names{"a", "b"}) },
			rep.WriteCSV,
		} {
			if err := w(io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range rep.Rows {
			for _, t2 := range []Test{r.Duration, r.Measured} {
				if t2.Done && (t2.P < 0 || t2.P > 1 || t2.Adjusted < t2.P || t2.Adjusted > 1) {
					t.Fatalf("%s: p %v adjusted %v", r.Key, t2.P, t2.Adjusted)
				}
			}
			for _, st := range []Stats{r.Base, r.New} {
				if st.Measured > st.Requests || st.Samples > set.Samples {
					t.Fatalf("%s: %d measured of %d requests, %d values kept", r.Key, st.Measured, st.Requests, st.Samples)
				}
				if st.Samples > 0 && !(st.P50Lo <= st.P50 && st.P50 <= st.P50Hi && st.P99Lo <= st.P99 && st.P99 <= st.P99Hi) {
					t.Fatalf("%s: intervals out of order: %+v", r.Key, st)
				}
			}
			if r.Duration.Done && strings.HasPrefix(r.durationChange(), "~") == r.Duration.Significant {
				t.Fatalf("%s: %q, significant %v", r.Key, r.durationChange(), r.Duration.Significant)
			}
		}
		for _, c := range rep.Critical {
			for _, v := range append(slices.Clone(c.Base), c.New...) {
				if v < 0 || v > 1 {
					t.Fatalf("critical %s: a share of %v", c.Key, v)
				}
			}
		}
	})
}
