package persist

import (
	"os"
	"path/filepath"
	"testing"
)

// ResolveCreated is where a write that makes the directories it misses
// lands: through links on the way, below directories that are not there
// yet, through a dangling link to its target; an element that is a file,
// or a relative path, is an error, never a path judged by its spelling.
func TestResolveCreated(t *testing.T) {
	d := t.TempDir()
	config := filepath.Join(d, "home", ".config")
	ws := filepath.Join(d, "ws")
	for _, dir := range []string{config, ws} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(config, filepath.Join(ws, "cfg"))
	os.Symlink(filepath.Join(d, "home", ".bashrc"), filepath.Join(ws, "rc"))
	os.WriteFile(filepath.Join(ws, "file"), nil, 0o644)
	for _, c := range []struct{ in, want string }{
		{filepath.Join(ws, "a.txt"), filepath.Join(ws, "a.txt")},
		{filepath.Join(ws, "cfg", "autostart", "x.desktop"), filepath.Join(config, "autostart", "x.desktop")},
		{filepath.Join(ws, "new", "deeper", "x"), filepath.Join(ws, "new", "deeper", "x")},
		{filepath.Join(ws, "rc"), filepath.Join(d, "home", ".bashrc")},
		{filepath.Join(ws, "file", "x"), ""},
		{"relative/x", ""},
	} {
		got, err := ResolveCreated(Host{}, c.in)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("ResolveCreated(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
