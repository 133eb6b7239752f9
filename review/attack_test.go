package review

import (
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/policy"
)

// Found in review: script inspection must check where a path leads, not
// only how it is written: a workspace symlink (e.g. committed in a cloned
// repo) to a credential store must not be read.
func TestAttackInspectFollowsSymlinkIntoDenied(t *testing.T) {
	dir := t.TempDir()
	secretDir := filepath.Join(dir, "home", ".netrcdir")
	os.MkdirAll(secretDir, 0o700)
	secret := filepath.Join(secretDir, "netrc")
	os.WriteFile(secret, []byte("machine example.com login u password SYMLINKCANARYhunter2\n"), 0o600)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	if err := os.Symlink(secret, filepath.Join(ws, "setup.sh")); err != nil {
		t.Fatal(err)
	}
	denied := func(p string) bool { return p == secretDir || strings.HasPrefix(p, secretDir+"/") }
	f := &fakeCompleter{answers: []string{`{"outcome":"deny","risk_level":"low","user_authorization":"unknown","rationale":"no"}`}}
	m := &Model{Client: f, Redactor: NewRedactor(nil), Denied: denied, OpenView: localView(t, nil)}
	req := writeReq("/home/u/out.txt")
	req.Cwd = ws
	req.Command = "bash ./setup.sh; cp out.txt /home/u/out.txt"
	if _, err := m.Review(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if sent := strings.Join(f.users, ""); strings.Contains(sent, "SYMLINKCANARY") {
		t.Fatalf("a denied file's content reached the model through a symlink:\n%s", sent)
	}
}

// The same through a symlinked directory on the way.
func TestAttackInspectFollowsDirSymlinkIntoDenied(t *testing.T) {
	dir := t.TempDir()
	secretDir := filepath.Join(dir, "home", ".ssh")
	os.MkdirAll(secretDir, 0o700)
	os.WriteFile(filepath.Join(secretDir, "key.sh"), []byte("DIRLINKCANARY\n"), 0o600)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.Symlink(secretDir, filepath.Join(ws, "tools"))
	denied := func(p string) bool { return p == secretDir || strings.HasPrefix(p, secretDir+"/") }
	view := localView(t, nil)
	scripts, _ := InspectScripts("sh tools/key.sh", ws, denied, func() (View, error) { return view(context.Background()) })
	for _, s := range scripts {
		if strings.Contains(s.Content, "DIRLINKCANARY") {
			t.Fatalf("read %s (a denied file) through a directory symlink", s.Path)
		}
	}
}

// Found in review: a configured secret value is redacted hex-encoded in
// upper case too (xxd -p -u, printf %X), not only in lower case: a short
// value's hex is under the 41 digits of the bare-hex rule.
func TestAttackRedactUppercaseHexSecret(t *testing.T) {
	val := "s3cr3t-VALUE-0042"
	r := NewRedactor([]string{val})
	up := strings.ToUpper(hex.EncodeToString([]byte(val)))
	for _, in := range []string{"/tmp/out/" + up, "/tmp/out/" + hex.EncodeToString([]byte(val))} {
		if out := r.Redact(in); strings.Contains(strings.ToLower(out), hex.EncodeToString([]byte(val))) {
			t.Errorf("the secret's hex survived: %q", out)
		}
	}
}

// A workspace .sandboxd.toml may only lower caps (tighten "min"): a cap
// it sets to 0 must stop every call, not lift the cap (0 once meant "no
// cap").
func TestAttackWorkspaceZeroLiftsCaps(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "policy.toml")
	os.WriteFile(user, []byte("[review]\nmodel = \"m\"\nmax_calls_per_session = 3\nmax_calls_per_hour = 10\nmax_tokens_per_session = 10000\nmax_tokens_per_hour = 20000\n"), 0o644)
	ws := filepath.Join(dir, ".sandboxd.toml")
	os.WriteFile(ws, []byte("[review]\nmax_calls_per_session = 0\nmax_calls_per_hour = 0\nmax_tokens_per_session = 0\nmax_tokens_per_hour = 0\nmax_user_calls_per_hour = 0\nmax_user_tokens_per_hour = 0\n"), 0o644)
	p, err := policy.Load(user, true, ws)
	if err != nil {
		t.Logf("refused (good): %v", err)
		return
	}
	rv := p.Review
	m := &Meter{Dir: t.TempDir(), Caps: Caps{CallsPerSession: rv.MaxCallsPerSession, CallsPerHour: rv.MaxCallsPerHour,
		TokensPerSession: rv.MaxTokensPerSession, TokensPerHour: rv.MaxTokensPerHour,
		UserCallsPerHour: rv.MaxUserCallsPerHour, UserTokensPerHour: rv.MaxUserTokensPerHour}}
	if rv.MaxUserCallsPerHour != 0 || rv.MaxUserTokensPerHour != 0 {
		t.Fatalf("the workspace's zero ceilings were not taken: %+v", rv)
	}
	if _, err := m.Reserve("s", 100); !errors.Is(err, ErrCapped) {
		t.Fatalf("a workspace's zero caps let a call through: %v", err)
	}
}

// slowCompleter answers allow after a pause, counting calls.
type slowCompleter struct {
	mu sync.Mutex
	n  int
}

func (s *slowCompleter) Complete(_ context.Context, _, _ string, validate func(string) error) (Completion, error) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	a := `{"outcome":"allow","risk_level":"low","user_authorization":"high","rationale":"ok"}`
	if err := validate(a); err != nil {
		return Completion{}, err
	}
	return Completion{Content: a, PromptTokens: 900, CompletionTokens: 40}, nil
}

// Found in review: Reserve counts the tokens it reserves, so concurrent
// reviews (DecideEach runs 4 at once) cannot all pass a cap that admits
// one.
func TestAttackTokenCapConcurrent(t *testing.T) {
	c := &slowCompleter{}
	m := &Model{Client: c, Redactor: NewRedactor(nil), Meter: &Meter{Dir: t.TempDir(), Caps: Caps{TokensPerSession: 1500}}}
	req := writeReq("/home/u/out.txt")
	p, _ := BuildPrompt(req, Evidence{Intent: req.Intent}, NewRedactor(nil), 8192)
	if p.Tokens > 1500 {
		t.Skip("prompt too large for the cap")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); m.Review(context.Background(), req) }()
	}
	wg.Wait()
	// Each call spends 940 tokens: after one, 940 + estimate > 1500.
	if c.n > 1 {
		t.Fatalf("%d calls sent under a token cap that admits one (%d tokens estimated each, 940 spent each)", c.n, p.Tokens)
	}
}
