package traceview

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Display returns s fit for one cell of a terminal table: valid UTF-8, with
// control characters (which could move the cursor or clear the screen)
// shown as '?', and at most limit bytes, cut at a character boundary and
// marked with "…" when cut. Strings in traces are other people's input:
// one 999 000-byte stage name must not make a 360 MB table.
func Display(s string, limit int) string {
	if limit <= 0 {
		return ""
	}
	clean := len(s) <= limit && utf8.ValidString(s)
	if clean {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f || c >= utf8.RuneSelf {
				clean = false
				break
			}
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			// Control and format characters (bidi overrides, zero-width
			// marks) could move the cursor or reorder what is shown.
			r = '?'
		}
		b.WriteRune(r)
		if b.Len() > limit {
			break // it will be cut: the rest need not be read
		}
	}
	out := b.String()
	if len(out) <= limit {
		return out
	}
	mark := "…"
	if limit < len(mark) {
		mark = "" // no room for the mark: at most limit bytes, always
	}
	n := limit - len(mark)
	for n > 0 && !utf8.RuneStart(out[n]) {
		n--
	}
	return out[:n] + mark
}

// Bounds of what one cell of a view prints, in bytes.
const (
	maxIDCell      = 128 // a request or trace id
	maxNameCell    = 40  // a stage name, a model, an error type
	maxMessageCell = 200 // a status message
)
