// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package literal parses the literal text of the records an import reads
// into one tree of values ([Value]): JSON (ParseJSON), as this project's
// JSON lines and vLLM-Omni's summary dicts and stats files are written,
// and Python literals (ParsePython), as vLLM-Omni's logs print its dicts
// with pprint. Both keep a number's literal text as written (an id is
// never parsed), refuse an object that holds a key twice, and bound the
// values and the nesting of what they build: their work is linear in the
// text's length.
//
// Both are written here. No Go library parses Python literals (single
// quotes, True/False/None, tuples, integer dict keys, adjacent string
// literals). For JSON, BenchmarkJSONTokenizers and
// TestNoWellKeptTokenizerReadsPythonsJSON compare the well-kept
// tokenizers the Go module proxy serves (encoding/json's Decoder.Token,
// encoding/json/jsontext as Go 1.26 ships it under GOEXPERIMENT=jsonv2,
// json-iterator's Iterator, valyala/fastjson, goccy/go-json) with this
// parser: none reads all of the NaN, Infinity and -Infinity that Python's
// json module writes for a float it cannot represent (fastjson reads NaN
// alone), so that a summary holding one would be refused whole rather than
// its one field; goccy/go-json's maps keep the last of a key written
// twice; and each builds this tree at two to three times the time and
// seven to twelve times the allocations of this parser. docs/omnitrace.md
// quotes the figures.
package literal
