// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package literal

import (
	"errors"
	"math"
	"strconv"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// Value is one parsed value of an input record: what a JSON line, a JSON
// document or a Python literal in a log holds. Both parsers build the same
// tree, so that one reader maps a summary or an event to requests whatever
// its notation.
type Value struct {
	Kind Kind
	// Str is a string's text; for a number, its literal text exactly as
	// written (an id written as a number is never parsed).
	Str string
	// Num is a number's value (NaN and ±Inf when written so); Bool a
	// boolean's.
	Num  float64
	Bool bool
	// Items are an array's (or tuple's) values; Keys and Vals an object's
	// members, in input order. An object never holds one key twice.
	Items []Value
	Keys  []string
	Vals  []Value
}

// Kind is the kind of a [Value].
type Kind uint8

// The kinds of value.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

// Get returns the member key of an object.
func (v *Value) Get(key string) (*Value, bool) {
	for i, k := range v.Keys {
		if k == key {
			return &v.Vals[i], true
		}
	}
	return nil, false
}

// Finite reports whether v is a finite number.
func (v *Value) Finite() bool {
	return v.Kind == Number && !math.IsNaN(v.Num) && !math.IsInf(v.Num, 0)
}

// Limits of what one record may hold, so that the work per record is
// bounded whatever its content.
const (
	// MaxDepth bounds nesting.
	MaxDepth = 32
	// MaxRecordValues bounds the values of one record line (each array
	// item, member and scalar counts one): a request of 100 stages of 30
	// keys fits.
	MaxRecordValues = 1 << 12
)

// Parse errors.
var (
	errDepth     = errors.New("nested deeper than 32 levels")
	errTooMany   = errors.New("too many values")
	ErrDuplicate = errors.New("a key appears twice in one object")
)

// ParseNumber reads a number's literal; NaN, Infinity and -Infinity are
// the words Python's json module writes, and nan and inf those of its repr.
func ParseNumber(lit string) (float64, bool) {
	switch lit {
	case "NaN", "nan":
		return math.NaN(), true
	case "Infinity", "inf":
		return math.Inf(1), true
	case "-Infinity", "-inf":
		return math.Inf(-1), true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return f, true // ±Inf or 0: out of any duration's range anyway
		}
		return 0, false
	}
	return f, true
}

func nan() float64         { return math.NaN() }
func inf(sign int) float64 { return math.Inf(sign) }

// Clip bounds a key or value of an input quoted in an error message.
func Clip(s string) string { return sanitize.String(s, 64) }
