package agentinstall

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// TestModes: a file install edits keeps its mode; one it creates is the
// caller's alone, in directories that are too; so is the record.
func TestModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	root := t.TempDir()
	e := testEnv(root)
	cfg := filepath.Join(e.CodexHome, "config.toml")
	writeTestFile(t, cfg, []byte("model = \"m\"\n"))
	if err := os.Chmod(cfg, 0o664); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(agenthook.Codex, e, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(agenthook.ClaudeCode, e, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{cfg, 0o664},
		{filepath.Join(e.CodexHome, "hooks.json"), 0o600},
		{e.ClaudeDir, os.ModeDir | 0o700},
		{filepath.Join(e.ClaudeDir, "settings.json"), 0o600},
		{e.Layout.Install(agenthook.Codex), 0o600},
		{filepath.Dir(e.Layout.Install(agenthook.Codex)), os.ModeDir | 0o700},
		{e.Layout.State, os.ModeDir | 0o700},
		{e.Layout.Bin(), os.ModeDir | 0o700},
	} {
		if got := mode(t, c.path); got != c.want {
			t.Errorf("%s: mode %v, want %v", c.path, got, c.want)
		}
	}
}

// TestSymlinkedFile: a settings file that is a link (a dotfiles
// checkout) stays a link; its target gets the edit, and uninstall gives
// the target back as it was.
func TestSymlinkedFile(t *testing.T) {
	root := t.TempDir()
	e := testEnv(root)
	target := filepath.Join(root, "dotfiles", "claude-settings.json")
	orig := []byte("{\n  \"model\": \"opus\"\n}\n")
	writeTestFile(t, target, orig)
	link := filepath.Join(e.ClaudeDir, "settings.json")
	os.MkdirAll(e.ClaudeDir, 0o700)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(agenthook.ClaudeCode, e, Options{}); err != nil {
		t.Fatal(err)
	}
	if mode(t, link)&os.ModeSymlink == 0 {
		t.Fatal("the settings link was replaced by a file")
	}
	b, _ := os.ReadFile(target)
	if !bytes.Contains(b, []byte(agenthook.ClaudeShellName)) {
		t.Fatalf("the link's target was not edited:\n%s", b)
	}
	// The target is another name for the settings: denied too.
	if !bytes.Contains(b, []byte("Edit(/"+target+")")) {
		t.Errorf("no rule for the link's target:\n%s", b)
	}
	if _, err := Uninstall(agenthook.ClaudeCode, e, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, orig) {
		t.Errorf("uninstall left\n%s\nwant\n%s", b, orig)
	}
	if mode(t, link)&os.ModeSymlink == 0 {
		t.Fatal("the settings link was replaced by a file")
	}
}

// TestNoFinalNewline: a config.toml without a final newline comes back
// byte for byte.
func TestNoFinalNewline(t *testing.T) {
	for _, orig := range []string{"model = \"m\"", "model = \"m\"\n[x]\ny = 1", "# only a comment", ""} {
		root := t.TempDir()
		e := testEnv(root)
		cfg := filepath.Join(e.CodexHome, "config.toml")
		writeTestFile(t, cfg, []byte(orig))
		if _, err := Install(agenthook.Codex, e, Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := Uninstall(agenthook.Codex, e, Options{}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(cfg); err != nil || string(b) != orig {
			t.Errorf("%q came back as %q (%v)", orig, b, err)
		}
	}
}

// TestRefusalWritesNothing: when install refuses one file of an agent,
// no file of that agent changes and no record is written.
func TestRefusalWritesNothing(t *testing.T) {
	root := t.TempDir()
	e := testEnv(root)
	hooks := filepath.Join(e.CodexHome, "hooks.json")
	writeTestFile(t, hooks, []byte(`{"hooks":{}}`))
	writeTestFile(t, filepath.Join(e.CodexHome, "config.toml"), []byte("sandbox_mode = 3\n"))
	_, err := Install(agenthook.Codex, e, Options{})
	if err == nil || !strings.Contains(publicMessage(err), "sandbox_mode") {
		t.Fatalf("install: %v", err)
	}
	if b, _ := os.ReadFile(hooks); string(b) != `{"hooks":{}}` {
		t.Errorf("hooks.json was written: %s", b)
	}
	if _, err := os.Stat(e.Layout.Install(agenthook.Codex)); err == nil {
		t.Error("a record was written")
	}
}

// TestStaleDirectory: an install after CODEX_HOME moved takes the
// earlier install's entries out of the old files.
func TestStaleDirectory(t *testing.T) {
	root := t.TempDir()
	e := testEnv(root)
	if _, err := Install(agenthook.Codex, e, Options{}); err != nil {
		t.Fatal(err)
	}
	e.CodexHome = filepath.Join(root, "home", "codex2")
	if _, err := Install(agenthook.Codex, e, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "home", ".codex", "hooks.json")); err == nil {
		t.Error("the old hooks.json, which install created, is still there")
	}
	if _, err := os.Stat(filepath.Join(e.CodexHome, "hooks.json")); err != nil {
		t.Error(err)
	}
}

// TestUnsafeRulePath: a path Claude Code's rules would read as a
// pattern is refused, not denied approximately.
func TestUnsafeRulePath(t *testing.T) {
	root := t.TempDir()
	e := testEnv(root)
	e.Layout.State = filepath.Join(root, "state[1]")
	if _, err := Install(agenthook.ClaudeCode, e, Options{}); err == nil || !strings.Contains(publicMessage(err), "pattern") {
		t.Fatalf("install: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.ClaudeDir, "settings.json")); err == nil {
		t.Error("settings.json was written")
	}
}
