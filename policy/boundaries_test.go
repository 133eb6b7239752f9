package policy

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/ruletext"
)

func TestBoundaryRules(t *testing.T) {
	p, err := Parse("p.toml", []byte("[boundaries]\nallow = [\"fs  write_file   /etc/hosts\", \"net connect *.pypi.org:443\"]\ndeny = [\"fs * ~/prod/**\"]\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if p.Boundaries.Allow[0] != "fs write_file /etc/hosts" || p.Boundaries.Deny[0] != "fs * ~/prod/**" {
		t.Fatalf("rules: %+v", p.Boundaries)
	}
	for _, tc := range []struct{ file, want string }{
		{"[boundaries]\nallow = [\"fs write\"]\n", "p.toml:2: boundaries.allow:"},
		{"[boundaries]\n\ndeny = [\"dbus call x\"]\n", "p.toml:3: boundaries.deny:"},
		{"[boundaries]\nask = [\"fs read relative/x\"]\n", "p.toml:2: boundaries.ask:"},
	} {
		_, err := Parse("p.toml", []byte(tc.file), Default())
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want prefix %q", tc.file, err, tc.want)
		}
	}
}

// A workspace policy may add deny and ask rules but never an allow rule.
func TestBoundaryRulesTighten(t *testing.T) {
	user, err := Parse("u.toml", []byte("[boundaries]\nallow = [\"fs write_file /etc/hosts\"]\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	ok := "[boundaries]\ndeny = [\"fs * /opt/**\"]\nask = [\"net connect *:22\"]\nallow = []\n"
	ws, keys, err := ParseWithKeys("ws.toml", []byte(ok), user)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Tighten(user, ws, "ws.toml", keys)
	if err != nil {
		t.Fatalf("tightening rejected: %v", err)
	}
	if len(got.Boundaries.Allow) != 0 || len(got.Boundaries.Deny) != 1 || len(got.Boundaries.Ask) != 1 {
		t.Fatalf("merged: %+v", got.Boundaries)
	}
	bad := "[boundaries]\nallow = [\"fs write_file /etc/hosts\", \"fs write_file /etc/passwd\"]\n"
	ws, keys, err = ParseWithKeys("ws.toml", []byte(bad), user)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Tighten(user, ws, "ws.toml", keys); err == nil || !strings.Contains(err.Error(), "boundaries.allow") {
		t.Fatalf("a workspace allow rule was accepted: %v", err)
	}
}

// A backslash escapes white space in a rule's path (the broker reads the
// same fields); a malformed pattern is refused at its line.
func TestBoundaryRuleEscapes(t *testing.T) {
	file := "[boundaries]\nallow = [\"fs  write_file  /tmp/my\\\\ file\\\\*\", \"fs read ~/a\\\\\\tb\"]\n"
	p, err := Parse("p.toml", []byte(file), Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Boundaries.Allow; got[0] != `fs write_file /tmp/my\ file\*` || got[1] != "fs read ~/a\\\tb" {
		t.Fatalf("rules: %q", got)
	}
	for _, bad := range []string{`fs read /a\\`, `fs read /a\\/b`, `fs read /a[`, `net connect a\\ b`} {
		_, err := Parse("p.toml", []byte("[boundaries]\ndeny = [\""+bad+"\"]\n"), Default())
		if err == nil || !strings.HasPrefix(err.Error(), "p.toml:2: boundaries.deny:") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A home holding wildcards keeps the quiet list's entries in that home.
func TestQuietHomeIsAName(t *testing.T) {
	r, err := Default().Resolve(Dirs{Home: "/home/*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range r.Quiet {
		if strings.HasSuffix(q.Pattern, "/.toprc") {
			if !ruletext.Match(q.Pattern, "/home/*/.toprc") || ruletext.Match(q.Pattern, "/home/u/.toprc") {
				t.Fatalf("quiet pattern %q", q.Pattern)
			}
			return
		}
	}
	t.Fatal("no ~/.toprc on the quiet list")
}
