// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package sanitize

import (
	"strings"
	"testing"
)

func TestURLHidesSecrets(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318"},
		{"http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:4318/v1/traces"},
		{"http://[::1]:4318/v1/traces", "http://[::1]:4318/v1/traces"},
		{"https://user:s3cret@collector:4318/v1", "https://xxxxx@collector:4318/v1"},
		{"https://ghp_s3cret:x-oauth-basic@collector", "https://xxxxx@collector"},
		{"https://ghp_s3cret@collector", "https://xxxxx@collector"},
		{"http://127.0.0.1:1/?token=s3cret&x", "http://127.0.0.1:1/?token=xxxxx&x=xxxxx"},
		{"http://h/p?k=s3cret#frag", "http://h/p?k=xxxxx#xxxxx"},
		{"http://h/#access_token=s3cret", "http://h/#xxxxx"},
		{"http://h/?", "http://h/?"},
		{"http://h/?&&", "http://h/"},
		{"http://h/path@x", "http://xxxxx@x"}, // a token holding '/' cannot be told apart
		// Malformed: everything before the last '@' goes.
		{"http://user:s3cret pw@127.0.0.1:1", "http://xxxxx@127.0.0.1:1"},
		{"http://user:pa/s3cret@127.0.0.1:1/v1", "http://xxxxx@127.0.0.1:1/v1"},
		{"http://user:s3c?ret@127.0.0.1:99999", "http://xxxxx@127.0.0.1:99999"},
		{"http://user:pa#s3cret@host:99999/x", "http://xxxxx@host:99999/x"},
		{"http://tok/s3cret@host:99999", "http://xxxxx@host:99999"},
		{"//user:s3cret@host", "//xxxxx@host"},
		{"ftp://user:s3cretpw@127.0.0.1:1", "ftp://xxxxx@127.0.0.1:1"},
		{"user:s3cret@host:4317", "xxxxx@host:4317"},
		{"", ""},
	}
	for _, c := range cases {
		got := URL(c.in, 0)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3c") || strings.Contains(got, "pa/") {
			t.Errorf("URL(%q) = %q shows a secret", c.in, got)
		}
	}
	if got := URL("http://h/"+strings.Repeat("\xff", 100), 16); len(got) > 16 || !Valid(got, 16) {
		t.Errorf("not bounded: %q", got)
	}
}
