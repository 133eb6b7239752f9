package policy

import (
	"strings"
	"testing"
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
