package netproxy

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/netdest"
)

func TestParseTarget(t *testing.T) {
	ok := []struct{ method, uri, host, want string }{
		{"CONNECT", "example.com:443", "", "example.com:443"},
		{"CONNECT", "Example.COM.:443", "example.com:443", "example.com:443"},
		{"CONNECT", "example.com:443", "example.com", "example.com:443"},
		{"CONNECT", "[2001:db8::1]:443", "[2001:DB8::1]:443", "[2001:db8::1]:443"},
		{"CONNECT", "127.1:8080", "", "127.0.0.1:8080"},
		{"GET", "http://example.com/x?y", "example.com", "example.com:80"},
		{"GET", "HTTP://example.com:80/", "example.com", "example.com:80"},
		{"GET", "http://example.com:8080", "example.com:8080", "example.com:8080"},
		{"POST", "http://[::1]:81/a@b", "[::1]:81", "127.0.0.1:81"},
		{"GET", "http://example.com/", "", "example.com:80"},
	}
	for _, c := range ok {
		d, err := parseTarget(c.method, c.uri, c.host)
		if err != nil || d.String() != c.want {
			t.Errorf("parseTarget(%q, %q, %q) = %v, %v; want %s", c.method, c.uri, c.host, d, err, c.want)
		}
	}
	bad := []struct{ method, uri, host string }{
		{"CONNECT", "example.com", ""},
		{"CONNECT", "example.com:", ""},
		{"CONNECT", "example.com:443:22", ""},
		{"CONNECT", "example.com:+443", ""},
		{"CONNECT", "example.com:0", ""},
		{"CONNECT", "example.com:65536", ""},
		{"CONNECT", "user@example.com:443", ""},
		{"CONNECT", "example.com:443/", ""},
		{"CONNECT", "http://example.com:443", ""},
		{"CONNECT", "example.com:443", "evil.com:443"},
		{"CONNECT", "example.com:443", "example.com:444"},
		{"CONNECT", "2001:db8::1:443", ""},
		{"GET", "/", "example.com"},
		{"GET", "*", "example.com"},
		{"GET", "https://example.com/", "example.com"},
		{"GET", "ftp://example.com/", "example.com"},
		{"GET", "ws://example.com/", "example.com"},
		{"GET", "http://allowed@127.0.0.1/", "127.0.0.1"},
		{"GET", "http://user:pw@example.com/", "example.com"},
		{"GET", "http://example.com:/", "example.com"},
		{"GET", "http://example.com:0/", "example.com"},
		{"GET", "http://example.com:65536/", "example.com"},
		{"GET", "http://example.com/", "evil.com"},
		{"GET", "http://example.com/", "example.com:8080"},
		{"GET", "http://example.com:8080/", "example.com"},
		{"GET", "http://evil.com#@example.com/", "example.com"},
		{"GET", "http://%65xample.com/", "example.com"},
		{"GET", "http:///path", ""},
		{"GET", "http://exa mple.com/", ""},
		{"GET", "http://example.com/\x00", ""},
		{"GET", "http://example.com/", "example.com\r\nX: y"},
		{"GET", "http://b\u00fccher.de/", ""},
		{"GET", "http://example.com\\@evil.com/", ""},
		{"GET", "", ""},
	}
	for _, c := range bad {
		if d, err := parseTarget(c.method, c.uri, c.host); err == nil {
			t.Errorf("parseTarget(%q, %q, %q) = %v; want an error", c.method, c.uri, c.host, d)
		}
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []struct{ m, u, h string }{
		{"CONNECT", "example.com:443", "example.com:443"},
		{"CONNECT", "[::1]:22", ""},
		{"GET", "http://example.com/", "example.com"},
		{"GET", "http://user@127.0.0.1:8080/x", "127.0.0.1:8080"},
		{"GET", "https://example.com/", ""},
		{"POST", "HTTP://0x7f.1:80/?a#b", "localhost"},
		{"CONNECT", "example.com:443:22", ""},
	} {
		f.Add(s.m, s.u, s.h)
	}
	f.Fuzz(func(t *testing.T, method, uri, host string) {
		d, err := parseTarget(method, uri, host)
		if err != nil {
			return
		}
		if d.Port == 0 || d.Host == "" {
			t.Fatalf("accepted an empty destination %+v", d)
		}
		back, err := netdest.ParseHostPort(d.String())
		if err != nil || back != d {
			t.Fatalf("%v does not round-trip: %v %v", d, back, err)
		}
		if hasJunk(uri) || hasJunk(host) {
			t.Fatalf("accepted junk %q %q", uri, host)
		}
		if method == "CONNECT" {
			if strings.ContainsAny(uri, "/@?#") {
				t.Fatalf("CONNECT accepted %q", uri)
			}
			return
		}
		rest, ok := cutPrefixFold(uri, "http://")
		if !ok {
			t.Fatalf("accepted a non-http target %q", uri)
		}
		auth := rest
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			auth = rest[:i]
		}
		if strings.ContainsAny(auth, "@%#") || strings.Contains(uri, "#") {
			t.Fatalf("accepted userinfo or a fragment in %q", uri)
		}
	})
}
