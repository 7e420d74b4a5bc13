// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
)

// The collector's own metrics (Prometheus names) that account for every
// trace and span it handled. Releases differ in whether a counter's name
// ends in _total: [counter] reads either.
const (
	metricPolicy     = "otelcol_processor_tail_sampling_count_traces_sampled"
	metricDecision   = "otelcol_processor_tail_sampling_global_count_traces_sampled"
	metricNewTraces  = "otelcol_processor_tail_sampling_new_trace_id_received"
	metricTooEarly   = "otelcol_processor_tail_sampling_sampling_trace_dropped_too_early"
	metricLate       = "otelcol_processor_tail_sampling_early_releases_from_cache_decision"
	metricAccepted   = "otelcol_receiver_accepted_spans"
	metricRefused    = "otelcol_receiver_refused_spans"
	metricSent       = "otelcol_exporter_sent_spans"
	metricSendFailed = "otelcol_exporter_send_failed_spans"
)

// counter is the sum of a counter's series that carry the labels in match,
// under its name with or without the _total suffix (a collector exposes
// one of the two).
func counter(m Metrics, name string, match map[string]string) int {
	return int(m.Sum(name, match) + m.Sum(name+"_total", match))
}

// backendExporter is the collector's exporter to the backend, as its
// metrics label it.
const backendExporter = "otlp_grpc/backend"

// Tally is what the collector counted so far: its tail-sampling decisions
// and the spans it received and sent on.
type Tally struct {
	// NewTraces is how many traces it saw; Kept and Dropped how many it
	// decided (a trace still waiting for its decision is in neither).
	NewTraces, Kept, Dropped int
	// Matched is, per policy, how many traces that policy alone would have
	// kept: a trace can match several.
	Matched map[string]int
	// TooEarly counts traces evicted before their decision (num_traces too
	// small for the traffic).
	TooEarly int
	// LateKept and LateDropped count spans that arrived after their trace's
	// decision and followed it.
	LateKept, LateDropped int
	// SpansIn and SpansRefused count spans the receiver accepted and
	// refused (memory_limiter); SpansOut and SpansFailed count spans the
	// backend exporter sent and failed to send.
	SpansIn, SpansRefused, SpansOut, SpansFailed int
}

// Decided reports whether every trace seen has had its decision, or was
// evicted before it could have one.
func (t Tally) Decided() bool { return t.Kept+t.Dropped+t.TooEarly == t.NewTraces }

// Tally reads the collector's own metrics.
func (c *Collector) Tally(ctx context.Context) (Tally, error) {
	m, err := Scrape(ctx, "http://"+c.Telemetry+"/metrics")
	if err != nil {
		return Tally{}, err
	}
	yes, no := map[string]string{"sampled": "true"}, map[string]string{"sampled": "false"}
	backend := map[string]string{"exporter": backendExporter}
	t := Tally{
		NewTraces:    counter(m, metricNewTraces, nil),
		Kept:         counter(m, metricDecision, yes),
		Dropped:      counter(m, metricDecision, no),
		Matched:      map[string]int{},
		TooEarly:     counter(m, metricTooEarly, nil),
		LateKept:     counter(m, metricLate, yes),
		LateDropped:  counter(m, metricLate, no),
		SpansIn:      counter(m, metricAccepted, nil),
		SpansRefused: counter(m, metricRefused, nil),
		SpansOut:     counter(m, metricSent, backend),
		SpansFailed:  counter(m, metricSendFailed, backend),
	}
	for _, name := range []string{metricPolicy, metricPolicy + "_total"} {
		for policy, n := range m.Values(name, "policy", yes) {
			t.Matched[policy] += int(n)
		}
	}
	return t, nil
}
