// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package tracediff

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/otelomni/otelomni/internal/plan"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/omnitrace/internal/critpath"
	"github.com/otelomni/otelomni/omnitrace/traceview"
	"github.com/otelomni/otelomni/spans"
)

// Settings bound what a side keeps.
type Settings struct {
	// Samples is how many values a row keeps on each side, a uniform
	// sample of all it saw (0: DefaultSamples). Percentiles and tests
	// are those of the sample; counts are exact.
	Samples int
	// MaxRows bounds the rows of each table (0: DefaultMaxRows); the
	// values of rows beyond are counted, not kept.
	MaxRows int
	// ByModel splits rows by the request's model (gen_ai.request.model).
	ByModel bool
}

// Defaults of [Settings].
const (
	// DefaultSamples keeps the tests' power for any input (ten thousand
	// values per side make a 1 % shift of a lognormal phase of spread
	// 0.3 plain) at 80 KB a row and side.
	DefaultSamples = 10000
	// DefaultMaxRows is far above what a pipeline makes (a row per
	// modality, stage and phase: about 60 for three modalities).
	DefaultMaxRows = 500
)

// Memory returns the most a side's kept values take, in bytes, under
// these settings: two tables (durations, critical path) of at most
// MaxRows rows, each at most Samples float64 values.
func (s Settings) Memory() int64 {
	s = s.withDefaults()
	return 2 * int64(s.MaxRows) * int64(s.Samples) * 8
}

func (s Settings) withDefaults() Settings {
	if s.Samples <= 0 {
		s.Samples = DefaultSamples
	}
	if s.MaxRows <= 0 {
		s.MaxRows = DefaultMaxRows
	}
	return s
}

// Key names a row.
type Key struct {
	Modality string `json:"modality"`
	// Model is empty unless the rows are split by model.
	Model string `json:"model,omitempty"`
	// Stage is the stage's type ("diffusion", "llm"), and in a
	// multi-stage request its id and name ("llm 0 thinker"), or a
	// hand-over ("transfer 0->1"), or "-" for the request as a whole.
	Stage string `json:"stage"`
	// Phase is a phase id (exec, llm.prefill, transfer.tx), or
	// "request", "unattributed", "stage", "transfer", "output", "self"
	// (on the critical path: the stage's own time, in none of its
	// phases), or another span's name.
	Phase string `json:"phase"`
}

// The phases of rows that are not a phase of the catalogue.
const (
	PhaseRequest      = "request"
	PhaseUnattributed = "unattributed"
	PhaseStage        = "stage"
	PhaseTransfer     = "transfer"
	PhaseOutput       = "output"
	PhaseSelf         = "self"
	stageNone         = "-"
)

// rank orders rows: by modality and model, then stage, then phase.
type rank struct{ stage, phase int }

// Side is one run: what it measured, row by row. Not safe for concurrent
// use.
type Side struct {
	set Settings
	// Keys are interned: ids names each key met (at most maxKeys), keys
	// and ranks are by id, and so are the rows of the two tables (nil: no
	// row).
	ids        map[Key]int32
	keys       []Key
	ranks      []rank
	rows, crit []*row
	nrows      [2]int
	// groups are the requests of each modality (and model).
	groups map[group]*groupStat
	// Counts of what was read.
	requests, traces, problemTraces, noLength int
	// hidden counts values of rows beyond MaxRows.
	hidden int

	// Scratch of one request, by key id: the intervals of each row, and
	// the time each held the critical path.
	ivs       [][]interval
	touched   []int32
	onPath    []time.Duration
	onSet     []bool
	onTouched []int32
	covered   []interval
	nodeInfo  map[*traceview.Node]nodeInfo
	stack     []item
	path      *critpath.Trace
	labels    map[stageRaw]string
}

type item struct {
	n     *traceview.Node
	stage int32
	srank int
}

// stageRaw is what a stage's label is made of.
type stageRaw struct {
	typ, name string
	id        int64
	transfer  bool
}

// maxLabels bounds the stage labels remembered.
const maxLabels = 4096

type group struct{ modality, model string }

type groupStat struct {
	requests int
	// length is the requests' summed length, of those with one, in ms:
	// the denominator of the critical path's shares.
	length float64
}

type row struct {
	key      Key
	rank     rank
	measured int
	res      reservoir
	// onPath is the time the row held the critical path, summed over
	// requests, in ms (critical rows only).
	onPath float64
}

type interval struct{ start, end time.Time }

// nodeInfo is what a span of a request is, for its rows: its key, and
// the key of the stage or hand-over it is in (-1: none).
type nodeInfo struct{ key, stage int32 }

// NewSide returns an empty side.
func NewSide(set Settings) *Side {
	return &Side{set: set.withDefaults(), ids: map[Key]int32{}, groups: map[group]*groupStat{},
		nodeInfo: map[*traceview.Node]nodeInfo{}, labels: map[stageRaw]string{}}
}

// Requests returns the number of requests read.
func (s *Side) Requests() int { return s.requests }

// Traces returns the number of traces read, and how many of them had
// spans that could not be placed in their tree (see traceview.Trees).
func (s *Side) Traces() (traces, withProblems int) { return s.traces, s.problemTraces }

// NoLength returns the number of requests that end before they start:
// counted, never measured.
func (s *Side) NoLength() int { return s.noLength }

// Hidden returns the number of values of rows beyond MaxRows.
func (s *Side) Hidden() int { return s.hidden }

// maxKeys bounds the keys a side interns: those of both tables, and
// as many again met in requests beyond them.
func (s *Side) maxKeys() int { return 4 * s.set.MaxRows }

// intern returns k's id, or -1 beyond maxKeys.
func (s *Side) intern(k Key, r rank) int32 {
	if id, ok := s.ids[k]; ok {
		return id
	}
	if len(s.keys) >= s.maxKeys() {
		s.hidden++
		return -1
	}
	id := int32(len(s.keys))
	s.ids[k] = id
	s.keys = append(s.keys, k)
	s.ranks = append(s.ranks, r)
	s.rows = append(s.rows, nil)
	s.crit = append(s.crit, nil)
	s.ivs = append(s.ivs, nil)
	s.onPath = append(s.onPath, 0)
	s.onSet = append(s.onSet, false)
	return id
}

// Add adds the requests of one trace: each omni.request span, a root or
// under another span. It sorts trace.
func (s *Side) Add(trace []traceview.Span) {
	s.traces++
	roots, problems := traceview.Trees(trace)
	if len(problems) > 0 {
		s.problemTraces++
	}
	indexed := false
	stack := s.stack[:0]
	for _, r := range roots {
		stack = append(stack, item{n: r})
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1].n
		stack = stack[:len(stack)-1]
		if n.Span.Name == spans.RequestSpanName {
			if !indexed {
				if s.path == nil {
					s.path = critpath.New(roots)
				} else {
					s.path.Reset(roots)
				}
				indexed = true
			}
			s.stack = stack
			s.request(n)
			stack = s.stack
		}
		for _, c := range n.Children {
			stack = append(stack, item{n: c})
		}
	}
	clear(stack[:cap(stack)])
	s.stack = stack[:0]
}

func (s *Side) request(req *traceview.Node) {
	s.requests++
	sp := req.Span
	g := group{modality: label(sp.Str(string(attrs.OutputModalityKey)))}
	if s.set.ByModel {
		g.model = label(sp.Str(string(semconv.GenAIRequestModelKey)))
	}
	gs := s.groups[g]
	if gs == nil {
		if len(s.groups) >= s.maxKeys() {
			s.hidden++
			return
		}
		gs = &groupStat{}
		s.groups[g] = gs
	}
	gs.requests++
	if sp.End.Before(sp.Start) {
		s.noLength++
		return
	}
	for _, id := range s.touched {
		s.ivs[id] = s.ivs[id][:0]
	}
	s.touched = s.touched[:0]
	clear(s.nodeInfo)
	s.covered = s.covered[:0]
	key := func(stage, phase string) Key {
		return Key{Modality: g.modality, Model: g.model, Stage: stage, Phase: phase}
	}

	unatt := s.intern(key(stageNone, PhaseUnattributed), rank{-1, -1})
	s.nodeInfo[req] = nodeInfo{key: unatt, stage: -1}
	s.note(s.intern(key(stageNone, PhaseRequest), rank{-1, -2}), sp)

	// The request's children and their subtrees, each span given its
	// row; the union of what is measured within the request.
	single := singleStage(req)
	outer := len(s.stack)
	for _, c := range req.Children {
		s.stack = append(s.stack, item{c, -1, 0})
	}
	for len(s.stack) > outer {
		it := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		n, c := it.n, it.n.Span
		if bad(c) {
			continue // ends before it starts: no length
		}
		if c.Name == spans.RequestSpanName {
			// A request within: counted on its own, and measured within
			// this one.
			s.covered = append(s.covered, clip(c, sp))
			continue
		}
		stage, srank := it.stage, it.srank
		var k int32
		switch {
		case it.stage < 0 && c.Name == spans.StageSpanName:
			id, _ := c.Int(string(attrs.StageIDKey))
			srank = int(min(max(id, -1), 1<<20))*2 + 1
			k = s.intern(key(s.stageLabel(stageRaw{typ: c.Str(string(attrs.StageTypeKey)), name: c.Str(string(attrs.StageNameKey)), id: id}), PhaseStage), rank{srank, 0})
			stage = k
		case it.stage < 0 && c.Name == plan.TransferSpanName:
			from, _ := c.Int(string(attrs.TransferFromStageKey))
			to, _ := c.Int(string(attrs.TransferToStageKey))
			srank = int(min(max(from, -1), 1<<20))*2 + 2
			k = s.intern(key(s.stageLabel(stageRaw{transfer: true, id: from, name: strconv.FormatInt(to, 10)}), PhaseTransfer), rank{srank, 0})
			stage = k
		default:
			stageName := single
			if stage >= 0 {
				stageName = s.keys[stage].Stage
			}
			k = s.intern(key(stageName, phaseOf(c)), rank{srank, phaseRank(c)})
		}
		if k < 0 {
			continue // beyond the keys kept: counted
		}
		s.nodeInfo[n] = nodeInfo{key: k, stage: stage}
		if !lengthUnmeasured(c) {
			s.note(k, c)
			s.covered = append(s.covered, clip(c, sp))
		}
		for _, cc := range n.Children {
			s.stack = append(s.stack, item{cc, stage, srank})
		}
	}
	for _, id := range s.touched {
		s.add(s.rows, 0, id, ms(union(s.ivs[id])))
	}
	length := sp.Duration()
	s.add(s.rows, 0, unatt, ms(length-union(s.covered)))

	// The critical path: each segment to its span's row and, within a
	// stage or hand-over, to the stage's.
	gs.length += ms(length)
	s.onTouched = s.onTouched[:0]
	hold := func(id int32, d time.Duration) {
		if id < 0 {
			return
		}
		if !s.onSet[id] {
			s.onSet[id] = true
			s.onPath[id] = 0
			s.onTouched = append(s.onTouched, id)
		}
		s.onPath[id] += d
	}
	for _, seg := range s.path.Path(req) {
		info, ok := s.nodeInfo[seg.Node]
		if !ok {
			// A span elsewhere in the trace, reached through a link.
			info = nodeInfo{key: s.intern(key("linked", display(seg.Node.Span.Name)), rank{1 << 22, 0}), stage: -1}
		}
		k := info.key
		if k >= 0 && info.stage == k {
			k = s.self(k)
		}
		hold(k, seg.Duration())
		if info.stage >= 0 {
			hold(info.stage, seg.Duration())
		}
	}
	// Each row measured in the request (and each on its path) has a
	// share of it, 0 when off the path.
	hold(unatt, 0)
	for _, id := range s.touched {
		if p := s.keys[id].Phase; p == PhaseRequest {
			continue
		} else if p == PhaseStage || p == PhaseTransfer {
			hold(s.self(id), 0)
		}
		hold(id, 0)
	}
	for _, id := range s.onTouched {
		s.onSet[id] = false
		if length <= 0 {
			continue // no share of nothing
		}
		if cr := s.add(s.crit, 1, id, float64(s.onPath[id])/float64(length)); cr != nil {
			cr.onPath += ms(s.onPath[id])
		}
	}
}

// self returns the key of the own time of the stage or hand-over id.
func (s *Side) self(id int32) int32 {
	k := s.keys[id]
	k.Phase = PhaseSelf
	return s.intern(k, rank{s.ranks[id].stage, 1})
}

// rawLabel is how much of a stage's type or name its label is made of:
// display reads at most maxLabel+1 characters of at most 4 bytes.
const rawLabel = 4 * (maxLabel + 2)

// stageLabel names a stage ("llm 0 thinker") or hand-over ("transfer
// 0->1"). The labels remembered keep copies of at most rawLabel bytes of
// the trace's strings, never the strings themselves: a side must not hold
// its input.
func (s *Side) stageLabel(r stageRaw) string {
	r.typ, r.name = r.typ[:min(len(r.typ), rawLabel)], r.name[:min(len(r.name), rawLabel)]
	if l, ok := s.labels[r]; ok {
		return l
	}
	r.typ, r.name = strings.Clone(r.typ), strings.Clone(r.name)
	var l string
	if r.transfer {
		l = fmt.Sprintf("transfer %d->%s", r.id, r.name)
	} else {
		l = fmt.Sprintf("%s %d", label(r.typ), r.id)
		if n := display(r.name); n != "" {
			l += " " + n
		}
	}
	if len(s.labels) >= maxLabels {
		clear(s.labels)
	}
	s.labels[r] = l
	return l
}

// note adds span c's interval to row id of the request.
func (s *Side) note(id int32, c *traceview.Span) {
	if id < 0 {
		return
	}
	if len(s.ivs[id]) == 0 {
		s.touched = append(s.touched, id)
	}
	s.ivs[id] = append(s.ivs[id], interval{c.Start, c.End})
}

// add adds one request's value to row id of table t (0 durations, 1 the
// critical path), and returns the row (nil beyond MaxRows).
func (s *Side) add(t []*row, table int, id int32, v float64) *row {
	if id < 0 {
		return nil
	}
	rw := t[id]
	if rw == nil {
		if s.nrows[table] >= s.set.MaxRows {
			s.hidden++
			return nil
		}
		s.nrows[table]++
		rw = &row{key: s.keys[id], rank: s.ranks[id], res: reservoir{max: s.set.Samples, seed: uint64(id) + 1}}
		t[id] = rw
	}
	rw.measured++
	rw.res.add(v)
	return rw
}
