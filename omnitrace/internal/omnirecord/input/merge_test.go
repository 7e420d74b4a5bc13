// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/spans"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// partsOf reads the forms of one run, fresh, and returns the parts of
// each request by its key.
func partsOf(t *testing.T, names ...string) map[[16]byte][]*forms.Request {
	t.Helper()
	out := map[[16]byte][]*forms.Request{}
	for _, name := range names {
		for _, r := range readAll(t, fixture(t, "run/"+name), Options{}).reqs {
			out[r.Key()] = append(out[r.Key()], r)
		}
	}
	return out
}

// TestMergingFormsDoesNotDependOnTheirOrder: the parts of a request,
// merged in any order, make the same request, and merging a part with
// one identical to it (the same file given twice) changes nothing.
func TestMergingFormsDoesNotDependOnTheirOrder(t *testing.T) {
	ab := partsOf(t, "summary.json", "vllm.log")
	ba := partsOf(t, "vllm.log", "summary.json")
	twice := partsOf(t, "summary.json", "vllm.log", "vllm.log")
	if len(ab) != 3 {
		t.Fatalf("%d requests, want 3", len(ab))
	}
	for key, parts := range ab {
		if len(parts) != 2 || len(ba[key]) != 2 || len(twice[key]) != 3 {
			t.Fatalf("request %s: %d, %d and %d parts", parts[0].ID, len(parts), len(ba[key]), len(twice[key]))
		}
		x, nx := forms.MergeForms(parts)
		y, ny := forms.MergeForms(ba[key])
		z, nz := forms.MergeForms(twice[key])
		if len(nx)+len(ny)+len(nz) > 0 {
			t.Errorf("request %s: the forms of one run disagree: %q %q %q", x.ID, nx, ny, nz)
		}
		if !reflect.DeepEqual(x, y) || !reflect.DeepEqual(x, z) {
			t.Errorf("request %s: merged in another order, or with the log twice, it differs:\n%+v\n%+v\n%+v", x.ID, x, y, z)
		}
		if x.Source != "summary+log" || x.End.IsZero() {
			t.Errorf("request %s: source %q, end %v: the log's time", x.ID, x.Source, x.End)
		}
	}
}

// TestFormsThatDisagreeAreReported: a figure two forms give differently
// beyond their resolutions is reported, and the same one kept whatever
// the order; a finer figure replaces a coarser one that agrees with it.
func TestFormsThatDisagreeAreReported(t *testing.T) {
	for _, swap := range []bool{false, true} {
		var parts []*forms.Request
		for _, ps := range partsOf(t, "summary.json", "vllm.log") {
			if ps[0].ID == "7" && len(ps[0].Stages) == 2 {
				parts = ps
			}
		}
		for _, p := range parts {
			if p.Source == "log" {
				p.Stages[1].Durations[spans.Exec] = 2400 * time.Millisecond // the summary says 2 301 ms
			}
		}
		if swap {
			parts[0], parts[1] = parts[1], parts[0]
		}
		r, notes := forms.MergeForms(parts)
		if len(notes) != 1 || !strings.Contains(notes[0], "exec") || r.Stages[1].Durations[spans.Exec] != 2301*time.Millisecond {
			t.Errorf("swap %v: exec %v, notes %q: want the summary's 2.301s kept, and the disagreement said", swap, r.Stages[1].Durations[spans.Exec], notes)
		}
		if g := r.Stages[0].GenTime; g == nil || g.D != 812250*time.Microsecond || g.Resolution != 0 {
			t.Errorf("swap %v: stage 0's generation time %+v, want the summary's, exact", swap, g)
		}
	}
}
