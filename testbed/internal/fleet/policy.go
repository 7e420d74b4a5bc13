// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"strconv"
	"time"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/examples/omni/pipeline"
)

// Policies are the collector's thresholds, read from the OMNI_* settings it
// was started with, to tell which policy a kept trace matched.
type Policies struct {
	// Slow is the request duration above which a trace is kept, per
	// modality ("" for any other); Queue is the queue-wait budget.
	Slow  map[string]time.Duration
	Queue time.Duration
	// Percent is the baseline share of the other traces, in percent.
	Percent float64
}

// ParsePolicies reads the thresholds from collector settings; every one
// must be set, so that a test never depends on the file's defaults by
// accident.
func ParsePolicies(settings map[string]string) (Policies, error) {
	ms := func(key string) (time.Duration, error) {
		n, err := strconv.Atoi(settings[key])
		if err != nil || n < 0 {
			return 0, fmt.Errorf("setting %s=%q: want milliseconds", key, settings[key])
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	p := Policies{Slow: map[string]time.Duration{}}
	for key, modality := range map[string]string{
		"OMNI_SLOW_IMAGE_MS": attrs.ModalityImage, "OMNI_SLOW_VIDEO_MS": attrs.ModalityVideo,
		"OMNI_SLOW_AUDIO_MS": attrs.ModalityAudio, "OMNI_SLOW_OTHER_MS": "",
	} {
		d, err := ms(key)
		if err != nil {
			return p, err
		}
		p.Slow[modality] = d
	}
	var err error
	if p.Queue, err = ms("OMNI_QUEUE_BUDGET_MS"); err != nil {
		return p, err
	}
	p.Percent, err = strconv.ParseFloat(settings["OMNI_SAMPLE_PERCENT"], 64)
	if err != nil || p.Percent < 0 || p.Percent > 100 {
		return p, fmt.Errorf("setting OMNI_SAMPLE_PERCENT=%q: want a percentage", settings["OMNI_SAMPLE_PERCENT"])
	}
	return p, nil
}

// Rule names the policy that keeps a kept request whatever the baseline
// share: "error", "slow-<modality>" or "saturated" (the collector's policy
// names), or "" when only the baseline share can have kept it.
func (p Policies) Rule(o *Outcome) string {
	mod := pipeline.Modality(o.Pipeline)
	slow, ok := p.Slow[mod]
	if !ok {
		slow, mod = p.Slow[""], "other"
	}
	switch {
	case o.Failed:
		return "error"
	case o.Duration > slow:
		return "slow-" + mod
	case o.Queue > p.Queue:
		return "saturated"
	}
	return ""
}

// DemoSettings are collector settings under which the multi-stage
// example's requests cross the thresholds on purpose: its normal requests
// last well under a second, so a slow one that decodes 4 s longer is slow
// for every modality and a saturated one that waits 1.5 s in a queue is
// over the budget. A trace is decided 5 s after its request span arrives:
// the replicas' 200 ms batch delay many times over, so that a machine
// whose cores are busy still decides on whole traces; one whose request
// span has not come 5 minutes after its first span is decided without it.
// Tables sized for a small run.
func DemoSettings() map[string]string {
	return map[string]string{
		"OMNI_DECISION_WAIT":           "5s",
		"OMNI_DECISION_WAIT_MAX":       "5m",
		"OMNI_SLOW_IMAGE_MS":           "2500",
		"OMNI_SLOW_VIDEO_MS":           "60000",
		"OMNI_SLOW_AUDIO_MS":           "3000",
		"OMNI_SLOW_OTHER_MS":           "3000",
		"OMNI_QUEUE_BUDGET_MS":         "1000",
		"OMNI_SAMPLE_PERCENT":          "10",
		"OMNI_NUM_TRACES":              "20000",
		"OMNI_EXPECTED_TRACES_PER_SEC": "100",
		"OMNI_DECISION_CACHE":          "200000",
		"OMNI_SPANMETRICS_FLUSH":       "1s",
	}
}

// DemoSlow and DemoQueueWait are the example's -slow and -queue-wait under
// [DemoSettings]: past every slow threshold, past the queue budget.
const (
	DemoSlow      = 4 * time.Second
	DemoQueueWait = 1500 * time.Millisecond
)
