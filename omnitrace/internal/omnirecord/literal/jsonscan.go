// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package literal

import (
	"fmt"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// BOM is the UTF-8 byte-order mark some editors put at a file's start.
const BOM = "\xef\xbb\xbf"

// ParseJSON parses one JSON value that fills b (white space aside; a
// leading byte-order mark is skipped). Beyond standard JSON it accepts the
// NaN, Infinity and -Infinity words that Python's json module writes, as
// numbers, so that they can be refused as durations with a clear reason.
// It refuses an object that holds a key twice (no "last one wins"), and
// bounds nesting and the number of values: its work is linear in len(b).
//
// It builds at most maxValues values (each array item, member and scalar
// counts one): MaxRecordValues for one record line.
func ParseJSON(b []byte, maxValues int) (Value, error) {
	// Strings are cut from one copy of the input: one allocation for all
	// the keys and values that need no unescaping.
	p := parsers.Get().(*jsonParser)
	defer func() {
		if cap(p.stack) <= 1<<12 {
			*p = jsonParser{stack: p.stack[:0], keys: p.keys[:0]}
			parsers.Put(p)
		}
	}()
	p.s, p.i, p.values, p.max = string(b), 0, 0, maxValues
	if len(b) >= 3 && string(b[:3]) == BOM {
		p.i = 3
	}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.space()
	if p.i < len(p.s) {
		return Value{}, p.errorf("trailing data")
	}
	return v, nil
}

// parsers keeps parsers with their stacks: a record then costs no stack
// growth.
var parsers = sync.Pool{New: func() any { return new(jsonParser) }}

type jsonParser struct {
	cursor
	values, max int
	// stack and keys hold the members of the arrays and objects being
	// read; each is copied out, at its exact size, when it closes.
	stack []Value
	keys  []string
}

func (p *jsonParser) value(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, errDepth
	}
	if p.values++; p.values > p.max {
		return Value{}, fmt.Errorf("%w (%d)", errTooMany, p.max)
	}
	if p.i >= len(p.s) {
		return Value{}, p.errorf("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	case c == 't':
		return Value{Kind: Bool, Bool: true}, p.word("true")
	case c == 'f':
		return Value{Kind: Bool}, p.word("false")
	case c == 'n':
		return Value{Kind: Null}, p.word("null")
	case c == 'N':
		return Value{Kind: Number, Str: "NaN", Num: nan()}, p.word("NaN")
	case c == 'I':
		return Value{Kind: Number, Str: "Infinity", Num: inf(1)}, p.word("Infinity")
	case c == '-' && p.i+1 < len(p.s) && p.s[p.i+1] == 'I':
		return Value{Kind: Number, Str: "-Infinity", Num: inf(-1)}, p.word("-Infinity")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return Value{}, p.errorf("unexpected %q", p.s[p.i])
}

func (p *jsonParser) word(w string) error {
	if len(p.s)-p.i < len(w) || p.s[p.i:p.i+len(w)] != w {
		return p.errorf("invalid literal")
	}
	p.i += len(w)
	return nil
}

// number reads a JSON number as written; its text is kept.
func (p *jsonParser) number() (Value, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 || (n > 1 && p.s[intStart] == '0') {
		return Value{}, p.errorf("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return Value{}, p.errorf("invalid number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return Value{}, p.errorf("invalid number")
		}
	}
	lit := p.s[start:p.i]
	f, _ := ParseNumber(lit)
	return Value{Kind: Number, Str: lit, Num: f}, nil
}

func (p *jsonParser) str() (string, error) {
	p.i++ // the quote
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			return p.strSlow(start)
		}
		p.i++
	}
	return "", p.errorf("unterminated string")
}

// strSlow decodes a string with escapes.
func (p *jsonParser) strSlow(start int) (string, error) {
	out := append([]byte(nil), p.s[start:p.i]...)
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			break
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				if p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					p.i += 2
					if lo, ok := p.hex4(); ok {
						r2 = lo
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.errorf("invalid escape")
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.s)-p.i < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(n), true
}

func (p *jsonParser) array(depth int) (Value, error) {
	p.i++
	v := Value{Kind: Array}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	base := len(p.stack)
	defer func() { p.stack = p.stack[:base] }()
	for {
		p.space()
		item, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		p.stack = append(p.stack, item)
		done, err := p.next(']', nil, "array")
		if err != nil {
			return Value{}, err
		}
		if done {
			v.Items = append(make([]Value, 0, len(p.stack)-base), p.stack[base:]...)
			return v, nil
		}
	}
}

func (p *jsonParser) object(depth int) (Value, error) {
	p.i++
	v := Value{Kind: Object}
	var ks keySet
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	base, kbase := len(p.stack), len(p.keys)
	defer func() { p.stack, p.keys = p.stack[:base], p.keys[:kbase] }()
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, p.errorf("expected a key")
		}
		k, err := p.str()
		if err != nil {
			return Value{}, err
		}
		if err := ks.add(p.keys[kbase:], k); err != nil {
			return Value{}, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, p.errorf("expected :")
		}
		p.i++
		p.space()
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		p.keys = append(p.keys, k)
		p.stack = append(p.stack, val)
		done, err := p.next('}', nil, "object")
		if err != nil {
			return Value{}, err
		}
		if done {
			v.Keys = append(make([]string, 0, len(p.keys)-kbase), p.keys[kbase:]...)
			v.Vals = append(make([]Value, 0, len(p.stack)-base), p.stack[base:]...)
			return v, nil
		}
	}
}

// keySet refuses a key already in an object. Objects are small (a
// record's stage has tens of keys), so a scan beats a map; a large object
// switches to a map, so that a hostile line of many keys stays linear.
type keySet struct {
	seen map[string]struct{}
}

func (ks *keySet) add(keys []string, k string) error {
	if ks.seen == nil && len(keys) < 32 {
		for _, have := range keys {
			if have == k {
				return fmt.Errorf("%w: %q", ErrDuplicate, Clip(k))
			}
		}
		return nil
	}
	if ks.seen == nil {
		ks.seen = make(map[string]struct{}, 2*len(keys))
		for _, have := range keys {
			ks.seen[have] = struct{}{}
		}
	}
	if _, dup := ks.seen[k]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicate, Clip(k))
	}
	ks.seen[k] = struct{}{}
	return nil
}
