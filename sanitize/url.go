package sanitize

import "strings"

// Redacted stands in for a secret that URL removes.
const Redacted = "xxxxx"

// URL returns u fit to print in a log line or an error: the userinfo's
// password replaced by [Redacted] (and a userinfo without a password,
// which is often a token, replaced whole), and each value of the query
// replaced too. Unlike [net/url.URL.Redacted] it works on text that does
// not parse as a URL, such as a misconfigured endpoint whose password
// holds a space, which is when it is most likely to be printed. The result
// is valid UTF-8 of at most max bytes (no bound when max is 0 or less).
func URL(u string, max int) string {
	rest := u
	var b strings.Builder
	b.Grow(len(u))
	if i := strings.Index(rest, "://"); i >= 0 {
		b.WriteString(rest[:i+3])
		rest = rest[i+3:]
	}
	// The authority ends at the path, the query or the fragment. A
	// password may hold any of '/', '?' and '#' unescaped in a malformed
	// value; the last '@' before the path is taken as the userinfo's end.
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		if user, _, ok := strings.Cut(rest[:at], ":"); ok {
			b.WriteString(user + ":" + Redacted)
		} else {
			b.WriteString(Redacted)
		}
		rest = rest[at:]
	} else if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.ContainsAny(rest[:at], "?#") {
		// "user:pa/ss@host": a '/' in the password ended the authority
		// early.
		if user, _, ok := strings.Cut(rest[:at], ":"); ok && !strings.Contains(user, "/") {
			b.WriteString(user + ":" + Redacted)
			rest = rest[at:]
		}
	}
	path, query, hasQuery := strings.Cut(rest, "?")
	b.WriteString(path)
	if hasQuery {
		query, frag, hasFrag := strings.Cut(query, "#")
		b.WriteByte('?')
		for i, kv := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			k, _, _ := strings.Cut(kv, "=")
			b.WriteString(k + "=" + Redacted)
		}
		if hasFrag {
			b.WriteString("#" + frag)
		}
	}
	return String(b.String(), max)
}
