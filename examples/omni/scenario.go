// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/otelomni/otelomni/examples/omni/pipeline"
	"github.com/otelomni/otelomni/otelomni"
)

// A mixed run shows what a tail-sampling collector keeps (docs/fleet.md):
// -mix makes some requests slow, saturated or failing on purpose.
var (
	mixFlag = flag.String("mix", "",
		"a repeating cycle of scenarios, such as normal=7,slow=1,saturated=1,failing=1; "+
			"requests that fail on purpose are not counted as failed")
	slowFlag  = flag.Duration("slow", 3*time.Second, "with -mix: the extra decode time of a slow request")
	queueFlag = flag.Duration("queue-wait", 3*time.Second, "with -mix: the queue wait of a saturated request")
)

// mix is the parsed -mix; nil without it.
var mix pipeline.Mix

func parseScenario() error {
	if *slowFlag < 0 || *queueFlag < 0 {
		return fmt.Errorf("-slow and -queue-wait must not be negative")
	}
	if *mixFlag == "" {
		return nil
	}
	var err error
	mix, err = pipeline.ParseMix(*mixFlag)
	return err
}

// plan is pipeline.Plan, or the -mix cycle's plan.
func plan(i int) (string, pipeline.Special) {
	if mix != nil {
		return mix.Plan(i)
	}
	return pipeline.Plan(i)
}

// scenarioArgs passes the scenario's durations on to a stage process.
func scenarioArgs() []string {
	return []string{"-slow", slowFlag.String(), "-queue-wait", queueFlag.String()}
}

// failedOnPurpose reports whether a request's failure was planned.
func failedOnPurpose(special pipeline.Special) bool { return special == pipeline.Failing }

// holdPoint is where a scenario makes a stage take longer.
type holdPoint int

const (
	atQueue  holdPoint = iota // while the request waits in the stage's queue
	atDecode                  // while an LLM stage decodes
)

// hold sleeps the extra time m's scenario puts at this stage and point: a
// slow request decodes longer at the first stage, a saturated one waits
// longer in the second stage's queue.
func (s *stageServer) hold(m pipeline.Message, at holdPoint) {
	switch {
	case m.Special == pipeline.Slow && at == atDecode && s.st.ID == 0:
		time.Sleep(*slowFlag)
	case m.Special == pipeline.Saturated && at == atQueue && s.st.ID == 1:
		time.Sleep(*queueFlag)
	}
}

// fail ends a failing request's last stage with an engine error before it
// does any work, and tells the gateway. It reports whether it did.
func (s *stageServer) fail(st *otelomni.Request, m pipeline.Message) bool {
	if m.Special != pipeline.Failing || !s.last {
		return false
	}
	const msg = "simulated engine failure (-mix)"
	st.End(fmt.Errorf("%w: %s", otelomni.ErrStageError, msg))
	_ = s.out.send(pipeline.Message{Type: "error", ID: m.ID, Error: msg})
	return true
}
