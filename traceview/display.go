package traceview

import (
	"strings"
	"unicode"

	"github.com/otelomni/otelomni/sanitize"
)

// maxLabel bounds a string shown in a view (an id, a model, a stage name,
// an error message): a view is read by a person, and the string may come
// from a client.
const maxLabel = 96

// display returns s fit for one cell of a terminal view: valid UTF-8, at
// most max bytes (cut with "…"), and with control characters (which could
// move the cursor or recolour the terminal) shown as "?".
func display(s string, max int) string {
	cut := sanitize.String(s, max)
	if len(s) > max && max > len("…") {
		cut = sanitize.String(s, max-len("…")) + "…"
	}
	if strings.IndexFunc(cut, unicode.IsControl) < 0 {
		return cut
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, cut)
}
