package policy

import (
	"slices"
	"testing"
)

func TestFilterEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"GOPATH=/home/u/go",
		"OPENAI_API_KEY=sk-1",
		"GITHUB_TOKEN=ghp_x",
		"SSH_AUTH_SOCK=/run/agent",
		"AWS_SECRET_ACCESS_KEY=x",
		"MY_PASSWORD=x",
		"SANDBOXD_POLICY=/x",
		"TERM=xterm",
		"NPM_TOKEN=1",
		"NPM_TOKEN=2",
		"NOEQUALS",
	}
	tests := []struct {
		name        string
		allow, deny []string
		kept        []string
		dropped     []string
	}{
		{
			name: "defaults",
			deny: DefaultEnvDeny(),
			kept: []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "GOPATH=/home/u/go", "TERM=xterm", "NOEQUALS"},
			dropped: []string{"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "MY_PASSWORD", "NPM_TOKEN",
				"OPENAI_API_KEY", "SANDBOXD_POLICY", "SSH_AUTH_SOCK"},
		},
		{
			name:  "allow overrides deny",
			allow: []string{"GITHUB_TOKEN", "SSH_*"},
			deny:  DefaultEnvDeny(),
			kept: []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "GOPATH=/home/u/go",
				"GITHUB_TOKEN=ghp_x", "SSH_AUTH_SOCK=/run/agent", "TERM=xterm", "NOEQUALS"},
			dropped: []string{"AWS_SECRET_ACCESS_KEY", "MY_PASSWORD", "NPM_TOKEN", "OPENAI_API_KEY", "SANDBOXD_POLICY"},
		},
		{
			name:    "extra deny",
			deny:    []string{"TERM", "NOEQUALS", "*ANG"},
			kept:    []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "GOPATH=/home/u/go", "OPENAI_API_KEY=sk-1", "GITHUB_TOKEN=ghp_x", "SSH_AUTH_SOCK=/run/agent", "AWS_SECRET_ACCESS_KEY=x", "MY_PASSWORD=x", "SANDBOXD_POLICY=/x", "NPM_TOKEN=1", "NPM_TOKEN=2"},
			dropped: []string{"LANG", "NOEQUALS", "TERM"},
		},
		{
			name: "nothing denied",
			kept: environ,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := FilterEnv(environ, tt.allow, tt.deny)
			if !slices.Equal(kept, tt.kept) {
				t.Errorf("kept\n got %q\nwant %q", kept, tt.kept)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped\n got %q\nwant %q", dropped, tt.dropped)
			}
		})
	}
}

func TestMatchEnvPattern(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"PATH", "PATH", true},
		{"PATH", "PATHX", false},
		{"PATH", "path", false},
		{"FOO_*", "FOO_BAR", true},
		{"FOO_*", "FOO_", true},
		{"FOO_*", "FOO", false},
		{"*_TOKEN", "GITHUB_TOKEN", true},
		{"*_TOKEN", "TOKEN", false},
		{"*TOKEN", "TOKEN", true},
		{"*_TOKEN_*", "CI_TOKEN_FILE", true},
		{"*SECRET*", "SECRET", true},
		{"*SECRET*", "MY_SECRET_THING", true},
		{"*SECRET*", "SECRE", false},
		{"*API_KEY*", "OPENAI_API_KEY", true},
		{"*_KEY", "GOPATH", false},
		{"A*B*C", "AXXBYYC", true},
		{"A*B*C", "AXXBYY", false},
		{"*", "", true},
		{"", "", true},
		{"**", "X", true},
		{"A?", "AB", false}, // only '*' is special
		{"A?", "A?", true},
	}
	for _, tt := range tests {
		if got := MatchEnvPattern(tt.pattern, tt.name); got != tt.want {
			t.Errorf("MatchEnvPattern(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
	// None of the built-in deny patterns may hit everyday variables.
	for _, name := range []string{"PATH", "HOME", "LANG", "GOPATH", "TERM", "USER", "SHELL", "PWD", "EDITOR", "LC_ALL", "TZ", "GOFLAGS", "CARGO_HOME", "KEYTIMEOUT"} {
		if matchAny(DefaultEnvDeny(), name) {
			t.Errorf("built-in deny list strips %s", name)
		}
	}
}
