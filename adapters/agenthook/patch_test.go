package agenthook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func patchOf(headers ...string) string {
	return "*** Begin Patch\n" + strings.Join(headers, "\n+x\n") + "\n+x\n*** End Patch\n"
}

// TestCheckPatch: a patch passes only when every file it names is an
// ordinary file of the workspace, by name and once links are resolved.
func TestCheckPatch(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(ws, "src"), filepath.Join(ws, ".git", "hooks"), outside} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(outside, "rc"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "out"))
	os.Symlink(filepath.Join(outside, "rc"), filepath.Join(ws, "rc-link"))
	os.WriteFile(filepath.Join(ws, "src", "a.go"), []byte("x"), 0o644)
	os.Link(filepath.Join(outside, "rc"), filepath.Join(ws, "hard"))
	sub := filepath.Join(ws, "src")
	for _, c := range []struct {
		name, patch, want string
	}{
		{"add in the workspace", patchOf("*** Add File: src/new.go"), ""},
		{"update by absolute name", patchOf("*** Update File: " + filepath.Join(ws, "src", "a.go")), ""},
		{"delete and move inside", patchOf("*** Update File: a.go", "*** Move to: b.go", "*** Delete File: ../README"), ""},
		{"an instruction file", patchOf("*** Add File: AGENTS.md"), ""},
		{"outside by absolute name", patchOf("*** Add File: " + filepath.Join(outside, "x")), "outside the workspace"},
		{"outside by ..", patchOf("*** Add File: ../../outside/x"), "outside the workspace"},
		{"a move outside", patchOf("*** Update File: a.go", "*** Move to: /etc/cron.d/x"), "outside the workspace"},
		{"through a linked directory", patchOf("*** Add File: ../out/x"), "outside the workspace"},
		{"through a linked file", patchOf("*** Update File: ../rc-link"), "outside the workspace"},
		{"a hard link", patchOf("*** Update File: ../hard"), "hard links"},
		{"git's directory", patchOf("*** Add File: ../.git/hooks/pre-commit"), "git's own directory"},
		{"a start-up file", patchOf("*** Add File: ../.envrc"), "direnv"},
		{"an agent's settings", patchOf("*** Add File: ../.codex/config.toml"), "Codex"},
		{"an editor's tasks", patchOf("*** Add File: ../.vscode/tasks.json"), "may not change"},
		{"names no file", "*** Begin Patch\n*** End Patch\n", "names no file"},
		{"an indented header", "*** Begin Patch\n*** Add File: in.txt\n+ok\n  *** Add File: " + filepath.Join(outside, "x") + "\n+x\n*** End Patch\n", "outside the workspace"},
		{"a tab-indented move", patchOf("*** Update File: a.go", "\t*** Move to: ../../outside/y"), "outside the workspace"},
		{"an unknown header", patchOf("*** Add File: a.go", " *** Copy File: /etc/x"), "cannot judge"},
		{"a header as context", "*** Begin Patch\n*** Update File: a.go\n@@\n *** Add File: /etc/passwd\n*** End Patch\n", "outside the workspace"},
		{"an empty name", patchOf("*** Add File:  "), "empty path"},
	} {
		err := CheckPatch(c.patch, sub, ws)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func FuzzPatchFiles(f *testing.F) {
	f.Add(patchOf("*** Add File: a", "*** Move to: b"))
	f.Fuzz(func(t *testing.T, s string) {
		files, err := PatchFiles(s)
		if err == nil && len(files) == 0 {
			t.Fatal("no files and no error")
		}
	})
}

// TestCheckWorkdir: a command's directory must be the workspace or
// below it, also once symbolic links are resolved.
func TestCheckWorkdir(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{"ws/sub", "out"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "out"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cwd string
		ok  bool
	}{
		{ws, true}, {filepath.Join(ws, "sub"), true},
		{filepath.Join(dir, "out"), false}, {dir, false}, {"/", false},
		{filepath.Join(ws, "link"), false}, {filepath.Join(ws, "missing"), false},
	} {
		if err := CheckWorkdir(c.cwd, ws); (err == nil) != c.ok {
			t.Errorf("CheckWorkdir(%s): %v, want ok=%v", c.cwd, err, c.ok)
		}
	}
}
