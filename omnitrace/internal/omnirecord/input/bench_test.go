// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package input

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelomni/otelomni/omnitrace/internal/omnirecord/forms"
)

// benchLine is a record of a typical size (about 470 bytes).
var benchLine = []byte(`{"request_id": "chatcmpl-ac59cea85b422f04", "model": "Qwen/Qwen-Image", "arrival_time": 1796000000.125, "modality": "image", "num_inference_steps": 50, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": 1796000000.127, "stage_gen_time_ms": 2310.5, "diffusion_metrics": {"scheduler_queue_wait_ms": 0, "preprocess_time_ms": 4.25, "diffusion_engine_exec_time_ms": 2100.0, "forward_time_ms": 1900.5, "postprocess_time_ms": 45.2}}]}`)

// BenchmarkBareDecode is the baseline: encoding/json into a map.
func BenchmarkBareDecode(b *testing.B) {
	b.SetBytes(int64(len(benchLine)))
	for i := 0; i < b.N; i++ {
		var m map[string]any
		if err := json.Unmarshal(benchLine, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.SetBytes(int64(len(benchLine)))
	for i := 0; i < b.N; i++ {
		if _, err := forms.Parse(benchLine); err != nil {
			b.Fatal(err)
		}
	}
}

// discard is a handler that keeps nothing.
type discard struct{}

func (discard) Request(*forms.Request, time.Time) {}
func (discard) Problem(int, error)                {}

// BenchmarkLogInput reads a vLLM log's request (its [OmniTiming] line and
// its table, as importbench writes them) per iteration, ids all distinct.
func BenchmarkLogInput(b *testing.B) {
	in, err := NewInput(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Options{}, discard{})
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(benchLog), "\n")
	var off int64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		id := "chatcmpl-" + strconv.Itoa(i)
		for _, l := range lines {
			l = strings.ReplaceAll(l, "ID", id)
			in.Line([]byte(l), off)
			off += int64(len(l)) + 1
		}
	}
	in.End()
}

const benchLog = `INFO 11-30 05:10:44 [serving_chat.py:1401] Finished request ID.
INFO 11-30 05:10:44 [omni.py:310] [OmniTiming] req=ID total=3.32s preprocess=0.00s engine=3.32s stages=[0:thinker=0.81s,1:dit=2.41s] transfers=[0->1=4.75ms]
INFO 11-30 05:10:44 [stats.py:560] [StageRequestStats [request_id=ID]]
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+
INFO 11-30 05:10:44 [stats.py:560] | Field                         | 0:thinker |     1:dit |
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+
INFO 11-30 05:10:44 [stats.py:560] | diffusion_engine_exec_time_ms |           |     2,301 |
INFO 11-30 05:10:44 [stats.py:560] | forward_time_ms               |           |     2,105 |
INFO 11-30 05:10:44 [stats.py:560] | num_tokens_out                |       120 |         0 |
INFO 11-30 05:10:44 [stats.py:560] | stage_gen_time_ms             |   812.250 | 2,410.500 |
INFO 11-30 05:10:44 [stats.py:560] +-------------------------------+-----------+-----------+
`
