package omnirecord

import (
	"encoding/json"
	"testing"
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
		if _, err := Parse(benchLine); err != nil {
			b.Fatal(err)
		}
	}
}
