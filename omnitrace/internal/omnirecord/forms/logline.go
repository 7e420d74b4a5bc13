// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package forms

import (
	"strings"
	"time"
)

// logLevels are the level names a log line starts with.
var logLevels = []string{"INFO", "WARNING", "DEBUG", "ERROR", "CRITICAL", "WARN"}

// SplitLogLine splits one line of a vLLM log into its time and message.
// vLLM's format is "LEVEL MM-DD HH:MM:SS [file.py:line] message", maybe
// after a process prefix "(EngineCore_DP0 pid=1) " and with colour codes;
// its logging.Formatter repeats that prefix on every line of a multi-line
// message. The orchestrator's own log file writes "YYYY-MM-DD HH:MM:SS,mmm
// [PID:n] LEVEL: message". A line with neither prefix continues the
// message before it: msg is the whole line.
//
// Neither format writes a zone: the time is read in loc (see
// [Options.Zone]), never in the importing machine's zone. vLLM writes no
// year either: it is the one that puts the time at most a day after ref
// (see withYear). A line whose level is followed by no date ("INFO
// 05:10:44 [omni.py:310] …", "INFO [omni.py:310] …") is a line whose
// message is read, without a time: its stamp is not dated.
// The lines of a log share their stamp with the line before more often
// than not: c, when not nil, keeps the last one read.
func SplitLogLine(line string, ref time.Time, loc *time.Location, c *StampCache) (st Stamp, msg string) {
	var t time.Time
	var dated bool
	defer func() {
		if dated {
			st = stampOf(t)
		}
	}()
	if strings.IndexByte(line, 0x1b) >= 0 {
		line = stripANSI(line)
	}
	s := line
	if strings.HasPrefix(s, "(") {
		if j := strings.Index(s, ") "); j > 0 && j < 120 {
			s = s[j+2:]
		}
	}
	for _, lv := range logLevels {
		if !strings.HasPrefix(s, lv) || len(s) <= len(lv) || s[len(lv)] != ' ' {
			continue
		}
		rest := s[len(lv)+1:]
		switch {
		case isStamp(rest, "00-00 00:00:00"):
			t, dated = c.parse("01-02 15:04:05", rest[:14], ref, loc)
			rest = rest[14:]
		case isStamp(rest, "0000-00-00 00:00:00"):
			t, dated = c.parse(time.DateTime, rest[:19], ref, loc)
			rest = rest[19:]
		case isStamp(rest, "00:00:00"):
			rest = rest[8:] // a time without its date: no time at all
		}
		var frac time.Duration
		frac, rest = fraction(rest)
		if dated {
			t = t.Add(frac)
		}
		rest = strings.TrimPrefix(rest, " ")
		if strings.HasPrefix(rest, "[") {
			if j := strings.Index(rest, "] "); j > 0 {
				rest = rest[j+2:]
			} else if strings.HasSuffix(rest, "]") {
				rest = ""
			}
		}
		return st, rest
	}
	// The orchestrator's file format.
	if len(s) > 24 && isStamp(s, "0000-00-00 00:00:00") {
		if tm, ok := c.parse(time.DateTime, s[:19], ref, loc); ok {
			frac, rest := fraction(s[19:])
			rest = strings.TrimPrefix(rest, " ")
			if strings.HasPrefix(rest, "[PID:") {
				if j := strings.Index(rest, "] "); j > 0 {
					rest = rest[j+2:]
				}
			}
			for _, lv := range logLevels {
				if strings.HasPrefix(rest, lv+": ") {
					rest = rest[len(lv)+2:]
					break
				}
			}
			t, dated = tm.Add(frac), true
			return st, rest
		}
	}
	return st, line
}

// Stamp is the time of a log line: t, or alt too when the line's wall
// clock shows twice (the hour repeated when clocks go back), t being the
// first of the two.
type Stamp struct {
	T, Alt time.Time
	Dated  bool
}

// stampOf returns the stamp of a time as time.Date made it, which picks
// one of the two instants of a wall clock shown twice.
func stampOf(t time.Time) Stamp {
	st := Stamp{T: t, Dated: true}
	_, off := t.Zone()
	start, end := t.ZoneBounds()
	var other time.Time
	if !start.IsZero() {
		if _, prev := start.Add(-time.Nanosecond).Zone(); prev > off {
			other = t.Add(-time.Duration(prev-off) * time.Second) // before the clocks went back
		}
	}
	if !end.IsZero() && other.IsZero() {
		if _, next := end.Zone(); next < off {
			other = t.Add(time.Duration(off-next) * time.Second) // after they go back
		}
	}
	if other.IsZero() || !sameWallClock(other, t) {
		return st
	}
	if other.Before(t) {
		st.T, st.Alt = other, t
	} else {
		st.Alt = other
	}
	return st
}

func sameWallClock(a, b time.Time) bool {
	a = a.In(b.Location())
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute() &&
		a.Second() == b.Second() && a.Nanosecond() == b.Nanosecond()
}

// StampCache keeps the last stamp read, and the time it is.
type StampCache struct {
	text string
	ref  time.Time
	loc  *time.Location
	t    time.Time
	ok   bool
}

// parse reads text, laid out as layout, in loc; a stamp without a year
// gets the year withYear gives it from ref.
func (c *StampCache) parse(layout, text string, ref time.Time, loc *time.Location) (time.Time, bool) {
	if c != nil && c.text == text && c.loc == loc && c.ref.Equal(ref) {
		return c.t, c.ok
	}
	t, err := time.ParseInLocation(layout, text, loc)
	ok := err == nil
	if ok && layout == "01-02 15:04:05" {
		t = withYear(t, ref)
	}
	if c != nil {
		*c = StampCache{text: strings.Clone(text), ref: ref, loc: loc, t: t, ok: ok}
	}
	return t, ok
}

// isStamp reports whether s starts with a stamp shaped as pattern: a 0
// stands for a digit, any other byte for itself.
func isStamp(s, pattern string) bool {
	if len(s) < len(pattern) {
		return false
	}
	for i := 0; i < len(pattern); i++ {
		if c := s[i]; pattern[i] == '0' {
			if c < '0' || c > '9' {
				return false
			}
		} else if c != pattern[i] {
			return false
		}
	}
	return true
}

// fraction reads the fraction of a second that may follow a stamp
// (".123" or ",123"), and returns it with the rest of s.
func fraction(s string) (time.Duration, string) {
	if len(s) < 2 || (s[0] != '.' && s[0] != ',') || s[1] < '0' || s[1] > '9' {
		return 0, s
	}
	var d time.Duration
	unit := time.Second
	k := 1
	for ; k < len(s) && s[k] >= '0' && s[k] <= '9'; k++ {
		if unit >= 10 {
			unit /= 10
			d += time.Duration(s[k]-'0') * unit
		}
	}
	return d, s[k:]
}

// withYear gives a time read without a year the latest year that puts it
// at most a day after ref (a log read after it was written) and in which
// its date exists: 02-29 goes to a leap year, never to March 1st. The
// years are counted in t's zone; ref is an instant, whatever its zone.
func withYear(t, ref time.Time) time.Time {
	if ref.IsZero() {
		ref = time.Now()
	}
	ref = ref.In(t.Location())
	year := ref.Year() + 1
	for range 9 { // a leap year comes within eight years
		y := time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, t.Location())
		if y.Month() == t.Month() && y.Day() == t.Day() && !y.After(ref.Add(24*time.Hour)) {
			return y
		}
		year--
	}
	return time.Date(ref.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, t.Location())
}

// stripANSI removes colour escape sequences.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
