//go:build goexperiment.jsonv2

// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package literal

import (
	"bytes"
	"encoding/json/jsontext"
	"io"
)

// Go 1.26 ships encoding/json/jsontext (the tokenizer of
// github.com/go-json-experiment/json) under GOEXPERIMENT=jsonv2 only; run
// the tokenizer tests and benchmark with it set to compare it too.
func init() {
	tokenizers = append(tokenizers, tokenizer{"encoding/json/jsontext Decoder", jsontextTokens})
}

// jsontextTokens reads jsontext's Decoder, which refuses a key written
// twice itself.
func jsontextTokens(b []byte) (Value, error) {
	d := jsontext.NewDecoder(bytes.NewReader(b))
	var value func(depth int) (Value, error)
	value = func(depth int) (Value, error) {
		if depth > MaxDepth {
			return Value{}, errDepth
		}
		tok, err := d.ReadToken()
		if err != nil {
			return Value{}, err
		}
		switch tok.Kind() {
		case '{':
			v := Value{Kind: Object}
			for d.PeekKind() != '}' {
				k, err := d.ReadToken()
				if err != nil {
					return Value{}, err
				}
				key := k.String() // the token is valid until the next read
				val, err := value(depth + 1)
				if err != nil {
					return Value{}, err
				}
				v.Keys, v.Vals = append(v.Keys, key), append(v.Vals, val)
			}
			_, err := d.ReadToken()
			return v, err
		case '[':
			v := Value{Kind: Array}
			for d.PeekKind() != ']' {
				item, err := value(depth + 1)
				if err != nil {
					return Value{}, err
				}
				v.Items = append(v.Items, item)
			}
			_, err := d.ReadToken()
			return v, err
		case '0':
			lit := tok.String()
			f, _ := ParseNumber(lit)
			return Value{Kind: Number, Str: lit, Num: f}, nil
		case '"':
			return Value{Kind: String, Str: tok.String()}, nil
		case 't':
			return Value{Kind: Bool, Bool: true}, nil
		case 'f':
			return Value{Kind: Bool}, nil
		}
		return Value{Kind: Null}, nil
	}
	v, err := value(0)
	if err == nil {
		if _, err := d.ReadToken(); err != io.EOF {
			return Value{}, err
		}
	}
	return v, err
}
