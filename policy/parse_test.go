package policy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want func(p *Policy) // edits Default() into the expected result
	}{
		{"empty", "", func(p *Policy) {}},
		{"comments only", "# nothing\n\n", func(p *Policy) {}},
		{"full", `
profile = "strict"
isolation = "namespaces"

[filesystem]
writable = ["/srv/data", "~/scratch/"]
secrets = ["~/.config/*.key", "/opt/secret"]
allow_secrets = ["~/.npmrc"]
home_allow = ["~/.config/nvim"]
protected = ["./.myhooks", "tools/hooks/"]

[env]
allow = ["GITHUB_TOKEN"]
deny = ["MY_*"]

[limits]
pids = 512
memory = "2GiB"
file_size = "100MB"
tmp_size = 268435456
`, func(p *Policy) {
			p.Profile = "strict"
			p.Isolation = "namespaces"
			p.Filesystem = Filesystem{
				Writable:     []string{"/srv/data", "~/scratch"},
				Secrets:      []string{"~/.config/*.key", "/opt/secret"},
				AllowSecrets: []string{"~/.npmrc"},
				HomeAllow:    []string{"~/.config/nvim"},
				Protected:    []string{".myhooks", "tools/hooks"},
			}
			p.Env = Env{Allow: []string{"GITHUB_TOKEN"}, Deny: []string{"MY_*"}}
			p.Limits = Limits{Pids: 512, Memory: 2 * GiB, FileSize: 100_000_000, TmpSize: 256 * MiB, LayerSize: 4 * GiB, CacheSize: 20 * GiB}
		}},
		{"partial keeps base", "[limits]\npids = 100\n", func(p *Policy) { p.Limits.Pids = 100 }},
		{"dotted keys", "limits.memory = \"1G\"\nfilesystem.writable = [\"/w\"]\n", func(p *Policy) {
			p.Limits.Memory = GiB
			p.Filesystem.Writable = []string{"/w"}
		}},
		{"inline table", "limits = { tmp_size = \"64M\" }\n", func(p *Policy) { p.Limits.TmpSize = 64 * MiB }},
		{"quoted key", "\"isolation\" = \"landlock-only\"\n", func(p *Policy) { p.Isolation = "landlock-only" }},
		{"tilde alone", "[filesystem]\nwritable = [\"~\", \"/a/../b\"]\n", func(p *Policy) {
			p.Filesystem.Writable = []string{"~", "/b"}
		}},
		{"empty list", "[env]\ndeny = []\n", func(p *Policy) { p.Env.Deny = []string{} }},
		{"root glob secret", "[filesystem]\nsecrets = [\"/etc/ssh/ssh_host_*_key\"]\nallow_secrets = [\"/etc/shadow\"]\n", func(p *Policy) {
			p.Filesystem.Secrets = []string{"/etc/ssh/ssh_host_*_key"}
			p.Filesystem.AllowSecrets = []string{"/etc/shadow"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("p.toml", []byte(tt.doc), Default())
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := Default()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		doc    string
		prefix string // exact FILE:LINE: KEY: prefix
		msg    string // substring of the message
	}{
		{"unknown top-level key", "profile = \"default\"\n\nfrobnicate = true\n", "bad.toml:3: frobnicate: ", "unknown key"},
		{"unknown table", "[limitz]\npids = 5\n", "bad.toml:1: limitz: ", "unknown table"},
		{"unknown nested key", "[limits]\nfoo = 1\n", "bad.toml:2: limits.foo: ", "unknown key (valid keys in [limits]: pids, memory, file_size, tmp_size, layer_size, cache_size)"},
		{"unknown nested table", "[limits.x]\ny = 1\n", "bad.toml:1: limits.x: ", "unknown table"},
		{"wrong type", "[limits]\npids = \"x\"\n", "bad.toml:2: limits.pids: ", "expected an integer, got a TOML string"},
		{"float pids", "[limits]\n\npids = 1.5\n", "bad.toml:3: limits.pids: ", "expected an integer, got a TOML float"},
		{"pids overflow", "[limits]\npids = 99999999999999999999\n", "bad.toml:2: limits.pids: ", "too large"},
		{"string for list", "[filesystem]\nwritable = \"/x\"\n", "bad.toml:2: filesystem.writable: ", "expected an array of strings, got a TOML string"},
		{"int in list", "[env]\ndeny = [\"A\", 1]\n", "bad.toml:2: env.deny: ", "expected an array of strings, got an array containing a TOML integer"},
		{"table for string", "profile.x = 1\n", "bad.toml:1: profile: ", "expected a string, got a TOML table"},
		{"value for table", "limits = 5\n", "bad.toml:1: limits: ", "expected a table, got a TOML integer"},
		{"array table", "[[limits]]\npids = 100\n", "bad.toml:1: limits: ", "expected a table, got an array of tables"},
		{"bad size unit", "[limits]\nmemory = \"12XB\"\n", "bad.toml:2: limits.memory: ", `invalid size "12XB": unknown unit "XB"`},
		{"bad size number", "[limits]\nmemory = \"lots\"\n", "bad.toml:2: limits.memory: ", `invalid size "lots"`},
		{"size overflow", "[limits]\nmemory = \"99999999999TiB\"\n", "bad.toml:2: limits.memory: ", "too large"},
		{"negative size", "[limits]\nmemory = -5\n", "bad.toml:2: limits.memory: ", "must not be negative"},
		{"bool size", "[limits]\nfile_size = true\n", "bad.toml:2: limits.file_size: ", `expected a size string such as "8GiB", got a TOML boolean`},
		{"memory below minimum", "[limits]\nmemory = \"8MiB\"\n", "bad.toml:2: limits.memory: ", "must be at least 16MiB (got 8MiB)"},
		{"pids below minimum", "[limits]\npids = 15\n", "bad.toml:2: limits.pids: ", "must be at least 16 (got 15)"},
		{"tmp below minimum", "limits = { tmp_size = \"1KiB\" }\n", "bad.toml:1: limits.tmp_size: ", "must be at least 1MiB"},
		{"bad profile", "\nprofile = \"paranoid\"\n", "bad.toml:2: profile: ", `invalid value "paranoid" (want "default", "strict")`},
		{"bad isolation", "isolation = \"none\"\n", "bad.toml:1: isolation: ", `invalid value "none"`},
		{"relative writable", "[filesystem]\nwritable = [\n  \"/ok\",\n  \"build\",\n]\n", "bad.toml:4: filesystem.writable: ", `"build" must be an absolute path or start with "~/"`},
		{"empty writable", "[filesystem]\nwritable = [\"\"]\n", "bad.toml:2: filesystem.writable: ", "empty path"},
		{"protected dotdot", "[filesystem]\nprotected = [\"a/../../etc\"]\n", "bad.toml:2: filesystem.protected: ", `must not contain ".."`},
		{"protected absolute", "[filesystem]\nprotected = [\"/etc\"]\n", "bad.toml:2: filesystem.protected: ", "must be relative to the workspace"},
		{"protected dot", "[filesystem]\nprotected = [\"./\"]\n", "bad.toml:2: filesystem.protected: ", "not the workspace itself"},
		{"tilde user", "[filesystem]\nsecrets = [\"~bob/.ssh\"]\n", "bad.toml:2: filesystem.secrets: ", `the "~bob" form is not supported`},
		{"tilde user home_allow", "[filesystem]\nhome_allow = [\"~root\"]\n", "bad.toml:2: filesystem.home_allow: ", `the "~root" form is not supported`},
		{"glob in dir", "[filesystem]\nsecrets = [\"/a/*/b\"]\n", "bad.toml:2: filesystem.secrets: ", "only the last path element may be a glob"},
		{"bad glob", "[filesystem]\nsecrets = [\"/a/[\"]\n", "bad.toml:2: filesystem.secrets: ", "invalid glob pattern"},
		{"allow part of a built-in secret", "[filesystem]\nallow_secrets = [\"~/.ssh/id_rsa\"]\n", "bad.toml:2: filesystem.allow_secrets: ", "inside the built-in secret entry \"~/.ssh\""},
		{"allow a glob", "[filesystem]\nallow_secrets = [\"~/Documents/*.kdbx\"]\n", "bad.toml:2: filesystem.allow_secrets: ", "not a glob"},
		{"allow own state", "[filesystem]\nallow_secrets = [\"~/.local/state/sandboxd\"]\n", "bad.toml:2: filesystem.allow_secrets: ", "cannot be allowed"},
		{"env with equals", "[env]\nallow = [\"A=B\"]\n", "bad.toml:2: env.allow: ", "must not contain '='"},
		{"duplicate key", "[limits]\npids = 20\npids = 30\n", "bad.toml:3: limits.pids: ", ""},
		{"duplicate table", "[limits]\npids = 20\n[limits]\n", "bad.toml:3: limits: ", "already exists"},
		{"syntax error", "profile = \"default\"\n\n[limits\n", "bad.toml:3: syntax error: ", "expected ']'"},
		{"syntax error value", "[env]\nallow = [\"A\"\n", "bad.toml:2: syntax error: ", "array is incomplete"},
		{"unterminated string", "profile = \"abc\n", "bad.toml:1: syntax error: ", ""},
		{"negative user call ceiling", "[review]\nmax_user_calls_per_hour = -1\n", "bad.toml:2: review.max_user_calls_per_hour: ", "must be between 0 and 1099511627776 (got -1)"},
		{"huge user token ceiling", "[review]\nmax_user_tokens_per_hour = 1099511627777\n", "bad.toml:2: review.max_user_tokens_per_hour: ", "must be between 0 and 1099511627776"},
		{"string user ceiling", "[review]\nmax_user_calls_per_hour = \"600\"\n", "bad.toml:2: review.max_user_calls_per_hour: ", "expected an integer"},
		{"control chars escaped", "\"\\u001b[2J\" = 1\n", `bad.toml:1: "\x1b[2J": `, "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.toml", []byte(tt.doc), Default())
			if err == nil {
				t.Fatal("Parse succeeded, want error")
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error %q\nwant prefix %q", err, tt.prefix)
			}
			if !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("message %q does not contain %q", pe.Msg, tt.msg)
			}
			if pe.Line <= 0 || pe.File != "bad.toml" {
				t.Errorf("File %q Line %d", pe.File, pe.Line)
			}
			if strings.ContainsAny(err.Error(), "\x1b\n") {
				t.Errorf("error contains control characters: %q", err)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "f", Line: 3, Key: "limits.pids", Msg: "m"}, "f:3: limits.pids: m"},
		{Error{File: "f", Line: 3, Msg: "m"}, "f:3: m"},
		{Error{File: "f", Msg: "m"}, "f: m"},
		{Error{File: "f", Key: "k", Msg: "m"}, "f: k: m"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got %q want %q", got, tt.want)
		}
	}
}

func TestParseDoesNotAliasBase(t *testing.T) {
	base := Default()
	base.Filesystem.Writable = []string{"/a", "/b"}
	got, err := Parse("p.toml", []byte("[filesystem]\nwritable = [\"/c\"]\n"), base)
	if err != nil {
		t.Fatal(err)
	}
	got.Filesystem.Secrets = append(got.Filesystem.Secrets, "/x")
	if !slices.Equal(base.Filesystem.Writable, []string{"/a", "/b"}) {
		t.Errorf("base modified: %q", base.Filesystem.Writable)
	}
	got2, err := Parse("p.toml", nil, base)
	if err != nil {
		t.Fatal(err)
	}
	got2.Filesystem.Writable[0] = "/changed"
	if base.Filesystem.Writable[0] != "/a" {
		t.Error("result shares its slices with base")
	}
}

func TestKeySet(t *testing.T) {
	doc := "profile = \"strict\"\n[filesystem]\nwritable = []\n\n[env]\ndeny = [\n \"A\",\n \"B\",\n]\n"
	_, keys, err := ParseWithKeys("ws.toml", []byte(doc), Default())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"env.deny", "filesystem.writable", "profile"}; !slices.Equal(keys.Keys(), want) {
		t.Errorf("Keys() = %q, want %q", keys.Keys(), want)
	}
	if keys.Has("filesystem.secrets") || keys.Has("limits.pids") {
		t.Error("absent keys reported present")
	}
	for key, line := range map[string]int{"profile": 1, "filesystem.writable": 3, "env.deny": 6} {
		if got := keys.Line(key); got != line {
			t.Errorf("Line(%s) = %d, want %d", key, got, line)
		}
	}
	if got := keys.m["env.deny"].elemLine(1); got != 8 {
		t.Errorf("line of env.deny[1] = %d, want 8", got)
	}
}

func TestSize(t *testing.T) {
	good := []struct {
		in   string
		want Size
	}{
		{"0", 0}, {"123", 123}, {"1B", 1}, {"8GiB", 8 * GiB}, {"8G", 8 * GiB}, {"512M", 512 * MiB},
		{"3KiB", 3 * KiB}, {"2K", 2 * KiB}, {"1TiB", TiB}, {"1T", TiB}, {"1KB", 1000}, {"5MB", 5e6},
		{"2GB", 2e9}, {"1TB", 1e12}, {" 16 MiB ", 16 * MiB},
	}
	for _, tt := range good {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "GiB", "1.5GiB", "-1", "12XB", "1gib", "1 G B", "9223372036854775808", "8388608TiB", "0x10"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
	for s, want := range map[Size]string{0: "0B", 1000: "1000B", 8 * GiB: "8GiB", 1536 * KiB: "1536KiB", 16 * MiB: "16MiB", 2 * TiB: "2TiB"} {
		if got := s.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(s), got, want)
		}
		b, _ := s.MarshalText()
		var back Size
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("round trip of %d: %d, %v", int64(s), back, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	d := Default()
	if d.Profile != "default" || d.Isolation != "auto" ||
		d.Limits != (Limits{Pids: 4096, Memory: 8 * GiB, FileSize: 16 * GiB, TmpSize: GiB, LayerSize: 4 * GiB, CacheSize: 20 * GiB}) {
		t.Errorf("Default() = %+v", d)
	}
	if key, msg := validatePolicy(ruleSchema(), &d); msg != "" {
		t.Errorf("Default() invalid: %s: %s", key, msg)
	}
	// The user's hourly ceiling is what every session shared before the
	// caps were per session; a session's hourly caps sit below it, so
	// several sessions fit under it, and at most at its whole-life cap.
	if r := d.Review; r.MaxUserCallsPerHour != 600 || r.MaxUserTokensPerHour != 4_000_000 ||
		r.MaxCallsPerHour >= r.MaxUserCallsPerHour || r.MaxTokensPerHour >= r.MaxUserTokensPerHour ||
		r.MaxCallsPerHour > r.MaxCallsPerSession || r.MaxTokensPerHour > r.MaxTokensPerSession {
		t.Errorf("review caps %+v", r)
	}
	// The built-in lists are already in normal form.
	for _, s := range DefaultSecrets(true) {
		if n, msg := normSecret(s); msg != "" || n != s {
			t.Errorf("secret %q: %q %s", s, n, msg)
		}
	}
	for _, s := range DefaultHomeAllow() {
		if n, msg := normPathSpec(s); msg != "" || n != s || s == "~" {
			t.Errorf("home allow %q: %q %s", s, n, msg)
		}
	}
	for _, s := range DefaultProtected() {
		if n, msg := normProtected(s); msg != "" || n != s {
			t.Errorf("protected %q: %q %s", s, n, msg)
		}
	}
	for _, s := range DefaultEnvDeny() {
		if _, msg := normEnvPattern(s); msg != "" {
			t.Errorf("env deny %q: %s", s, msg)
		}
	}
	for _, s := range selfSecrets() {
		if !slices.Contains(DefaultSecrets(true), s) {
			t.Errorf("self secret %q not in DefaultSecrets(true)", s)
		}
	}
	if slices.Contains(DefaultHomeAllow(), "~/.cache/go-build") {
		t.Error("home allow contains ~/.cache/go-build")
	}
	if slices.Contains(DefaultSecrets(false), "/etc/shadow") || !slices.Contains(DefaultSecrets(true), "/etc/shadow") {
		t.Error("/etc/shadow must be a root-only secret")
	}
	// Each call returns a fresh slice.
	a := DefaultSecrets(false)
	a[0] = "changed"
	if DefaultSecrets(false)[0] != "~/.ssh" {
		t.Error("DefaultSecrets shares state between calls")
	}
}

func TestDuplicateKeyInTable(t *testing.T) {
	for doc, prefix := range map[string]string{
		"[limits]\npids = 20\npids = 30\n":             "d.toml:3: limits.pids: ",
		"[limits]\nlimits = 1\nlimits = 2\n":           "d.toml:3: limits.limits: ",
		"profile = \"strict\"\nprofile = \"strict\"\n": "d.toml:2: profile: ",
		"limits = { pids = 20, pids = 30 }\n":          "d.toml:1: limits",
	} {
		_, err := Parse("d.toml", []byte(doc), Default())
		if err == nil || !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("%q: error %v, want prefix %q", doc, err, prefix)
		}
	}
}

func TestKeysAreCaseSensitive(t *testing.T) {
	for doc, want := range map[string]string{
		"Profile = \"strict\"\n":              `c.toml:1: Profile: unknown key (keys are case-sensitive; did you mean "profile"?)`,
		"[filesYstem]\nprotected = [\"x\"]\n": `c.toml:1: filesYstem: unknown key (keys are case-sensitive; did you mean "filesystem"?)`,
		"[limits]\n\nPIDS = 100\n":            `c.toml:3: limits.PIDS: unknown key (keys are case-sensitive; did you mean "pids"?)`,
		"limits = { Tmp_Size = \"2MiB\" }\n":  `c.toml:1: limits.Tmp_Size: unknown key (keys are case-sensitive; did you mean "tmp_size"?)`,
	} {
		_, err := Parse("c.toml", []byte(doc), Default())
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v\nwant %s", doc, err, want)
		}
	}
}
