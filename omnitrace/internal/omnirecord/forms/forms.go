// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"errors"
	"fmt"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/literal"
)

// The forms vLLM-Omni writes per request, mapped onto builders. Field
// names are facts of its code (vllm_omni/metrics/stats.py and, in older
// releases, vllm_omni/entrypoints/log_utils.py); how each 0 is read is in
// rows.go.

// SummaryRequest is one request's rows in a summary dict.
type SummaryRequest struct {
	ID                string
	stages, transfers []literal.Value
	e2e               *literal.Value
}

// ErrNotSummary: a document that is not a summary dict.
var ErrNotSummary = errors.New("not a summary dict (no stage_table, trans_table or e2e_table)")

// SummaryRows groups a summary dict's tables by request, in the order
// requests first appear. An entry without a usable request_id, and a
// second entry of one request in one table (its writer writes one), are
// skipped and reported through bad.
func SummaryRows(doc *literal.Value, bad func(error)) ([]SummaryRequest, error) {
	if doc.Kind != literal.Object {
		return nil, ErrNotSummary
	}
	byID := map[string]int{}
	var out []SummaryRequest
	get := func(id string) *SummaryRequest {
		i, ok := byID[id]
		if !ok {
			i = len(out)
			byID[id] = i
			out = append(out, SummaryRequest{ID: id})
		}
		return &out[i]
	}
	found := false
	for _, t := range []struct{ table, rows string }{{"stage_table", "stages"}, {"trans_table", "transfers"}, {"e2e_table", ""}} {
		tv, ok := doc.Get(t.table)
		if !ok {
			continue
		}
		found = true
		if tv.Kind != literal.Array {
			return nil, fmt.Errorf("%w: %s is not a list", ErrBadField, t.table)
		}
		seen := map[string]bool{}
		for i := range tv.Items {
			entry := &tv.Items[i]
			if entry.Kind != literal.Object {
				bad(fmt.Errorf("%w: %s entry %d is not an object", ErrBadField, t.table, i))
				continue
			}
			idv, _ := entry.Get("request_id")
			id, err := IDOf(idv, "request_id")
			if err != nil {
				bad(fmt.Errorf("%s entry %d: %w", t.table, i, err))
				continue
			}
			if seen[id] {
				bad(fmt.Errorf("%s: a second entry of request %q", t.table, literal.Clip(id)))
				continue
			}
			seen[id] = true
			sr := get(id)
			if t.rows == "" {
				sr.e2e = entry
				continue
			}
			rows, ok := entry.Get(t.rows)
			if !ok || rows.Kind != literal.Array {
				continue
			}
			if t.rows == "stages" {
				sr.stages = append(sr.stages, rows.Items...)
			} else {
				sr.transfers = append(sr.transfers, rows.Items...)
			}
		}
	}
	if !found {
		return nil, ErrNotSummary
	}
	return out, nil
}

// Build makes the request of one summary entry.
func (sr *SummaryRequest) Build(source, run string) *Builder {
	b := NewBuilder(sr.ID, source, run)
	sr.ApplyTo(b)
	return b
}

// ApplyTo reads the entry onto b.
func (sr *SummaryRequest) ApplyTo(b *Builder) {
	for _, rows := range [][]literal.Value{sr.stages, sr.transfers} {
		for i := range rows {
			b.Mix(string(appendJSON(nil, &rows[i], 1<<16)))
		}
	}
	if sr.e2e != nil {
		b.Mix(string(appendJSON(nil, sr.e2e, 1<<16)))
	}
	applySummaryRows(b, sr.stages, sr.transfers, sr.e2e)
}
