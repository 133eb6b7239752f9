package session

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestToolCaches checks where each host cache is found, for the
// environment and go env file combinations the tools themselves read.
// "@" stands for the home directory in env values, files and wants; a
// want starting with "!" is a reason (a substring of it) and no cache.
func TestToolCaches(t *testing.T) {
	type want struct{ goBuild, goMod, npm, pip string }
	cases := []struct {
		name  string
		env   []string
		files map[string]string // home-relative path -> content ("DIR" makes a directory)
		want  want
	}{
		{name: "defaults", want: want{"@/.cache/go-build", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "xdg cache", env: []string{"XDG_CACHE_HOME=/x/cache"},
			want: want{"/x/cache/go-build", "@/go/pkg/mod", "@/.npm/_cacache", "/x/cache/pip"}},
		{name: "relative xdg cache", env: []string{"XDG_CACHE_HOME=cache"},
			want: want{"!XDG_CACHE_HOME", "@/go/pkg/mod", "@/.npm/_cacache", "!XDG_CACHE_HOME"}},
		{name: "gocache env", env: []string{"GOCACHE=/g//b/", "GOMODCACHE=/m"},
			want: want{"/g/b", "/m", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "gocache off", env: []string{"GOCACHE=off"}, want: want{"!GOCACHE=off", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "gocache relative", env: []string{"GOCACHE=g", "GOMODCACHE=m"},
			want: want{"!GOCACHE is not", "!GOMODCACHE is not", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "last entry wins", env: []string{"GOCACHE=/first", "GOCACHE=/second"},
			want: want{"/second", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "go env file", files: map[string]string{".config/go/env": "# GOCACHE=/comment\ngocache=/lower\nGOCACHE=/early\nGOCACHE=/file\nGOMODCACHE=/modfile\n"},
			want: want{"/file", "/modfile", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "env beats go env file", env: []string{"GOCACHE=/env"}, files: map[string]string{".config/go/env": "GOCACHE=/file\n"},
			want: want{"/env", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "empty env falls back to file", env: []string{"GOCACHE="}, files: map[string]string{".config/go/env": "GOCACHE=/file"},
			want: want{"/file", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "go env file says off", files: map[string]string{".config/go/env": "GOCACHE=off\n"},
			want: want{"!GOCACHE=off", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "xdg config's go env file", env: []string{"XDG_CONFIG_HOME=@/cfg"},
			files: map[string]string{"cfg/go/env": "GOCACHE=/xdgfile\n", ".config/go/env": "GOCACHE=/notread\n"},
			want:  want{"/xdgfile", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "relative xdg config: no env file", env: []string{"XDG_CONFIG_HOME=cfg"},
			files: map[string]string{".config/go/env": "GOCACHE=/notread\n"},
			want:  want{"@/.cache/go-build", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "GOENV names the file", env: []string{"GOENV=@/elsewhere"},
			files: map[string]string{"elsewhere": "GOMODCACHE=/named\n", ".config/go/env": "GOMODCACHE=/notread\n"},
			want:  want{"@/.cache/go-build", "/named", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "GOENV off", env: []string{"GOENV=off"}, files: map[string]string{".config/go/env": "GOCACHE=/notread\n"},
			want: want{"@/.cache/go-build", "@/go/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "GOENV relative", env: []string{"GOENV=env"},
			want: want{"!GOENV is not", "!GOENV is not", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "unreadable go env file", files: map[string]string{".config/go/env": "DIR"},
			want: want{"!cannot read the go env file", "!cannot read the go env file", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "GOPATH list", env: []string{"GOPATH=/p1:/p2"},
			want: want{"@/.cache/go-build", "/p1/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "GOPATH from go env file", files: map[string]string{".config/go/env": "GOPATH=/gp\n"},
			want: want{"@/.cache/go-build", "/gp/pkg/mod", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "GOMODCACHE beats GOPATH", env: []string{"GOPATH=/gp"}, files: map[string]string{".config/go/env": "GOMODCACHE=/mc\n"},
			want: want{"@/.cache/go-build", "/mc", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "GOPATH relative", env: []string{"GOPATH=rel:/p2"},
			want: want{"@/.cache/go-build", "!GOPATH's first entry", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "~/go is a GOROOT", files: map[string]string{"go/src/runtime": "DIR"},
			want: want{"@/.cache/go-build", "!GOROOT", "@/.npm/_cacache", "@/.cache/pip"}},
		{name: "npm env", env: []string{"npm_config_cache=/n"}, want: want{"@/.cache/go-build", "@/go/pkg/mod", "/n/_cacache", "@/.cache/pip"}},
		{name: "npm env any case, later wins, empty skipped", env: []string{"npm_config_cache=/n", "NPM_CONFIG_CACHE=~/upper", "Npm_Config_Cache="},
			want: want{"@/.cache/go-build", "@/go/pkg/mod", "@/upper/_cacache", "@/.cache/pip"}},
		{name: "npm relative", env: []string{"npm_config_cache=n"}, want: want{"@/.cache/go-build", "@/go/pkg/mod", "!npm's cache", "@/.cache/pip"}},
		{name: "pip env", env: []string{"PIP_CACHE_DIR=~/pc"}, want: want{"@/.cache/go-build", "@/go/pkg/mod", "@/.npm/_cacache", "@/pc"}},
		{name: "pip env case", env: []string{"PIP_cache_dir=/pc", "pip_cache_dir=/ignored"},
			want: want{"@/.cache/go-build", "@/go/pkg/mod", "@/.npm/_cacache", "/pc"}},
		{name: "pip relative or empty", env: []string{"PIP_CACHE_DIR="}, want: want{"@/.cache/go-build", "@/go/pkg/mod", "@/.npm/_cacache", "!PIP_CACHE_DIR"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			h := func(s string) string { return strings.ReplaceAll(s, "@", home) }
			for rel, content := range tc.files {
				p := filepath.Join(home, rel)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if content == "DIR" {
					os.MkdirAll(p, 0o755)
					continue
				}
				if err := os.WriteFile(p, []byte(h(content)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var env []string
			for _, kv := range tc.env {
				env = append(env, h(kv))
			}
			got := toolCaches(env, home)
			for i, w := range []string{tc.want.goBuild, tc.want.goMod, tc.want.npm, tc.want.pip} {
				c := got[i]
				if why, ok := strings.CutPrefix(w, "!"); ok {
					if c.host != "" || !strings.Contains(c.why, why) {
						t.Errorf("%s: got host %q why %q, want none because %q", c.name, c.host, c.why, why)
					}
				} else if c.host != h(w) || c.why != "" {
					t.Errorf("%s: got host %q why %q, want %q", c.name, c.host, c.why, h(w))
				}
			}
		})
	}
}

// TestWithCacheEnv checks every spelling of a cache setting is replaced.
func TestWithCacheEnv(t *testing.T) {
	env := withCacheEnv([]string{"NPM_CONFIG_CACHE=/host/npm", "PIP_Cache_Dir=/host/pip", "GOCACHE=/host/go", "KEEP=1",
		"NPM_CONFIG_STORE_DIR=/host/pnpm", "pnpm_config_store_dir=/host/pnpm"}, "/c")
	want := []string{"KEEP=1", "XDG_CACHE_HOME=/c/xdg", "GOCACHE=/c/go-build", "GOMODCACHE=/c/go-mod", "npm_config_cache=/c/npm", "PIP_CACHE_DIR=/c/pip",
		"npm_config_store_dir=/c/pnpm-store"}
	if !slices.Equal(env, want) {
		t.Fatalf("got %q\nwant %q", env, want)
	}
}
