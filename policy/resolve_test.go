package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	home := t.TempDir()
	d := Dirs{Home: home, ConfigDir: filepath.Join(home, "cfg"), StateDir: filepath.Join(home, "state")}

	t.Run("tilde expansion and defaults", func(t *testing.T) {
		p := Default()
		p.Filesystem.Writable = []string{"~/work", "/srv//data/", "~"}
		p.Filesystem.Secrets = []string{"~/.myapp/token"}
		p.Filesystem.Protected = []string{"tools/hooks", ".git"}
		p.Env.Deny = []string{"MY_*"}
		r, err := p.Resolve(d)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{filepath.Join(home, "work"), "/srv/data", home}; !slices.Equal(r.Writable, want) {
			t.Errorf("Writable = %q, want %q", r.Writable, want)
		}
		for _, s := range []string{
			filepath.Join(home, ".ssh"),
			filepath.Join(home, ".myapp/token"),
			filepath.Join(home, "cfg/sandboxd"),
			filepath.Join(home, "state/sandboxd"),
			filepath.Join(home, ".local/share/sandboxd"),
			filepath.Join(home, ".config/sandboxd"),
		} {
			if !slices.Contains(r.Secrets, s) {
				t.Errorf("Secrets lacks %s", s)
			}
		}
		for _, s := range r.Secrets {
			if !filepath.IsAbs(s) || filepath.Clean(s) != s {
				t.Errorf("secret %q is not absolute and clean", s)
			}
		}
		if slices.Contains(r.Secrets, "/etc/shadow") {
			t.Error("non-root Secrets contains /etc/shadow")
		}
		if r.HomeAllow != nil {
			t.Errorf("HomeAllow = %q for the default profile", r.HomeAllow)
		}
		if len(r.Protected) != len(DefaultProtected())+1 || r.Protected[len(r.Protected)-1] != "tools/hooks" {
			t.Errorf("Protected = %q", r.Protected)
		}
		if !slices.Contains(r.EnvDeny, "SANDBOXD_*") || r.EnvDeny[len(r.EnvDeny)-1] != "MY_*" {
			t.Errorf("EnvDeny = %q", r.EnvDeny)
		}
		if r.Limits != p.Limits || r.Profile != "default" || r.Isolation != "auto" {
			t.Errorf("got %+v", r)
		}
	})

	t.Run("config and state default to home", func(t *testing.T) {
		r, err := Default().Resolve(Dirs{Home: home})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{filepath.Join(home, ".config/sandboxd"), filepath.Join(home, ".local/state/sandboxd")} {
			if !slices.Contains(r.Secrets, s) {
				t.Errorf("Secrets lacks %s", s)
			}
		}
	})

	t.Run("root adds /etc/shadow", func(t *testing.T) {
		rd := d
		rd.Root = true
		r, err := Default().Resolve(rd)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"/etc/shadow", "/etc/gshadow-", "/etc/ssh/ssh_host_*_key", "/etc/sandboxd", "/var/lib/sandboxd"} {
			if !slices.Contains(r.Secrets, s) {
				t.Errorf("root Secrets lacks %s", s)
			}
		}
	})

	t.Run("allow_secrets removes", func(t *testing.T) {
		p := Default()
		p.Filesystem.AllowSecrets = []string{"~/.npmrc", "/etc/shadow"}
		r, err := p.Resolve(Dirs{Home: home, Root: true})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(r.Secrets, filepath.Join(home, ".npmrc")) || slices.Contains(r.Secrets, "/etc/shadow") {
			t.Errorf("allowed secrets still denied: %q", r.Secrets)
		}
		if !slices.Contains(r.Secrets, filepath.Join(home, ".pypirc")) || !slices.Contains(r.Secrets, "/etc/gshadow") {
			t.Error("other secrets were dropped")
		}
	})

	t.Run("symlinked secret adds both forms", func(t *testing.T) {
		real := t.TempDir()
		if err := os.MkdirAll(filepath.Join(real, "ssh"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(real, "ssh"), filepath.Join(home, ".ssh")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(home, "keys")); err != nil {
			t.Fatal(err)
		}
		p := Default()
		p.Filesystem.Secrets = []string{"~/keys/*.pem"}
		r, err := p.Resolve(d)
		if err != nil {
			t.Fatal(err)
		}
		realReal, _ := filepath.EvalSymlinks(real)
		for _, s := range []string{
			filepath.Join(home, ".ssh"),
			filepath.Join(realReal, "ssh"),
			filepath.Join(home, "keys/*.pem"),
			filepath.Join(realReal, "*.pem"),
		} {
			if !slices.Contains(r.Secrets, s) {
				t.Errorf("Secrets lacks %s: %q", s, r.Secrets)
			}
		}
	})

	t.Run("strict home allow", func(t *testing.T) {
		real := t.TempDir()
		if err := os.Symlink(real, filepath.Join(home, "go")); err != nil {
			t.Fatal(err)
		}
		p := Default()
		p.Profile = "strict"
		p.Filesystem.HomeAllow = []string{"~/.config/nvim", filepath.Join(home, "proj")}
		r, err := p.Resolve(d)
		if err != nil {
			t.Fatal(err)
		}
		realReal, _ := filepath.EvalSymlinks(real)
		for _, s := range []string{realReal, filepath.Join(home, ".gitconfig"), filepath.Join(home, ".config/nvim"), filepath.Join(home, "proj")} {
			if !slices.Contains(r.HomeAllow, s) {
				t.Errorf("HomeAllow lacks %s: %q", s, r.HomeAllow)
			}
		}
		p.Filesystem.HomeAllow = []string{"/etc"}
		if _, err := p.Resolve(d); err == nil || !strings.Contains(err.Error(), "not below the home directory") {
			t.Errorf("home_allow outside home: %v", err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		cases := map[string]func(p *Policy){
			`"~bob" form is not supported`: func(p *Policy) { p.Filesystem.Writable = []string{"~bob/x"} },
			"must be an absolute path":     func(p *Policy) { p.Filesystem.Secrets = []string{"rel"} },
			`must not contain ".."`:        func(p *Policy) { p.Filesystem.Protected = []string{"../x"} },
			"profile":                      func(p *Policy) { p.Profile = "" },
			"limits.pids":                  func(p *Policy) { p.Limits.Pids = 0 },
		}
		for want, edit := range cases {
			p := Default()
			edit(&p)
			if _, err := p.Resolve(d); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("got %v, want an error containing %q", err, want)
			}
		}
		if _, err := Default().Resolve(Dirs{Home: "relative"}); err == nil {
			t.Error("relative home accepted")
		}
	})

	t.Run("does not modify the policy", func(t *testing.T) {
		p := Default()
		p.Filesystem.Writable = []string{"/a/./b"}
		if _, err := p.Resolve(d); err != nil {
			t.Fatal(err)
		}
		if p.Filesystem.Writable[0] != "/a/./b" {
			t.Error("Resolve modified its receiver")
		}
	})
}

// A secret is never quiet: no built-in quiet entry names a credential
// store or lies below one (the broker's hard denies would win anyway,
// and the entry would be noise).
func TestQuietNeverSecret(t *testing.T) {
	for _, root := range []bool{false, true} {
		for _, q := range DefaultQuiet() {
			base := strings.TrimSuffix(q.Pattern, "/**")
			for _, sec := range DefaultSecrets(root) {
				if base == sec || strings.HasPrefix(base, strings.TrimSuffix(sec, "/")+"/") || strings.HasPrefix(sec, base+"/") {
					t.Errorf("quiet entry %s overlaps the secret %s", q.Pattern, sec)
				}
			}
		}
	}
}

// TestResolveStoresEverywhere: a credential store is denied where the
// caller's XDG variables and the tool's own variable put it and at its
// default; allow_secrets, spelled at the default, drops every place.
func TestResolveStoresEverywhere(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{
		"XDG_CONFIG_HOME": "/elsewhere/cfg",
		"XDG_DATA_HOME":   "/elsewhere/data",
		"XDG_CACHE_HOME":  "/elsewhere/cache",
		"GNUPGHOME":       "/keys/gpg",
		"KUBECONFIG":      "/k/one:/k/two",
		"CARGO_HOME":      "relative/is/ignored",
	}
	d := Dirs{Home: home, Getenv: func(k string) string { return env[k] }}
	p := Default()
	r, err := p.Resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"/elsewhere/cfg/gh", filepath.Join(home, ".config/gh"),
		"/elsewhere/cfg/git/credentials", filepath.Join(home, ".config/git/credentials"),
		"/elsewhere/data/fish/fish_history", filepath.Join(home, ".local/share/fish/fish_history"),
		"/elsewhere/cache/huggingface/token", filepath.Join(home, ".cache/huggingface/token"),
		filepath.Join(home, ".local/state/lesshst"), filepath.Join(home, ".lesshst"),
		"/keys/gpg", "/k/one", "/k/two",
		filepath.Join(home, ".pgpass"), filepath.Join(home, ".my.cnf"),
	} {
		if !slices.Contains(r.Secrets, s) {
			t.Errorf("Secrets lacks %s", s)
		}
	}
	for _, s := range r.Secrets {
		if strings.Contains(s, "relative") {
			t.Errorf("a relative variable placed a secret: %s", s)
		}
	}
	p.Filesystem.AllowSecrets = []string{"~/.config/gh"}
	r, err = p.Resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"/elsewhere/cfg/gh", filepath.Join(home, ".config/gh")} {
		if slices.Contains(r.Secrets, s) {
			t.Errorf("allow_secrets ~/.config/gh left %s denied", s)
		}
	}
}
