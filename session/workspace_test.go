package session

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveWorkspaceRefuses(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(home, "proj")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	link := filepath.Join(t.TempDir(), "etc-link")
	os.Symlink("/etc", link)
	c := Caller{Home: home, ConfigHome: filepath.Join(home, ".config"), StateHome: filepath.Join(home, ".local", "state"), Cwd: ws}
	for _, bad := range []string{"/", "/etc", "/usr/lib", home, filepath.Dir(home), link,
		filepath.Join(home, "missing"), filepath.Join(home, ".local", "state", "sandboxd")} {
		if bad == filepath.Join(home, ".local", "state", "sandboxd") {
			os.MkdirAll(bad, 0o755)
		}
		if _, _, err := resolveWorkspace(bad, c); err == nil {
			t.Errorf("workspace %s was accepted", bad)
		}
	}
	got, _, err := resolveWorkspace(ws, c)
	if err != nil || got != ws {
		t.Fatalf("resolveWorkspace(%s) = %s, %v", ws, got, err)
	}
}
