package omnirecord

import (
	"strings"
	"time"
)

// logLevels are the level names a log line starts with.
var logLevels = []string{"INFO", "WARNING", "DEBUG", "ERROR", "CRITICAL", "WARN"}

// splitLogLine splits one line of a vLLM log into its time and message.
// vLLM's format is "LEVEL MM-DD HH:MM:SS [file.py:line] message", maybe
// after a process prefix "(EngineCore_DP0 pid=1) " and with colour codes;
// its logging.Formatter repeats that prefix on every line of a multi-line
// message. The orchestrator's own log file writes "YYYY-MM-DD HH:MM:SS,mmm
// [PID:n] LEVEL: message". A line with neither prefix continues the
// message before it: ok is false. The year, which vLLM does not write, is
// the one that puts the time at most a day after ref.
func splitLogLine(line string, ref time.Time) (t time.Time, msg string, ok bool) {
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
		if len(rest) < 15 || rest[2] != '-' || rest[5] != ' ' || rest[8] != ':' || rest[11] != ':' {
			return time.Time{}, "", false
		}
		stamp := rest[:14]
		rest = rest[14:]
		if strings.HasPrefix(rest, ".") { // milliseconds, in some formats
			k := 1
			for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
				k++
			}
			rest = rest[k:]
		}
		rest = strings.TrimPrefix(rest, " ")
		if strings.HasPrefix(rest, "[") {
			if j := strings.Index(rest, "] "); j > 0 {
				rest = rest[j+2:]
			} else if strings.HasSuffix(rest, "]") {
				rest = ""
			}
		}
		tm, err := time.ParseInLocation("01-02 15:04:05", stamp, time.Local)
		if err != nil {
			return time.Time{}, "", false
		}
		return withYear(tm, ref), rest, true
	}
	// The orchestrator's file format.
	if len(s) > 24 && s[4] == '-' && s[7] == '-' && s[10] == ' ' && s[13] == ':' {
		tm, err := time.ParseInLocation("2006-01-02 15:04:05", s[:19], time.Local)
		if err == nil {
			rest := s[19:]
			if strings.HasPrefix(rest, ",") {
				rest = strings.TrimLeft(rest[1:], "0123456789")
			}
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
			return tm, rest, true
		}
	}
	return time.Time{}, line, false
}

// withYear gives a time read without a year the latest year that puts it
// at most a day after ref (a log read after it was written) and in which
// its date exists: 02-29 goes to a leap year, never to March 1st.
func withYear(t, ref time.Time) time.Time {
	if ref.IsZero() {
		ref = time.Now()
	}
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
