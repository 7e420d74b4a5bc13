// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package literal

import "fmt"

// cursor is a position in a text that a parser reads: what the JSON and
// the Python-literal parsers share.
type cursor struct {
	s string
	i int
}

func (c *cursor) space() {
	for c.i < len(c.s) {
		switch c.s[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *cursor) errorf(format string, args ...any) error {
	return fmt.Errorf("byte %d: "+format, append([]any{c.i}, args...)...)
}

// next reads what follows an item of a list, object or dict: a comma, or
// close, which ends it (done). When the text ends first, the error is end,
// or, when end is nil, one that says what was left unterminated (what).
// The error is made only then: next runs once per item.
func (c *cursor) next(close byte, end error, what string) (done bool, err error) {
	c.space()
	if c.i >= len(c.s) {
		if end == nil {
			end = c.errorf("unterminated %s", what)
		}
		return false, end
	}
	switch c.s[c.i] {
	case ',':
		c.i++
		return false, nil
	case close:
		c.i++
		return true, nil
	}
	return false, c.errorf("expected , or %c", close)
}
