// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package literal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParsePython parses one Python literal as repr() and pprint.pformat write
// it: dicts (with string or integer keys), lists, tuples, strings in single
// or double quotes (with escapes, and the adjacent literals in parentheses
// that pformat splits a long string into), ints, floats (inf and nan too),
// True, False and None. It builds the same [Value] tree as [ParseJSON]; a
// dict's integer keys become their text. Its work is linear in len(s) and
// its values bounded by maxValues.
func ParsePython(s string, maxValues int) (Value, error) {
	p := pyParser{cursor: cursor{s: s}, max: maxValues}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.space()
	if p.i < len(p.s) {
		return Value{}, p.errorf("trailing text")
	}
	return v, nil
}

// errIncomplete reports a literal that the input ends inside of: a log
// reader then reads the next line and tries again.
var errIncomplete = errors.New("the literal is incomplete")

type pyParser struct {
	cursor
	values, max int
}

func (p *pyParser) value(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, errDepth
	}
	if p.values++; p.values > p.max {
		return Value{}, fmt.Errorf("%w (%d)", errTooMany, p.max)
	}
	if p.i >= len(p.s) {
		return Value{}, errIncomplete
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.dict(depth)
	case c == '[':
		return p.seq(depth, ']')
	case c == '(':
		return p.paren(depth)
	case c == '\'' || c == '"':
		s, err := p.strings()
		return Value{Kind: String, Str: s}, err
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	}
	word := p.word()
	switch word {
	case "True":
		return Value{Kind: Bool, Bool: true}, nil
	case "False":
		return Value{Kind: Bool}, nil
	case "None":
		return Value{Kind: Null}, nil
	case "inf", "nan":
		f, _ := ParseNumber(word)
		return Value{Kind: Number, Str: word, Num: f}, nil
	case "":
		return Value{}, p.errorf("unexpected %q", p.s[p.i])
	}
	return Value{}, p.errorf("unknown name %q", Clip(word))
}

func (p *pyParser) word() string {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

func (p *pyParser) number() (Value, error) {
	start := p.i
	if c := p.s[p.i]; c == '-' || c == '+' {
		p.i++
		if strings.HasPrefix(p.s[p.i:], "inf") {
			p.i += 3
			f, _ := ParseNumber(p.s[start:p.i])
			if p.s[start] == '+' {
				f, _ = ParseNumber("inf")
			}
			return Value{Kind: Number, Str: p.s[start:p.i], Num: f}, nil
		}
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '_' ||
			(c == '-' || c == '+') && (p.s[p.i-1] == 'e' || p.s[p.i-1] == 'E') {
			p.i++
			continue
		}
		break
	}
	lit := p.s[start:p.i]
	f, err := strconv.ParseFloat(strings.ReplaceAll(lit, "_", ""), 64)
	if err != nil {
		if ne := (*strconv.NumError)(nil); !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			return Value{}, p.errorf("invalid number %q", Clip(lit))
		}
	}
	return Value{Kind: Number, Str: lit, Num: f}, nil
}

// strings reads one string literal, or several adjacent ones, which
// Python joins.
func (p *pyParser) strings() (string, error) {
	var out string
	for n := 0; ; n++ {
		s, err := p.str()
		if err != nil {
			return "", err
		}
		if n == 0 {
			out = s
		} else {
			out += s
		}
		save := p.i
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
			p.i = save
			return out, nil
		}
	}
}

// str reads one quoted string: its escapes as Python writes them in a
// repr (\\, \', \", \n, \r, \t, \xhh, \uhhhh, \Uhhhhhhhh).
func (p *pyParser) str() (string, error) {
	q := p.s[p.i]
	p.i++
	start := p.i
	var b []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			if b == nil {
				return p.s[start : p.i-1], nil
			}
			return string(b), nil
		case c == '\n':
			return "", p.errorf("a line break in a string")
		case c != '\\':
			if b != nil {
				b = append(b, c)
			}
			p.i++
			continue
		}
		if b == nil {
			b = append([]byte(nil), p.s[start:p.i]...)
		}
		if p.i+1 >= len(p.s) {
			return "", errIncomplete
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '\\', '\'', '"':
			b = append(b, e)
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if len(p.s)-p.i < n {
				return "", p.errorf("short \\%c escape", e)
			}
			r, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
			if err != nil {
				return "", p.errorf("invalid \\%c escape", e)
			}
			p.i += n
			if e == 'x' {
				// \xhh in a str's repr is the code point U+00hh.
				b = utf8.AppendRune(b, rune(r))
			} else {
				b = utf8.AppendRune(b, rune(r))
			}
		default:
			b = append(b, '\\', e)
		}
	}
	return "", errIncomplete
}

func (p *pyParser) seq(depth int, close byte) (Value, error) {
	p.i++
	v := Value{Kind: Array}
	for {
		p.space()
		if p.i >= len(p.s) {
			return Value{}, errIncomplete
		}
		if p.s[p.i] == close {
			p.i++
			return v, nil
		}
		item, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Items = append(v.Items, item)
		if done, err := p.next(close, errIncomplete, ""); err != nil || done {
			return v, err
		}
	}
}

// paren reads a tuple, or a parenthesised value: pformat wraps the pieces
// of a long string in parentheses.
func (p *pyParser) paren(depth int) (Value, error) {
	save := p.i
	p.i++
	p.space()
	if p.i < len(p.s) && (p.s[p.i] == '\'' || p.s[p.i] == '"') {
		s, err := p.strings()
		if err != nil {
			return Value{}, err
		}
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ')' {
			p.i++
			return Value{Kind: String, Str: s}, nil
		}
	}
	p.i = save
	return p.seq(depth, ')')
}

func (p *pyParser) dict(depth int) (Value, error) {
	p.i++
	v := Value{Kind: Object}
	var ks keySet
	for {
		p.space()
		if p.i >= len(p.s) {
			return Value{}, errIncomplete
		}
		if p.s[p.i] == '}' {
			p.i++
			return v, nil
		}
		kv, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		var k string
		switch kv.Kind {
		case String, Number:
			k = kv.Str
		case Bool, Null:
			k = map[bool]string{true: "True", false: "False"}[kv.Bool]
			if kv.Kind == Null {
				k = "None"
			}
		default:
			return Value{}, p.errorf("a dict key that is not a string or a number")
		}
		if err := ks.add(v.Keys, k); err != nil {
			return Value{}, err
		}
		p.space()
		if p.i >= len(p.s) {
			return Value{}, errIncomplete
		}
		if p.s[p.i] != ':' {
			return Value{}, p.errorf("expected :")
		}
		p.i++
		p.space()
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		v.Keys = append(v.Keys, k)
		v.Vals = append(v.Vals, val)
		if done, err := p.next('}', errIncomplete, ""); err != nil || done {
			return v, err
		}
	}
}
