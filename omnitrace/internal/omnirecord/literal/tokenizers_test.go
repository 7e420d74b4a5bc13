// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package literal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
	jsoniter "github.com/json-iterator/go"
	"github.com/valyala/fastjson"
)

// A JSON tokenizer an import could use instead of ParseJSON: it builds
// the same Value tree from a record, or fails. Each is driven the way its
// documentation gives for reading a document of unknown shape.
type tokenizer struct {
	name  string
	parse func([]byte) (Value, error)
}

var tokenizers = []tokenizer{
	{"omnitrace (ParseJSON)", func(b []byte) (Value, error) { return ParseJSON(b, MaxRecordValues) }},
	{"encoding/json Decoder.Token", stdTokens},
	{"json-iterator Iterator", iterTokens},
	{"valyala/fastjson Parser", fastTree},
	{"goccy/go-json Decoder", goccyAny},
}

// stdTokens reads the tokens of encoding/json's Decoder, numbers as their
// literal text (UseNumber), refusing a key written twice itself.
func stdTokens(b []byte) (Value, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var value func(depth int) (Value, error)
	value = func(depth int) (Value, error) {
		if depth > MaxDepth {
			return Value{}, errDepth
		}
		tok, err := d.Token()
		if err != nil {
			return Value{}, err
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '[' {
				v := Value{Kind: Array}
				for d.More() {
					item, err := value(depth + 1)
					if err != nil {
						return Value{}, err
					}
					v.Items = append(v.Items, item)
				}
				_, err := d.Token()
				return v, err
			}
			v := Value{Kind: Object}
			var ks keySet
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return Value{}, err
				}
				key := k.(string)
				if err := ks.add(v.Keys, key); err != nil {
					return Value{}, err
				}
				val, err := value(depth + 1)
				if err != nil {
					return Value{}, err
				}
				v.Keys, v.Vals = append(v.Keys, key), append(v.Vals, val)
			}
			_, err := d.Token()
			return v, err
		case json.Number:
			f, _ := ParseNumber(string(t))
			return Value{Kind: Number, Str: string(t), Num: f}, nil
		case string:
			return Value{Kind: String, Str: t}, nil
		case bool:
			return Value{Kind: Bool, Bool: t}, nil
		}
		return Value{Kind: Null}, nil
	}
	v, err := value(0)
	if err == nil {
		if _, err := d.Token(); err != io.EOF {
			return Value{}, errors.New("trailing data")
		}
	}
	return v, err
}

// iterTokens reads json-iterator's Iterator (an OpenTelemetry Collector
// dependency already, through pdata), refusing a key written twice
// itself.
func iterTokens(b []byte) (Value, error) {
	it := jsoniter.ConfigDefault.BorrowIterator(b)
	defer jsoniter.ConfigDefault.ReturnIterator(it)
	var value func(depth int) Value
	value = func(depth int) Value {
		if depth > MaxDepth {
			it.ReportError("value", errDepth.Error())
			return Value{}
		}
		switch it.WhatIsNext() {
		case jsoniter.ObjectValue:
			v := Value{Kind: Object}
			var ks keySet
			for k := it.ReadObject(); k != ""; k = it.ReadObject() {
				if err := ks.add(v.Keys, k); err != nil {
					it.ReportError("object", err.Error())
					return Value{}
				}
				v.Keys, v.Vals = append(v.Keys, k), append(v.Vals, value(depth+1))
			}
			return v
		case jsoniter.ArrayValue:
			v := Value{Kind: Array}
			for it.ReadArray() {
				v.Items = append(v.Items, value(depth+1))
			}
			return v
		case jsoniter.NumberValue:
			n := it.ReadNumber()
			f, _ := ParseNumber(string(n))
			return Value{Kind: Number, Str: string(n), Num: f}
		case jsoniter.StringValue:
			return Value{Kind: String, Str: it.ReadString()}
		case jsoniter.BoolValue:
			return Value{Kind: Bool, Bool: it.ReadBool()}
		case jsoniter.NilValue:
			it.ReadNil()
			return Value{Kind: Null}
		}
		it.ReportError("value", "not a JSON value")
		return Value{}
	}
	v := value(0)
	if it.Error != nil && it.Error != io.EOF {
		return Value{}, it.Error
	}
	return v, nil
}

var fastParsers fastjson.ParserPool

// fastTree parses with fastjson and converts its tree, refusing a key
// written twice itself.
func fastTree(b []byte) (Value, error) {
	p := fastParsers.Get()
	defer fastParsers.Put(p)
	root, err := p.ParseBytes(b)
	if err != nil {
		return Value{}, err
	}
	var conv func(v *fastjson.Value, depth int) (Value, error)
	conv = func(v *fastjson.Value, depth int) (Value, error) {
		if depth > MaxDepth {
			return Value{}, errDepth
		}
		switch v.Type() {
		case fastjson.TypeObject:
			out := Value{Kind: Object}
			var ks keySet
			var err error
			v.GetObject().Visit(func(k []byte, m *fastjson.Value) {
				if err != nil {
					return
				}
				key := string(k)
				if err = ks.add(out.Keys, key); err != nil {
					return
				}
				var mv Value
				mv, err = conv(m, depth+1)
				out.Keys, out.Vals = append(out.Keys, key), append(out.Vals, mv)
			})
			return out, err
		case fastjson.TypeArray:
			out := Value{Kind: Array}
			for _, e := range v.GetArray() {
				ev, err := conv(e, depth+1)
				if err != nil {
					return Value{}, err
				}
				out.Items = append(out.Items, ev)
			}
			return out, nil
		case fastjson.TypeNumber:
			lit := v.String()
			f, ok := ParseNumber(lit)
			if !ok {
				return Value{}, fmt.Errorf("invalid number %q", lit)
			}
			return Value{Kind: Number, Str: lit, Num: f}, nil
		case fastjson.TypeString:
			s, _ := v.StringBytes()
			return Value{Kind: String, Str: string(s)}, nil
		case fastjson.TypeTrue:
			return Value{Kind: Bool, Bool: true}, nil
		case fastjson.TypeFalse:
			return Value{Kind: Bool}, nil
		}
		return Value{Kind: Null}, nil
	}
	return conv(root, 0)
}

// goccyAny decodes into Go values with goccy/go-json, numbers as their
// literal text: an object becomes a map, which holds neither the keys'
// order nor a key written twice (the last is kept, silently).
func goccyAny(b []byte) (Value, error) {
	d := gojson.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return Value{}, err
	}
	var conv func(x any) Value
	conv = func(x any) Value {
		switch t := x.(type) {
		case map[string]any:
			v := Value{Kind: Object}
			for k, e := range t {
				v.Keys, v.Vals = append(v.Keys, k), append(v.Vals, conv(e))
			}
			return v
		case []any:
			v := Value{Kind: Array}
			for _, e := range t {
				v.Items = append(v.Items, conv(e))
			}
			return v
		case gojson.Number:
			f, _ := ParseNumber(string(t))
			return Value{Kind: Number, Str: string(t), Num: f}
		case string:
			return Value{Kind: String, Str: t}
		case bool:
			return Value{Kind: Bool, Bool: t}
		}
		return Value{Kind: Null}
	}
	return conv(x), nil
}

// pythonsJSON is what Python's json module writes that a record reader
// must read: a float it cannot represent in JSON, as NaN, Infinity or
// -Infinity (json.dumps' default), which the import then reports as the
// one field that is no duration, keeping the rest of the record.
var pythonsJSON = []string{
	`{"stage_gen_time_ms": NaN, "e2e_total_ms": 12.5}`,
	`{"stage_gen_time_ms": Infinity, "e2e_total_ms": 12.5}`,
	`{"stage_gen_time_ms": -Infinity, "e2e_total_ms": 12.5}`,
}

// twice holds a key twice, which a reader must refuse (no "last one
// wins"): two values of one field cannot both be the measurement.
const twice = `{"request_id": "a", "request_id": "b"}`

// TestNoWellKeptTokenizerReadsPythonsJSON: every well-kept tokenizer
// compared here refuses the NaN, Infinity or -Infinity of Python's json
// module (so one such field would cost its whole record, or a whole
// summary dict), or reads a key written twice as one; ParseJSON reads the
// first and refuses the second. Should a tokenizer come to do both, this
// test fails, and ParseJSON should give way to it.
func TestNoWellKeptTokenizerReadsPythonsJSON(t *testing.T) {
	for _, tk := range tokenizers {
		var refused []string
		for _, doc := range pythonsJSON {
			v, err := tk.parse([]byte(doc))
			if err != nil {
				refused = append(refused, doc)
				continue
			}
			if f, ok := v.Get("stage_gen_time_ms"); !ok || f.Kind != Number || f.Finite() {
				refused = append(refused, doc+" (misread)")
			}
		}
		_, err := tk.parse([]byte(twice))
		keptTwice := err == nil
		meets := len(refused) == 0 && !keptTwice
		if tk.name == tokenizers[0].name {
			if !meets {
				t.Errorf("%s: refuses %q, reads a key twice: %v", tk.name, refused, keptTwice)
			}
			continue
		}
		if meets {
			t.Errorf("%s reads Python's JSON and refuses a key written twice: use it", tk.name)
		}
		t.Logf("%s: refuses %d of %d of Python's floats %q; takes a key written twice: %v", tk.name, len(refused), len(pythonsJSON), refused, keptTwice)
	}
}

// TestTokenizersBuildTheSameTree: on standard JSON, each tokenizer builds
// the tree ParseJSON builds (goccy/go-json aside: its maps lose the keys'
// order), so that the benchmark compares like with like.
func TestTokenizersBuildTheSameTree(t *testing.T) {
	for _, doc := range [][]byte{[]byte(benchRecord), []byte(benchSummaryEntry)} {
		want, err := ParseJSON(doc, MaxRecordValues)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tokenizers[1:] {
			got, err := tk.parse(doc)
			if err != nil {
				t.Errorf("%s: %v", tk.name, err)
				continue
			}
			if strings.HasPrefix(tk.name, "goccy") {
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s builds another tree:\n%v\nwant\n%v", tk.name, got, want)
			}
		}
	}
}

// benchRecord is a record of this project's JSON lines, as importbench
// writes them (about 470 bytes).
const benchRecord = `{"request_id": "chatcmpl-000000000000002a", "model": "Qwen/Qwen-Image", "arrival_time": 1796000000.125000, "modality": "image", "num_inference_steps": 50, "stages": [{"stage_id": 0, "stage_name": "dit", "stage_type": "diffusion", "submit_time": 1796000000.127000, "stage_gen_time_ms": 2310.5, "diffusion_metrics": {"scheduler_queue_wait_ms": 1, "preprocess_time_ms": 4.25, "diffusion_engine_exec_time_ms": 2100.0, "forward_time_ms": 1900.5, "postprocess_time_ms": 45.2}}]}`

// benchSummaryEntry is one request's entry of a summary's stage table.
const benchSummaryEntry = `{"request_id": "7", "stages": [{"stage_id": 0, "stage": "0:thinker", "batch_id": 3, "num_tokens_in": 31, "num_tokens_out": 120, "stage_gen_time_ms": 812.25}, {"stage_id": 1, "stage": "1:dit", "stage_gen_time_ms": 2410.5, "preprocess_time_ms": 0, "diffusion_engine_exec_time_ms": 2301, "scheduler_queue_wait_ms": 0, "kv_recv_time_ms": 12, "forward_time_ms": 2105, "vae_decode_time_ms": 150, "output_ready_wait_time_ms": 0, "postprocess_time_ms": 41}]}`

// BenchmarkJSONTokenizers builds the tree of a record with each
// tokenizer: `go test -run '^$' -bench JSONTokenizers -benchmem
// ./omnitrace/internal/omnirecord/literal` (and, for encoding/json/jsontext,
// GOEXPERIMENT=jsonv2 with the same command).
func BenchmarkJSONTokenizers(b *testing.B) {
	for _, tk := range tokenizers {
		b.Run(tk.name, func(b *testing.B) {
			doc := []byte(benchRecord)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tk.parse(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
