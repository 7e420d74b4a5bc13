// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipeline describes the two simulated multi-stage pipelines of the
// omni example, the messages their stage processes exchange, and the spans
// each request must make (what the end-to-end test checks).
package pipeline

import (
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/otelomni/otelomni/attrs"
	"github.com/otelomni/otelomni/spans"
)

// Stage is one stage of a pipeline.
type Stage struct {
	ID    int
	Name  string
	Type  string
	Model string
	// Connector carries this stage's output to the next stage.
	Connector string
}

// Pipelines are the example's pipelines, by name.
var Pipelines = map[string][]Stage{
	// Speech: thinker -> talker -> code2wav, audio streamed in chunks.
	"speech": {
		{ID: 0, Name: "thinker", Type: attrs.StageLLM, Model: "Qwen/Qwen2.5-Omni-7B", Connector: "shm"},
		{ID: 1, Name: "talker", Type: attrs.StageLLM, Model: "Qwen/Qwen2.5-Omni-7B-talker", Connector: "shm"},
		{ID: 2, Name: "code2wav", Type: attrs.StageOther, Model: "Qwen/Qwen2.5-Omni-7B-token2wav"},
	},
	// Image: an autoregressive LLM stage hands its KV cache to a diffusion
	// stage.
	"image": {
		{ID: 0, Name: "ar", Type: attrs.StageLLM, Model: "ByteDance-Seed/BAGEL-7B-MoT", Connector: "mooncake"},
		{ID: 1, Name: "dit", Type: attrs.StageDiffusion, Model: "ByteDance-Seed/BAGEL-7B-MoT"},
	},
}

// Message is what the processes exchange, one JSON object per line.
type Message struct {
	// Type is "request" (gateway to stage), "result" (stage to gateway),
	// "spans" (a stage's spans, in the embedded mode) or "error".
	Type     string `json:"type"`
	ID       string `json:"id,omitempty"`
	Pipeline string `json:"pipeline,omitempty"`
	// Trace carries the request span's context to the next stage.
	Trace propagation.MapCarrier `json:"trace,omitempty"`
	// Transfer describes the hand-over from the previous stage.
	Transfer *Transfer `json:"transfer,omitempty"`
	Special  Special   `json:"special,omitempty"`
	Chunks   int       `json:"chunks,omitempty"`
	Error    string    `json:"error,omitempty"`
	// OTLP holds spans as OTLP/JSON ("spans" messages).
	OTLP json.RawMessage `json:"otlp,omitempty"`
}

// Transfer is what a sending stage says of a hand-over in the message it
// sends: who sent it, how, how big, and its own wall-clock times of
// sending, so that the receiving stage records the whole transfer.
type Transfer struct {
	FromStage int    `json:"from_stage"`
	Connector string `json:"connector,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	// TxStart and TxEnd are Unix nanoseconds on the sender's wall clock;
	// 0 when not measured (a connector that reports no send times).
	TxStart int64 `json:"tx_start_unix_nano,omitempty"`
	TxEnd   int64 `json:"tx_end_unix_nano,omitempty"`
}

// Record is the transfer as stage to received it: the sender's send
// (tx), the time in flight from the end of sending to rxStart (computed
// across two hosts' clocks), and the receipt and decoding from rxStart to
// rxEnd. A part whose times were not measured is left unmeasured.
func (t Transfer) Record(to int, rxStart, rxEnd time.Time) spans.TransferRecord {
	rec := spans.TransferRecord{FromStage: t.FromStage, ToStage: to, Bytes: t.Bytes, Connector: t.Connector,
		RxDecode: spans.Between(rxStart, rxEnd)}
	if t.TxStart != 0 && t.TxEnd != 0 {
		rec.Tx = spans.Between(time.Unix(0, t.TxStart), time.Unix(0, t.TxEnd))
	}
	if t.TxEnd != 0 {
		rec.InFlight = spans.Between(time.Unix(0, t.TxEnd), rxStart)
	}
	return rec
}

// The spans of a hand-over and of an emitted chunk, as the trace names them.
const (
	transferSpan = "omni.transfer"
	outputSpan   = "omni.output"
)

// Special marks the requests that show a missing measurement.
type Special string

const (
	// NoQueuedEvent: the talker never sees the request's queued and
	// scheduled events, so only its decode is measured.
	NoQueuedEvent Special = "no-queued-event"
	// NoTxTimes: the connector reports no send times, so the transfer has
	// no tx and no in-flight part.
	NoTxTimes Special = "no-tx-times"
)

// Plan says, for request i of a run, which pipeline serves it and whether it
// is special: speech and image alternate; the second speech request has no
// queued event, the second image request no send times.
func Plan(i int) (string, Special) {
	if i%2 == 0 {
		if i == 2 {
			return "speech", NoQueuedEvent
		}
		return "speech", ""
	}
	if i == 3 {
		return "image", NoTxTimes
	}
	return "image", ""
}

// AudioChunks is how many chunks code2wav streams per request.
const AudioChunks = 5

// Expect returns how many spans of each name a request must make.
func Expect(pipeline string, special Special) map[string]int {
	want := map[string]int{spans.RequestSpanName: 1}
	stages := Pipelines[pipeline]
	want[spans.StageSpanName] = len(stages)
	want[transferSpan] = len(stages) - 1
	want["omni.transfer.tx"] = len(stages) - 1
	want["omni.transfer.in_flight"] = len(stages) - 1
	want["omni.transfer.rx_decode"] = len(stages) - 1
	llm := 0
	for _, s := range stages {
		if s.Type == attrs.StageLLM {
			llm++
		}
	}
	want["omni.llm.queue"] = llm
	want["omni.llm.prefill"] = llm
	want["omni.llm.decode"] = llm
	switch pipeline {
	case "speech":
		want[outputSpan] = AudioChunks
		if special == NoQueuedEvent {
			want["omni.llm.queue"]--
			want["omni.llm.prefill"]--
		}
	case "image":
		for _, p := range []spans.Phase{spans.QueueWait, spans.Exec, spans.KVRecv, spans.Forward, spans.VAEDecode, spans.Postprocess} {
			want[p.SpanName()] = 1
		}
		if special == NoTxTimes {
			want["omni.transfer.tx"]--
			want["omni.transfer.in_flight"]--
		}
	}
	return want
}
