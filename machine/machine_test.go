package machine

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

// fakeIDs is a user and group database of the test's own.
type fakeIDs struct{}

func (fakeIDs) UserID(name string) (int, error) {
	switch name {
	case "alice":
		return 1001, nil
	case "bob":
		return 1002, nil
	}
	return 0, errors.New("unknown user")
}

func (fakeIDs) GroupID(name string) (int, error) {
	if name == "dev" {
		return 2000, nil
	}
	return 0, errors.New("unknown group")
}

// TestParseErrors: every error names the file, the line and the key.
func TestParseErrors(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"[access]\nuids = [-1]\n", `m.toml:2: access.uids: -1 is not a uid`},
		{"[access]\nusers = [\"alice\", \"carol\"]\n", `m.toml:2: access.users: no user "carol" on this machine`},
		{"[access]\ngroups = [\"ops\"]\n", `m.toml:2: access.groups: no group "ops" on this machine`},
		{"[access]\nuser = [\"alice\"]\n", `m.toml:2: access.user: unknown key (valid keys in [access]: uids, users, gids, groups)`},
		{"\n[policy.limits]\npids = 8\n", `m.toml:3: policy.limits.pids: must be at least 16 (got 8)`},
		{"[policy.review]\nmodel = \"m\"\n", `m.toml:2: policy.review.model: the machine's model reviewer is set in [review] (model, base_url, key_file), not in [policy]`},
		{"[review]\nkey_file = \"/etc/sandboxd/key\"\n", `m.toml:1: review: a machine reviewer needs a model`},
		{"[review]\nmodel = \"m\"\nbase_url = \"ftp://x\"\n", `m.toml:3: review.base_url: invalid value for the endpoint at "x", the rest not shown as it may hold credentials (want an http or https URL such as https://api.openai.com/v1, with no credentials, query or fragment in it)`},
		// The refused credentials are not quoted: the message reaches the
		// journal.
		{"[review]\nmodel = \"m\"\nbase_url = \"https://op:MACHPASS@llm.internal/v1\"\n", `m.toml:3: review.base_url: invalid value for the endpoint at "llm.internal", the rest not shown as it may hold credentials (want an http or https URL such as https://api.openai.com/v1, with no credentials, query or fragment in it)`},
		{"[review]\nmodel = \"m\"\nkey_file = \"keys/m\"\n", `m.toml:3: review.key_file: "keys/m" is not an absolute path`},
		{"[review.users.carol]\nmodel = \"m\"\n", `m.toml:1: review.users.carol: no user "carol" on this machine`},
		{"[review.users.alice]\nkey_file = \"/k\"\n", `m.toml:1: review.users.alice: a reviewer needs a model (here or in [review])`},
		{"[review.users.alice]\nmodel = \"m\"\n[review.users.1001]\nmodel = \"n\"\n", `m.toml:1: review.users.alice: uid 1001 has another [review.users] table`},
		{"[review.users.alice]\nmodle = \"m\"\n", `m.toml:2: review.users.alice.modle: unknown key (valid keys in [review.users.alice]: model, base_url, key_file)`},
		{"[limits]\nmax_execs = 0\n", `m.toml:2: limits.max_execs: must be between 1 and 4096 (got 0)`},
		{"[limits]\nmax_questions = \"5\"\n", `m.toml:2: limits.max_questions: expected an integer, got a TOML string`},
		{"[limits]\nmax_held_bytes = \"lots\"\n", `m.toml:2: limits.max_held_bytes: invalid size "lots" (want a size such as "1GiB")`},
		{"[limits]\nmax_held_bytes = 1024\n", `m.toml:2: limits.max_held_bytes: must be at least 1MiB (got 1KiB)`},
		{"[users]\n", `m.toml:1: users: unknown table (valid top-level keys: access, policy, review, limits)`},
	}
	for _, tt := range tests {
		_, err := Parse("m.toml", []byte(tt.doc), fakeIDs{})
		var pe *policy.Error
		if !errors.As(err, &pe) || err.Error() != tt.want {
			t.Errorf("%q:\ngot  %v\nwant %s", tt.doc, err, tt.want)
		}
	}
}

// TestParse: a whole configuration.
func TestParse(t *testing.T) {
	doc := `[access]
uids = [1003]
users = ["alice"]
groups = ["dev"]
gids = [2001]

[policy]
profile = "strict"
[policy.limits]
pids = 512

[review]
model = "gpt-test"
base_url = "https://models.example/v1"
key_file = "/etc/sandboxd/keys/machine"
[review.users.bob]
key_file = "/etc/sandboxd/keys/bob"
[review.users.1003]
model = "other"
base_url = "http://127.0.0.1:9/v1"

[limits]
max_execs = 4
max_questions = 2
max_held = 3
max_held_bytes = "64MiB"
`
	c, err := Parse("m.toml", []byte(doc), fakeIDs{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.UIDs, []int{1003, 1001}) || !reflect.DeepEqual(c.GIDs, []int{2001, 2000}) {
		t.Errorf("access: %v %v", c.UIDs, c.GIDs)
	}
	if c.Policy == nil || c.Policy.Policy.Profile != "strict" || c.Policy.Policy.Limits.Pids != 512 || !c.Policy.Set.Has("limits.pids") || c.Policy.Set.Has("isolation") {
		t.Errorf("policy: %+v", c.Policy)
	}
	if (c.Limits != Limits{MaxExecs: 4, MaxQuestions: 2, MaxHeld: 3, MaxHeldBytes: 64 << 20}) {
		t.Errorf("limits: %+v", c.Limits)
	}
	for uid, want := range map[int]Reviewer{
		1002: {Model: "gpt-test", BaseURL: "https://models.example/v1", KeyFile: "/etc/sandboxd/keys/bob"},
		1003: {Model: "other", BaseURL: "http://127.0.0.1:9/v1", KeyFile: "/etc/sandboxd/keys/machine"},
		1001: {Model: "gpt-test", BaseURL: "https://models.example/v1", KeyFile: "/etc/sandboxd/keys/machine"},
	} {
		got, ok := c.ReviewerFor(uid)
		got.at, got.line = "", 0
		if !ok || got != want {
			t.Errorf("uid %d: %+v %v, want %+v", uid, got, ok, want)
		}
	}
	// Without a machine reviewer, only the users named have one, on
	// OpenAI's endpoint unless they name another.
	c, err = Parse("m.toml", []byte("[review.users.alice]\nmodel = \"m\"\n"), fakeIDs{})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := c.ReviewerFor(1001); !ok || r.BaseURL != OpenAIBaseURL {
		t.Errorf("alice: %+v %v", r, ok)
	}
	if _, ok := c.ReviewerFor(1002); ok {
		t.Error("bob has a machine reviewer")
	}
}

// TestAllows: the access table; root always; no table, everyone.
func TestAllows(t *testing.T) {
	c := &Config{UIDs: []int{1001}, GIDs: []int{2000}}
	tests := []struct {
		uid, gid int
		groups   []int
		want     bool
	}{
		{0, 0, nil, true},
		{1001, 100, nil, true},
		{1002, 2000, nil, true},
		{1002, 100, []int{5, 2000}, true},
		{1002, 100, []int{5}, false},
		{999, 995, nil, false},
	}
	for _, tt := range tests {
		if got := c.Allows(tt.uid, tt.gid, tt.groups); got != tt.want {
			t.Errorf("Allows(%d, %d, %v) = %v", tt.uid, tt.gid, tt.groups, got)
		}
	}
	if !(&Config{}).Allows(999, 995, nil) || !(*Config)(nil).Allows(999, 995, nil) {
		t.Error("no [access]: someone was refused")
	}
}

// TestReviewerNeverPrintsKey: a reviewer printed or logged leaves its
// key out.
func TestReviewerNeverPrintsKey(t *testing.T) {
	r := Reviewer{Model: "m", BaseURL: "https://x/v1", KeyFile: "/k", Key: "sk-machine-canary"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("reviewer", "r", r)
	for _, s := range []string{fmt.Sprint(r), fmt.Sprintf("%v %s", r, r), b.String()} {
		if strings.Contains(s, "canary") {
			t.Errorf("the key was printed: %s", s)
		}
	}
}

// rootDir is a directory of root's for Load's tests, outside /tmp (whose
// sticky, world-writable directory Load refuses, as it should).
func rootDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Load's checks need files of root's")
	}
	d, err := os.MkdirTemp("/var/lib", "sandboxd-machine-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestLoad: the file and its key files must be root's, in directories
// only root may write; a key file root's alone.
func TestLoad(t *testing.T) {
	dir := rootDir(t)
	conf, key := filepath.Join(dir, "sandboxd.toml"), filepath.Join(dir, "key")
	write := func(p, s string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, 0, 0)
	}
	doc := "[review]\nmodel = \"m\"\nkey_file = \"" + key + "\"\n"
	write(conf, doc, 0o644)
	write(key, "sk-machine-key\n", 0o600)
	c, err := Load(conf, true, fakeIDs{})
	if err != nil || c.Reviewer == nil || c.Reviewer.Key != "sk-machine-key" {
		t.Fatalf("Load: %v %+v", err, c)
	}
	if c, err := Load(filepath.Join(dir, "none.toml"), false, fakeIDs{}); c != nil || err != nil {
		t.Errorf("an absent default: %v %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "none.toml"), true, fakeIDs{}); err == nil || !strings.Contains(err.Error(), "none.toml: the machine configuration cannot be used (no such file or directory)") {
		t.Errorf("an absent --config: %v", err)
	}
	refused := []struct {
		name  string
		setup func()
		want  string
	}{
		{"config writable by others", func() { os.Chmod(conf, 0o666) }, conf + ": the machine configuration cannot be used: it may be written by others than root (mode 0666)"},
		{"config of another user", func() { os.Chown(conf, 999, 0) }, conf + ": the machine configuration cannot be used: it is owned by uid 999, not root"},
		{"directory writable by others", func() { os.Chmod(dir, 0o777) }, conf + ": the machine configuration cannot be used: its directory " + dir + " may be written by others than root (mode 0777)"},
		{"key readable by others", func() { os.Chmod(key, 0o640) }, conf + ":3: review.key_file: the key file " + key + " cannot be used: it may be read by others than root (mode 0640; want 0600 or stricter)"},
		{"key of another user", func() { os.Chown(key, 999, 0) }, conf + ":3: review.key_file: the key file " + key + " cannot be used: it is owned by uid 999, not root"},
		{"key empty", func() { write(key, "\n", 0o600) }, conf + ":3: review.key_file: the key file " + key + " cannot be used: it is empty"},
		{"key absent", func() { os.Remove(key) }, conf + ":3: review.key_file: the key file " + key + " cannot be used (no such file or directory)"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			write(conf, doc, 0o644)
			write(key, "sk-machine-key\n", 0o600)
			os.Chmod(dir, 0o755)
			tt.setup()
			if _, err := Load(conf, true, fakeIDs{}); err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
	os.Chmod(dir, 0o755)
	// A link to the file is followed, and the link's own directory must
	// be root's alone too: /tmp's is not.
	write(conf, doc, 0o644)
	write(key, "sk-machine-key\n", 0o600)
	tmp := t.TempDir()
	os.Chmod(filepath.Dir(tmp), 0o1777)
	link := filepath.Join(tmp, "link.toml")
	os.Symlink(conf, link)
	if _, err := Load(link, true, fakeIDs{}); err == nil || !strings.Contains(err.Error(), "may be written by others than root") {
		t.Errorf("a link in a directory others may write: %v", err)
	}
}

// TestReadmeExample: the README's example configuration parses.
func TestReadmeExample(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "### The machine configuration\n")
	_, block, ok2 := strings.Cut(sec, "```toml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no example in the README's machine configuration section")
	}
	c, err := Parse("README.md", []byte(block), fakeIDs{})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := c.ReviewerFor(1001); !ok || r.KeyFile != "/etc/sandboxd/keys/alice" || c.Limits.MaxExecs != 16 || !c.Policy.Set.Has("boundaries.deny") {
		t.Errorf("%+v %+v", r, c)
	}
}
