package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/intents"
)

// A scope is read with the policy's grammar and shown in one normal
// form; what is not an exact file, a readable subtree or a public
// destination is refused for its shape.
func TestParseIntentScope(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" : refused
	}{
		{"fs write ~/.config/app/settings.json", "fs write /home/u/.config/app/settings.json"},
		{"fs  write_file   /opt/app/conf", "fs write_file /opt/app/conf"},
		{`fs write /opt/my\ app/a\*b`, `fs write /opt/my\ app/a\*b`},
		{"fs make_reg /opt/app/conf/", ""}, // read as "conf/", shown as "conf"
		{"fs read ~/datasets/**", "fs read /home/u/datasets/**"},
		{"fs execute /opt/tools/**", "fs execute /opt/tools/**"},
		{"fs write ~/.config/app/**", ""},
		{"fs make_reg /opt/**", ""},
		{"fs read /**", ""},
		{"fs write /", ""},
		{"fs * /opt/app/conf", ""},
		{"fs remove_file /opt/app/conf", ""},
		{"fs write /opt/*.json", ""},
		{"fs read /opt/**/x", ""},
		{"fs write opt/app", ""},
		{"fs write /opt/../etc/passwd", ""},
		{"net connect *.npmjs.org:443", "net connect *.npmjs.org:443"},
		{"net connect REGISTRY.npmjs.org.", "net connect registry.npmjs.org"},
		{"net connect example.com:*", "net connect example.com:*"},
		{"net connect 93.184.215.14:443", "net connect 93.184.215.14:443"},
		{"net connect *.org:443", ""},
		{"net connect *", ""},
		{"net connect *:443", ""},
		{"net bind example.com:8080", ""},
		{"net * example.com", ""},
		{"net connect 10.0.0.0/8", ""},
		{"net connect 10.0.0.1:443", ""},
		{"net connect 127.0.0.1:8080", ""},
		{"net connect localhost:8080", ""},
		{"net connect 169.254.169.254", ""},
		{"net connect metadata.google.internal", ""},
		{"net connect *.google.internal", ""},
		{"net connect [::1]:443", ""},
		{"net connect 93.184.215.0/24", ""},
		{"dbus call x", ""},
		{"fs write", ""},
	} {
		sc, _, err := ParseIntentScope(tc.in, "/home/u")
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: accepted as %q", tc.in, sc.Text)
		case tc.want != "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.want != "" && (sc.Text != tc.want || sc.Hash != intents.ScopeHash(tc.want) || len(sc.Allows) == 0):
			t.Errorf("%q: %+v, want %q", tc.in, sc, tc.want)
		}
	}
}

// FuzzParseIntentScope: what the scope parser accepts is in its normal
// form's terms: the normal form is accepted again as itself, parses back
// to the same rule, with any home, and names no wildcard but a whole
// trailing "/**" or a leading "*." label.
func FuzzParseIntentScope(f *testing.F) {
	for _, s := range []string{"fs write ~/.config/app/settings.json", "fs read ~/data/**", `fs write /a\ b/c\*`,
		"net connect *.npmjs.org:443", "net connect 93.184.215.14", "fs write /opt/*", "net connect [2606:2800::1]:443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, r, err := ParseIntentScope(s, "/home/u")
		if err != nil {
			return
		}
		again, r2, err := ParseIntentScope(sc.Text, "/elsewhere")
		if err != nil || again.Text != sc.Text || r2 != r || again.Hash != sc.Hash {
			t.Fatalf("%q → %q → %q (%v)", s, sc.Text, again.Text, err)
		}
		back, err := broker.ParseRule(sc.Text, "/home/u")
		if err != nil || back != r {
			t.Fatalf("%q: the normal form %q parses to %+v, not %+v (%v)", s, sc.Text, back, r, err)
		}
		if r.Surface == "filesystem" {
			body := strings.TrimSuffix(r.Target, "/**")
			if strings.Contains(strings.ReplaceAll(body, `\*`, ""), "*") || strings.Contains(strings.ReplaceAll(body, `\?`, ""), "?") {
				t.Fatalf("%q: a wildcard other than a trailing /** in %q", s, r.Target)
			}
		}
	})
}

// intentCaller is a caller with a home of its own, a PATH directory, a
// tool cache and a secret in it.
func intentCaller(t *testing.T) (Caller, string) {
	t.Helper()
	home := t.TempDir()
	for _, d := range []string{"bin", ".cache/pip", ".config/app", ".ssh", "data/sets", "go/pkg/mod"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=" + filepath.Join(home, "bin") + ":/usr/bin:/bin", "PIP_CACHE_DIR=" + filepath.Join(home, "pipcache")}
	c, err := NewCaller(os.Getuid(), os.Getgid(), env, home, 0o022)
	if err != nil {
		t.Fatal(err)
	}
	return c, home
}

// A scope is refused for a cache, a start-up location, a directory on
// PATH, a subtree holding a secret and sandboxd's own state; an ordinary
// file and a subtree without secrets are shown.
func TestPreviewIntentRefuses(t *testing.T) {
	c, home := intentCaller(t)
	r := New(Config{})
	for _, tc := range []struct {
		scope, why string // why "": shown
	}{
		{"fs write ~/.config/app/settings.json", ""},
		{"fs read ~/data/**", ""},
		{"fs read ~/data/sets/**", ""},
		{"fs write ~/.cache/pip/http/x", "a cache"},
		{"fs write ~/.config/sandboxd/policy.toml", "refused"},
		{"fs write ~/pipcache/x", "a cache"},
		{"fs write ~/go/pkg/mod/cache/download/x", "a cache"},
		{"fs read ~/.cache/**", "refused"}, // a cache, which may hold a secret
		{"fs write ~/.bashrc", "a start-up location"},
		{"fs write ~/.config/systemd/user/x.service", "a start-up location"},
		{"fs write ~/.gitconfig", "a start-up location"},
		{"fs write ~/bin/tool", "your PATH"},
		{"fs read ~/bin/**", "your PATH"},
		{"fs read /usr/**", "your PATH"},
		{"fs read ~/**", "a secret"},
		{"fs read ~/.ssh/**", "a secret"},
		{"fs read_file ~/.ssh/id_ed25519", "a secret"},
		{"fs write ~/.local/state/sandboxd/intents/x", "refused"}, // sandboxd's own, a secret too
		{"net connect *.npmjs.org:443", ""},
	} {
		_, err := r.PreviewIntent(context.Background(), c, tc.scope)
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("%s: %v", tc.scope, err)
		case tc.why != "" && (err == nil || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("%s: %v, want it refused for %s", tc.scope, err, tc.why)
		}
	}
	_ = home
}

// GrantIntent issues exactly the text shown: a text not in its normal
// form, or a hash of another text, issues nothing; an intent is listed,
// in the session's state too, and revoked; a record that fails issues
// nothing.
func TestGrantIntent(t *testing.T) {
	ctx := context.Background()
	c, _ := intentCaller(t)
	r := New(Config{})
	sc, err := r.PreviewIntent(ctx, c, "fs write ~/.config/app/settings.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GrantIntent(ctx, c, "s", "fs write ~/.config/app/settings.json", sc.Hash, 0, "terminal", nil); !errors.Is(err, ErrNotShown) {
		t.Fatalf("a text not in normal form: %v", err)
	}
	if _, err := r.GrantIntent(ctx, c, "s", sc.Text, intents.ScopeHash(sc.Text+"x"), 0, "terminal", nil); !errors.Is(err, ErrNotShown) {
		t.Fatalf("another text's hash: %v", err)
	}
	if _, err := r.GrantIntent(ctx, c, "s", sc.Text, sc.Hash, 0, "terminal", func(intents.Intent) error { return errors.New("log full") }); err == nil {
		t.Fatal("issued without its record")
	}
	if _, err := r.GrantIntent(ctx, c, "s", sc.Text, sc.Hash, 25*time.Hour, "terminal", nil); err == nil {
		t.Fatal("issued for more than a day")
	}
	in, err := r.GrantIntent(ctx, c, "s", sc.Text, sc.Hash, time.Hour, "terminal", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.SessionState(c, "s")
	if err != nil || len(st.Intents) != 1 || st.Intents[0].ID != in.ID || st.Intents[0].Scope != sc.Text {
		t.Fatalf("state %+v %v", st, err)
	}
	if other, _ := r.Intents(ctx, c, "t"); len(other) != 0 {
		t.Fatalf("another session sees %+v", other)
	}
	if _, err := r.RevokeIntent(ctx, c, "s", in.ID, nil); err != nil {
		t.Fatal(err)
	}
	if ins, _ := r.Intents(ctx, c, "s"); len(ins) != 0 {
		t.Fatalf("after revoke %+v", ins)
	}
}

// The broker takes only scopes a person could have been shown: one
// written into the caller's file by hand, bound to its own hash but of a
// shape approve refuses (a write subtree, every name), or not in its
// normal form, covers nothing.
func TestBrokerIntentsDropForgedShapes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := intents.New(dir)
	const session = "uid 1: s"
	good := "fs write /home/u/.config/app/settings.json"
	for _, sc := range []string{good, "fs write /home/u/**", "net connect *:*", "fs  write /home/u/x", "fs write ~/.bashrc"} {
		if _, err := st.Add(ctx, session, sc, intents.ScopeHash(sc), 0, "terminal", nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := brokerIntents{s: st, home: "/home/u"}.Intents(ctx, session)
	if err != nil || len(got) != 1 || got[0].Scope != good {
		t.Fatalf("the broker sees %+v %v, want only %q", got, err, good)
	}
}
