// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// PrometheusBinary returns the path of the prometheus server (Debian's
// package, `make prometheus-bin`), or an error saying how to install it.
func PrometheusBinary() (string, error) {
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", errors.New("no prometheus on PATH: run `make prometheus-bin` (apt-get install -y prometheus)")
	}
	return p, nil
}

// Prometheus is a Prometheus server on loopback that scrapes one target
// every second, with exemplar storage on.
type Prometheus struct {
	*process
	// Addr is its HTTP API's address.
	Addr string
}

// StartPrometheus starts bin scraping the targets (host:port, OpenMetrics)
// into a folder of dir, and waits until it is ready.
func StartPrometheus(ctx context.Context, bin, dir string, targets ...string) (*Prometheus, error) {
	config := filepath.Join(dir, "prometheus.yml")
	body := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: otelomni-collector
    honor_labels: true
    static_configs:
      - targets: [%s]
`, quoted(targets))
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return nil, err
	}
	var p *Prometheus
	err := onFreeAddrs(1, func(a []string) error {
		p = &Prometheus{Addr: a[0]}
		var err error
		p.process, err = startCommand(ctx, "prometheus", bin, []string{
			"--config.file=" + config,
			"--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
			"--web.listen-address=" + a[0],
			"--enable-feature=exemplar-storage",
		}, dir, nil, "http://"+a[0]+"/-/ready")
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Exemplar is one exemplar Prometheus returned: the series it is attached
// to, and its labels (trace_id and span_id) and value.
type Exemplar struct {
	Series map[string]string
	Labels map[string]string
	Value  float64
}

// maxAnswer bounds an answer of the HTTP API.
const maxAnswer = 64 << 20

// QueryExemplars returns the exemplars of the series query selects,
// between from and to.
func (p *Prometheus) QueryExemplars(ctx context.Context, query string, from, to time.Time) ([]Exemplar, error) {
	var res []struct {
		SeriesLabels map[string]string `json:"seriesLabels"`
		Exemplars    []struct {
			Labels map[string]string `json:"labels"`
			Value  string            `json:"value"`
		} `json:"exemplars"`
	}
	if err := p.api(ctx, "query_exemplars", url.Values{"query": {query}, "start": {unix(from)}, "end": {unix(to)}}, &res); err != nil {
		return nil, err
	}
	var out []Exemplar
	for _, s := range res {
		for _, e := range s.Exemplars {
			v, err := strconv.ParseFloat(e.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("exemplar value %q: %w", e.Value, err)
			}
			out = append(out, Exemplar{Series: s.SeriesLabels, Labels: e.Labels, Value: v})
		}
	}
	return out, nil
}

// PromSample is one series of an instant query's answer.
type PromSample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant query and returns its vector.
func (p *Prometheus) Query(ctx context.Context, query string) ([]PromSample, error) {
	var res struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.api(ctx, "query", url.Values{"query": {query}}, &res); err != nil {
		return nil, err
	}
	if res.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, want a vector", query, res.ResultType)
	}
	var out []PromSample
	for _, r := range res.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %q: %w", query, s, err)
		}
		out = append(out, PromSample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// PromSeries is one series of a range query's answer: its labels and the
// values at each step, NaN included.
type PromSeries struct {
	Labels map[string]string
	Values []float64
}

// QueryRange runs a range query from start to end, one point per step, as
// a dashboard panel does, and returns its matrix.
func (p *Prometheus) QueryRange(ctx context.Context, query string, start, end time.Time, step time.Duration) ([]PromSeries, error) {
	var res struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	q := url.Values{"query": {query}, "start": {unix(start)}, "end": {unix(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	if err := p.api(ctx, "query_range", q, &res); err != nil {
		return nil, err
	}
	if res.ResultType != "matrix" {
		return nil, fmt.Errorf("%s: a %s, want a matrix", query, res.ResultType)
	}
	var out []PromSeries
	for _, r := range res.Result {
		s := PromSeries{Labels: r.Metric}
		for _, v := range r.Values {
			str, _ := v[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q: %w", query, str, err)
			}
			s.Values = append(s.Values, f)
		}
		out = append(out, s)
	}
	return out, nil
}

// LabelValues returns the values of label on the series match selects
// between start and end, as a dashboard's label_values(match, label)
// variable lists them.
func (p *Prometheus) LabelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error) {
	var out []string
	q := url.Values{"match[]": {match}, "start": {unix(start)}, "end": {unix(end)}}
	if err := p.api(ctx, "label/"+url.PathEscape(label)+"/values", q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (p *Prometheus) api(ctx context.Context, path string, q url.Values, into any) error {
	b, err := get(ctx, "http://"+p.Addr+"/api/v1/"+path+"?"+q.Encode(), maxAnswer)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, into)
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64) }

func quoted(ss []string) string {
	var b []byte
	for i, s := range ss {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, s)
	}
	return string(b)
}
