// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package critpath

import (
	"fmt"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// fuzzNames are the span names a fuzzed trace draws from.
var fuzzNames = []string{"omni.request", "omni.stage", "omni.transfer", "omni.diffusion.exec", "omni.diffusion.queue_wait",
	"omni.diffusion.forward", "omni.llm.decode", "omni.transfer.tx", "omni.output", "other"}

// fuzzTrace reads a trace from b, six bytes a span: its id, its parent,
// its name, its start and length (which may be negative), and a link.
func fuzzTrace(b []byte) []traceview.Span {
	var ss []traceview.Span
	for i := 0; i+6 <= len(b) && len(ss) < 512; i += 6 {
		id, parent, name, start, length, link := b[i]%64, b[i+1]%65, b[i+2], b[i+3], int8(b[i+4]), b[i+5]
		s := traceview.Span{TraceID: "t", SpanID: fmt.Sprint(id), Name: fuzzNames[int(name)%len(fuzzNames)],
			Start: t0.Add(time.Duration(start) * time.Millisecond)}
		s.End = s.Start.Add(time.Duration(length) * time.Millisecond)
		if parent < 64 {
			s.ParentID = fmt.Sprint(parent)
		}
		if link < 64 {
			s.Links = []traceview.Link{{TraceID: "t", SpanID: fmt.Sprint(link)}}
		}
		ss = append(ss, s)
	}
	return ss
}

// FuzzCriticalPath: whatever the trace (shared ids, loops of parents and
// of links, spans that end before they start, children outside their
// parent), each request's path covers it from its start to its end once,
// in order, and every segment lies within the request and within the
// span that held it.
func FuzzCriticalPath(f *testing.F) {
	f.Add([]byte{0, 64, 0, 0, 100, 64, 1, 0, 3, 10, 50, 2, 2, 0, 4, 20, 60, 1})
	f.Add([]byte{0, 1, 0, 0, 100, 1, 1, 0, 0, 5, 90, 0, 1, 0, 1, 50, 250, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		roots, _ := traceview.Trees(fuzzTrace(b))
		tr := New(roots)
		var reqs []*traceview.Node
		stack := roots
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n.Span.Name == "omni.request" {
				reqs = append(reqs, n)
			}
			stack = append(stack, n.Children...)
		}
		for _, r := range reqs {
			segs := tr.Path(r)
			if r.Span.End.Before(r.Span.Start) {
				if len(segs) > 0 {
					t.Fatalf("a request that ends before it starts has a path: %v", segs)
				}
				continue
			}
			at := r.Span.Start
			for _, s := range segs {
				if !s.Start.Equal(at) || !s.End.After(s.Start) {
					t.Fatalf("segment %v-%v of %s: the path is at %v", s.Start, s.End, s.Node.Span.SpanID, at)
				}
				if s.Start.Before(s.Node.Span.Start) || s.End.After(s.Node.Span.End) {
					t.Fatalf("segment %v-%v held by %s, which runs %v-%v", s.Start, s.End, s.Node.Span.SpanID, s.Node.Span.Start, s.Node.Span.End)
				}
				at = s.End
			}
			if len(segs) > 0 && !at.Equal(r.Span.End) || len(segs) == 0 && r.Span.End.After(r.Span.Start) {
				t.Fatalf("the path ends at %v, the request at %v", at, r.Span.End)
			}
		}
	})
}
