package sanitize

import (
	"strings"
	"testing"
)

func TestURLHidesSecrets(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318"},
		{"http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:4318/v1/traces"},
		{"https://user:s3cret@collector:4318/v1", "https://user:xxxxx@collector:4318/v1"},
		{"http://user:s3cret pw@127.0.0.1:1", "http://user:xxxxx@127.0.0.1:1"},
		{"http://user:pa/ss@127.0.0.1:1/v1", "http://user:xxxxx@127.0.0.1:1/v1"},
		{"ftp://user:s3cretpw@127.0.0.1:1", "ftp://user:xxxxx@127.0.0.1:1"},
		{"https://ghp_token@collector", "https://xxxxx@collector"},
		{"http://127.0.0.1:1/?token=abc&x", "http://127.0.0.1:1/?token=xxxxx&x=xxxxx"},
		{"http://h/p?k=v#frag", "http://h/p?k=xxxxx#frag"},
		{"user:pw@host:4317", "user:xxxxx@host:4317"},
		{"", ""},
	}
	for _, c := range cases {
		got := URL(c.in, 0)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "pa/ss", "ghp_token", "abc"} {
			if strings.Contains(c.in, secret) && strings.Contains(got, secret) {
				t.Errorf("URL(%q) = %q shows %q", c.in, got, secret)
			}
		}
	}
	if got := URL("http://h/"+strings.Repeat("\xff", 100), 16); len(got) > 16 || !Valid(got, 16) {
		t.Errorf("not bounded: %q", got)
	}
}
