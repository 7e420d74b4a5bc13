// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package sanitize

import (
	"net/url"
	"strings"
)

// Redacted stands in for a secret that URL removes.
const Redacted = "xxxxx"

// URL returns u fit to print in a log line or an error, without its
// secrets: its userinfo (a user name and password, or a user name alone,
// which is often a token), the values of its query, and its fragment are replaced
// by [Redacted]. Unlike [net/url.URL.Redacted] it works on text that does
// not parse as a URL, such as a misconfigured endpoint whose password
// holds a space, which is when it is most likely to be printed: then
// everything before the last '@' after the scheme is replaced, whatever it
// holds (a path holding '@' is taken for such a secret, too). The result is valid UTF-8 of at most max bytes (no bound when max
// is 0 or less).
func URL(u string, max int) string {
	// A path holding '@' may be a token holding '/' ("http://tok/en@host"):
	// such text is redacted as malformed.
	if pu, err := url.Parse(u); err == nil && pu.Host != "" && !strings.Contains(pu.Path, "@") {
		if pu.User != nil {
			// The user name too: a token is often given there, with a
			// password of no meaning ("https://ghp_token:x-oauth-basic@host").
			pu.User = url.User(Redacted)
		}
		if pu.RawQuery != "" || pu.ForceQuery {
			pu.RawQuery = redactQuery(pu.RawQuery)
		}
		if pu.Fragment != "" {
			pu.Fragment, pu.RawFragment = Redacted, ""
		}
		return String(pu.String(), max)
	}
	scheme, rest := "", u
	if i := strings.Index(u, "://"); i >= 0 {
		scheme, rest = u[:i+3], u[i+3:]
	} else if strings.HasPrefix(u, "//") {
		scheme, rest = "//", u[2:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = Redacted + rest[at:]
	}
	rest, frag, hasFrag := strings.Cut(rest, "#")
	path, query, hasQuery := strings.Cut(rest, "?")
	var b strings.Builder
	b.WriteString(scheme + path)
	if hasQuery {
		b.WriteString("?" + redactQuery(query))
	}
	if hasFrag && frag != "" {
		b.WriteString("#" + Redacted)
	}
	return String(b.String(), max)
}

// redactQuery keeps a query's keys and replaces each value.
func redactQuery(q string) string {
	var parts []string
	for _, kv := range strings.Split(q, "&") {
		if kv == "" {
			continue
		}
		k, _, _ := strings.Cut(kv, "=")
		parts = append(parts, k+"="+Redacted)
	}
	return strings.Join(parts, "&")
}
