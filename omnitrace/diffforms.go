// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/otelomni/otelomni/internal/sanitize"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/emit"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/input"
	"github.com/otelomni/otelomni/omnitrace/traceview"
)

// readForms reads files of the forms import reads (vLLM-Omni's
// summaries, logs and event dicts, JSON-lines records), as import reads
// them, and adds the traces import would make of them to the side,
// without exporting them: the forms of one request in several files are
// merged into one trace, the requests of all files but the largest held
// until then (at most input.DefaultMaxPending).
func (d *diffReader) readForms(ctx context.Context, names []string) error {
	h := &formsHandler{d: d, em: emit.NewEmitter(spanLimits(), nil)}
	names = inputOrder(names, d.stderr)
	if len(names) > 1 {
		h.join = input.NewJoiner(input.DefaultMaxPending)
	}
	for i, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		h.last = i == len(names)-1
		if err := h.readFile(ctx, name); err != nil {
			return fmt.Errorf("%s: %s: %w", d.what, sanitize.Display(name, 256), err)
		}
	}
	if h.join != nil {
		for _, j := range h.join.Rest() {
			h.emit(j.R, j.Anchor, j.Name)
		}
		if h.join.Late > 0 {
			fmt.Fprintf(d.stderr, "omnitrace diff: %s: %d requests of a later input were left out: the same request of an earlier input was read without them\n", d.what, h.join.Late)
		}
	}
	if h.problems > maxProblemLines {
		fmt.Fprintf(d.stderr, "omnitrace diff: %s: %d more problems not shown\n", d.what, h.problems-maxProblemLines)
	}
	return nil
}

// formsHandler receives the requests of the inputs of a side.
type formsHandler struct {
	d        *diffReader
	em       *emit.Emitter
	join     *input.Joiner
	last     bool
	name     string
	problems int
}

func (h *formsHandler) readFile(ctx context.Context, name string) error {
	// The name is said on stderr: as a terminal shows it.
	h.name = sanitize.Display(name, 256)
	r := h.d.stdin
	ref := time.Now().UTC()
	var again io.ReaderAt
	if br, ok := h.d.opened[name]; ok {
		r = br // a pipe, opened once: read on from what told its form
	} else if name == "-" {
		h.name = "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			ref = st.ModTime().UTC()
			if st.Mode().IsRegular() {
				again = f
			}
		}
		r = f
	}
	in, err := input.NewInput(ref, input.Options{Zone: time.UTC}, h)
	if err != nil {
		return err
	}
	if again != nil {
		in.ReadAgain(again)
	}
	lr := newLineReader(r)
	for ctx.Err() == nil {
		line, off, tooLong, err := lr.next()
		if tooLong {
			in.SkipLine()
			h.Problem(lr.n, fmt.Errorf("line longer than %d bytes", maxLine))
		} else if line != nil {
			in.Line(line, off)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			in.End()
			return err
		}
	}
	in.End()
	if late, dropped := in.Stats(); late > 0 || dropped > 0 {
		fmt.Fprintf(h.d.stderr, "omnitrace diff: %s: %s: %d records came after their request was read, %d unfinished requests dropped\n", h.d.what, h.name, late, dropped)
	}
	return ctx.Err()
}

// Request takes one request, once its other forms are read.
func (h *formsHandler) Request(r *forms.Request, anchor time.Time) {
	if h.join != nil && forms.Joins(r) {
		if !h.last {
			for _, j := range h.join.Hold(r, anchor, h.name) {
				h.emit(j.R, j.Anchor, j.Name)
			}
			return
		}
		if j, ok := h.join.Take(r, anchor, h.name); ok {
			h.emit(j.R, j.Anchor, j.Name)
		}
		return
	}
	h.emit(r, anchor, h.name)
}

// Problem reports a record skipped, or a field left out.
func (h *formsHandler) Problem(line int, err error) {
	outcome := "; skipped"
	if errors.Is(err, forms.ErrLeftOut) {
		outcome = ""
	}
	h.report(h.name, line, err, outcome)
}

func (h *formsHandler) report(name string, line int, err error, outcome string) {
	if h.problems++; h.problems > maxProblemLines {
		return
	}
	where := name
	if line > 0 {
		where = fmt.Sprintf("%s:%d", name, line)
	}
	fmt.Fprintf(h.d.stderr, "%s: %s%s\n", where, sanitize.Display(err.Error(), 512), outcome)
}

// emit makes the request's spans, as import would, and adds them to the
// side.
func (h *formsHandler) emit(r *forms.Request, anchor time.Time, name string) {
	ss := ptrace.NewSpanSlice()
	if err := h.em.Emit(r, anchor, &ss); err != nil {
		h.report(name, r.Line, fmt.Errorf("request %q: %w", sanitize.String(r.ID, 128), err), "")
	}
	if ss.Len() == 0 {
		return
	}
	trace := make([]traceview.Span, 0, ss.Len())
	for _, s := range ss.All() {
		trace = append(trace, viewSpan(s))
	}
	h.d.side.Add(trace)
}

// viewSpan is what diff reads of a span import makes: its ids, name,
// times, status, links and the attributes of viewKeys (see slim).
func viewSpan(s ptrace.Span) traceview.Span {
	sp := traceview.Span{TraceID: s.TraceID().String(), SpanID: s.SpanID().String(), Name: s.Name(),
		Start: s.StartTimestamp().AsTime().UTC(), End: s.EndTimestamp().AsTime().UTC()}
	if !s.ParentSpanID().IsEmpty() {
		sp.ParentID = s.ParentSpanID().String()
	}
	if s.Status().Code() == ptrace.StatusCodeError {
		sp.StatusCode = codes.Error
	}
	for _, k := range viewKeys {
		v, ok := s.Attributes().Get(k)
		if !ok {
			continue
		}
		var av attribute.Value
		switch v.Type() {
		case pcommon.ValueTypeStr:
			av = attribute.StringValue(v.Str())
		case pcommon.ValueTypeInt:
			av = attribute.Int64Value(v.Int())
		case pcommon.ValueTypeBool:
			av = attribute.BoolValue(v.Bool())
		case pcommon.ValueTypeDouble:
			av = attribute.Float64Value(v.Double())
		default:
			continue
		}
		if sp.Attrs == nil {
			sp.Attrs = make(map[string]attribute.Value, 4)
		}
		sp.Attrs[k] = av
	}
	for _, l := range s.Links().All() {
		sp.Links = append(sp.Links, traceview.Link{TraceID: l.TraceID().String(), SpanID: l.SpanID().String()})
	}
	return sp
}
