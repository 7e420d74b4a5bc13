// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracetable

import (
	"bytes"
	"strings"
	"testing"
)

// TestTableMarksTheCriticalPath: with Critical, the cells of the spans
// that held the critical path carry *, the others not, and the request's
// own time on it is said; without, the table is Write's.
func TestTableMarksTheCriticalPath(t *testing.T) {
	tr := func() []Span {
		return []Span{
			hostileSpan("r", "", "omni.request", 0, 112),
			hostileSpan("pre", "r", "omni.diffusion.preprocess", 0, 10),
			hostileSpan("exec", "r", "omni.diffusion.exec", 10, 100),
			hostileSpan("qw", "r", "omni.diffusion.queue_wait", 10, 20), // within exec: on the path, not exec
			hostileSpan("kv", "exec", "omni.diffusion.kv_recv", 20, 30),
			hostileSpan("fwd", "exec", "omni.diffusion.forward", 30, 90),
			hostileSpan("vae", "exec", "omni.diffusion.vae_decode", 90, 100),
			hostileSpan("post", "r", "omni.diffusion.postprocess", 100, 110),
		}
	}
	var marked, plain, written bytes.Buffer
	WriteWith(&marked, tr(), Options{Critical: true})
	WriteWith(&plain, tr(), Options{})
	Write(&written, tr())
	if plain.String() != written.String() {
		t.Errorf("without Critical the table differs from Write's:\n%s\n%s", plain.String(), written.String())
	}
	want := map[string]string{
		"preprocess": "10.000*", "queue_wait": "10.000*", "exec": "90.000", "forward": "60.000*",
		"kv_recv": "10.000*", "vae_decode": "10.000*", "postprocess": "10.000*",
	}
	for _, line := range strings.Split(marked.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			if w, ok := want[f[0]]; ok {
				if f[1] != w {
					t.Errorf("%s: %s, want %s", f[0], f[1], w)
				}
				delete(want, f[0])
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("rows not found: %v\n%s", want, marked.String())
	}
	if !strings.Contains(marked.String(), "2.000 ms of it in no phase") {
		t.Errorf("the request's own 2 ms on the path not said:\n%s", marked.String())
	}
}
