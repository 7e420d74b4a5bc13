// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"container/list"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// Joined is a request merged from its forms, ready to be emitted.
type Joined struct {
	R *forms.Request
	// Anchor places it when none of its parts has times: the earliest of
	// its parts' anchors.
	Anchor time.Time
	// Name is the input it is reported by, at R.Line: its first part's in
	// the merge order.
	Name string
	// Notes are the disagreements of its parts (see MergeForms).
	Notes []string
}

// Joiner holds the requests of vLLM-Omni's forms read from all inputs but
// the last, until their other forms have been read (see MergeForms). It
// holds at most max of them (parts, each read from one input); beyond, the
// request held longest is handed on as it is, and a part of it read later
// is counted (Late) and dropped, not made into a second trace of one
// request. What it remembers of a request handed on early is its key.
type Joiner struct {
	max, parts int
	held       map[[16]byte]*list.Element // of *heldReq, in the order first held
	order      *list.List
	early      map[[16]byte]struct{}
	// Late counts the parts dropped because their request was handed on.
	Late int
}

type heldReq struct {
	key   [16]byte
	parts []part
}

type part struct {
	r      *forms.Request
	anchor time.Time
	name   string
}

// NewJoiner returns a joiner that holds at most n requests (at least 1).
func NewJoiner(n int) *Joiner {
	return &Joiner{max: max(n, 1), held: map[[16]byte]*list.Element{}, order: list.New(), early: map[[16]byte]struct{}{}}
}

// Hold holds r, read from input name (not the last), with the anchor its
// input gives. It returns the request handed on to keep within max, if
// one is.
func (j *Joiner) Hold(r *forms.Request, anchor time.Time, name string) []Joined {
	key := r.Key()
	if _, gone := j.early[key]; gone {
		j.Late++
		return nil
	}
	j.parts++
	if e, ok := j.held[key]; ok {
		h := e.Value.(*heldReq)
		h.parts = append(h.parts, part{r, anchor, name})
	} else {
		j.held[key] = j.order.PushBack(&heldReq{key: key, parts: []part{{r, anchor, name}}})
	}
	var out []Joined
	for j.parts > j.max {
		h := j.order.Remove(j.order.Front()).(*heldReq)
		delete(j.held, h.key)
		j.parts -= len(h.parts)
		j.early[h.key] = struct{}{}
		out = append(out, join(h.parts))
	}
	return out
}

// Take merges r, read from the last input, with what is held of it, and
// returns the request to emit; ok is false when r's request was handed on
// before (counted in Late).
func (j *Joiner) Take(r *forms.Request, anchor time.Time, name string) (Joined, bool) {
	key := r.Key()
	if _, gone := j.early[key]; gone {
		j.Late++
		return Joined{}, false
	}
	parts := []part{{r, anchor, name}}
	if e, ok := j.held[key]; ok {
		h := e.Value.(*heldReq)
		j.order.Remove(e)
		delete(j.held, key)
		j.parts -= len(h.parts)
		parts = append(h.parts, parts...)
	}
	return join(parts), true
}

// Rest returns every request still held, merged, in the order first held.
func (j *Joiner) Rest() []Joined {
	out := make([]Joined, 0, j.order.Len())
	for e := j.order.Front(); e != nil; e = e.Next() {
		out = append(out, join(e.Value.(*heldReq).parts))
	}
	j.order.Init()
	clear(j.held)
	j.parts = 0
	return out
}

func join(parts []part) Joined {
	if len(parts) == 1 {
		p := parts[0]
		return Joined{R: p.r, Anchor: p.anchor, Name: p.name}
	}
	rs := make([]*forms.Request, len(parts))
	anchor := parts[0].anchor
	for i, p := range parts {
		rs[i] = p.r
		if p.anchor.Before(anchor) {
			anchor = p.anchor
		}
	}
	// The name of the part first in the merge order.
	first := parts[0]
	for _, p := range parts[1:] {
		if a, b := forms.FormRank(p.r.Source), forms.FormRank(first.r.Source); a < b || (a == b && p.r.Digest < first.r.Digest) {
			first = p
		}
	}
	r, notes := forms.MergeForms(rs)
	return Joined{R: r, Anchor: anchor, Name: first.name, Notes: notes}
}
