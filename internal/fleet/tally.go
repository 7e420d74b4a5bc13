package fleet

import (
	"context"
)

// The collector's own metrics (Prometheus names) that account for every
// trace and span it handled.
const (
	metricPolicy     = "otelcol_processor_tail_sampling_count_traces_sampled_total"
	metricDecision   = "otelcol_processor_tail_sampling_global_count_traces_sampled_total"
	metricNewTraces  = "otelcol_processor_tail_sampling_new_trace_id_received_total"
	metricTooEarly   = "otelcol_processor_tail_sampling_sampling_trace_dropped_too_early_total"
	metricLate       = "otelcol_processor_tail_sampling_early_releases_from_cache_decision_total"
	metricAccepted   = "otelcol_receiver_accepted_spans_total"
	metricRefused    = "otelcol_receiver_refused_spans_total"
	metricSent       = "otelcol_exporter_sent_spans_total"
	metricSendFailed = "otelcol_exporter_send_failed_spans_total"
)

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
	t := Tally{
		NewTraces:    int(m.Sum(metricNewTraces, nil)),
		Kept:         int(m.Sum(metricDecision, yes)),
		Dropped:      int(m.Sum(metricDecision, no)),
		Matched:      map[string]int{},
		TooEarly:     int(m.Sum(metricTooEarly, nil)),
		LateKept:     int(m.Sum(metricLate, yes)),
		LateDropped:  int(m.Sum(metricLate, no)),
		SpansIn:      int(m.Sum(metricAccepted, nil)),
		SpansRefused: int(m.Sum(metricRefused, nil)),
		SpansOut:     int(m.Sum(metricSent, map[string]string{"exporter": "otlp/backend"})),
		SpansFailed:  int(m.Sum(metricSendFailed, map[string]string{"exporter": "otlp/backend"})),
	}
	for policy, n := range m.Values(metricPolicy, "policy", yes) {
		t.Matched[policy] = int(n)
	}
	return t, nil
}
