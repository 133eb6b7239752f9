package reviewurl

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		url         string
		ok, hasCred bool
	}{
		{"https://api.openai.com/v1", true, false},
		{"http://127.0.0.1:11434/v1", true, false},
		{"http://[::1]:8080/v1", true, false},
		{"https://user:secret@llm.internal/v1", true, true},
		{"https://user@llm.internal/v1", true, true},
		{"", false, false},
		{"api.openai.com/v1", false, false},
		{"/v1", false, false},
		{"ftp://host/v1", false, false},
		{"file:///etc/passwd", false, false},
		{"https:///v1", false, false},
		{"https://host/v1?key=secret", false, false},
		{"https://host/v1#x", false, false},
		{"https://host/v1?", true, false}, // an empty query is none
		{"http://host:bad/v1", false, false},
		{"https://us er:pw@host/\x7f", false, false},
	} {
		why := Check(tc.url)
		if (why == "") != tc.ok {
			t.Errorf("Check(%q) = %q, want ok %v", tc.url, why, tc.ok)
		}
		if why != "" && (strings.Contains(why, "secret") || strings.Contains(why, "host")) {
			t.Errorf("Check(%q)'s reason quotes the URL: %q", tc.url, why)
		}
		if tc.ok && HasCredentials(tc.url) != tc.hasCred {
			t.Errorf("HasCredentials(%q) = %v, want %v", tc.url, !tc.hasCred, tc.hasCred)
		}
	}
}

func TestHost(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://api.openai.com/v1", "api.openai.com"},
		{"http://127.0.0.1:11434/v1", "127.0.0.1:11434"},
		{"https://someone:secret@llm.internal:8443/v1?x=1#f", "llm.internal:8443"},
		{"https://someone@llm.internal/v1", "llm.internal"},
		{"http://[::1]:8080/v1", "[::1]:8080"},
		{"http://us er:secret@host/\x7f", ""},
	} {
		if got := Host(tc.url); got != tc.want {
			t.Errorf("Host(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}
