// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package traceview

import (
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Span is one span, with what the views need.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Start, End                time.Time
	Attrs                     map[string]attribute.Value
	StatusCode                codes.Code
	StatusMessage             string
	// Service and PID come from the span's resource.
	Service string
	PID     int64
	// Links are the spans this one links to, as trace id and span id (hex).
	Links []Link
}

// Link is a span link: the span it points to.
type Link struct {
	TraceID, SpanID string
}

// Duration is End minus Start.
func (s *Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Str returns a string attribute, or "".
func (s *Span) Str(key string) string {
	v, ok := s.Attrs[key]
	if !ok {
		return ""
	}
	return v.String()
}

// Int returns an integer attribute and whether it is there.
func (s *Span) Int(key string) (int64, bool) {
	v, ok := s.Attrs[key]
	if !ok || v.Type() != attribute.INT64 {
		return 0, false
	}
	return v.AsInt64(), true
}

// Bool returns a boolean attribute and whether it is there.
func (s *Span) Bool(key string) (bool, bool) {
	v, ok := s.Attrs[key]
	if !ok || v.Type() != attribute.BOOL {
		return false, false
	}
	return v.AsBool(), true
}

// FromSDK converts spans the SDK recorded in this process.
func FromSDK(ss []sdktrace.ReadOnlySpan) []Span {
	out := make([]Span, 0, len(ss))
	for _, s := range ss {
		sp := Span{
			TraceID:       s.SpanContext().TraceID().String(),
			SpanID:        s.SpanContext().SpanID().String(),
			Name:          s.Name(),
			Start:         s.StartTime(),
			End:           s.EndTime(),
			Attrs:         make(map[string]attribute.Value, len(s.Attributes())),
			StatusCode:    s.Status().Code,
			StatusMessage: s.Status().Description,
		}
		if s.Parent().IsValid() {
			sp.ParentID = s.Parent().SpanID().String()
		}
		for _, kv := range s.Attributes() {
			sp.Attrs[string(kv.Key)] = kv.Value
		}
		for _, l := range s.Links() {
			sp.Links = append(sp.Links, Link{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()})
		}
		if r := s.Resource(); r != nil {
			if v, ok := r.Set().Value("service.name"); ok {
				sp.Service = v.AsString()
			}
			if v, ok := r.Set().Value("process.pid"); ok {
				sp.PID = v.AsInt64()
			}
		}
		out = append(out, sp)
	}
	return out
}

// ByTrace groups spans by trace id, each trace's spans by start time.
func ByTrace(ss []Span) map[string][]Span {
	m := map[string][]Span{}
	for _, s := range ss {
		m[s.TraceID] = append(m[s.TraceID], s)
	}
	for _, t := range m {
		sortByStart(t)
	}
	return m
}

func sortByStart(ss []Span) {
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].Start.Before(ss[j].Start) })
}
