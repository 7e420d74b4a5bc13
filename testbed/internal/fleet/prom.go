// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Sample is one line of the Prometheus text format: a series and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics are the samples of one scrape.
type Metrics []Sample

// Sum adds up the samples named name whose labels include every pair in
// match.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var sum float64
	for _, s := range m {
		if s.Name == name && hasLabels(s.Labels, match) {
			sum += s.Value
		}
	}
	return sum
}

// Values returns, for the samples named name that match, their sum per
// value of the label key.
func (m Metrics) Values(name, key string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.Name == name && hasLabels(s.Labels, match) {
			out[s.Labels[key]] += s.Value
		}
	}
	return out
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// maxScrape bounds a scrape's size.
const maxScrape = 64 << 20

// Scrape reads a Prometheus endpoint (http://host:port/metrics).
func Scrape(ctx context.Context, url string) (Metrics, error) {
	body, err := get(ctx, url, maxScrape)
	if err != nil {
		return nil, err
	}
	return parseMetrics(bytes.NewReader(body))
}

// get reads at most limit bytes of url's answer, which must be 200 OK.
func get(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit))
}

// parseMetrics reads the Prometheus text format: comments are skipped, a
// line is `name{label="value",...} value [timestamp]`.
func parseMetrics(r io.Reader) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name, line = line[:end], line[end:]
	if line[0] == '{' {
		var err error
		if line, err = parseLabels(line[1:], s.Labels); err != nil {
			return s, err
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value")
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `a="x",b="y"}` into labels and returns what follows.
func parseLabels(line string, labels map[string]string) (string, error) {
	for {
		line = strings.TrimLeft(line, ", ")
		if strings.HasPrefix(line, "}") {
			return line[1:], nil
		}
		eq := strings.Index(line, `="`)
		if eq <= 0 {
			return "", fmt.Errorf("bad labels")
		}
		key := line[:eq]
		line = line[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) {
				i++
				switch line[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(line[i])
				}
				continue
			}
			val.WriteByte(line[i])
		}
		if i == len(line) {
			return "", fmt.Errorf("unterminated label value")
		}
		labels[key] = val.String()
		line = line[i+1:]
	}
}
