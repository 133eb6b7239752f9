package layer

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGuard: which changes the persistence check refuses, with the
// workspace and the layer as real directories.
func TestGuard(t *testing.T) {
	ws, upper := t.TempDir(), t.TempDir()
	write := func(root, rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const cfg = "[core]\n\tbare = false\n\thooksPath = .githooks\n[include]\n\tpath = ../project.gitconfig\n[alias]\n\tx = !make\n"
	write(ws, ".git/config", cfg)
	write(ws, ".git/HEAD", "ref: refs/heads/main\n")
	write(ws, ".git/modules/lib/HEAD", "ref: refs/heads/main\n")
	write(ws, "project.gitconfig", "[user]\n\tname = p\n")
	write(ws, "sub/.git/config", "[core]\n\thooksPath = ci/hooks\n")
	write(ws, "self/.git/config", "[core]\n\thooksPath = .\n")
	for _, d := range []string{"bare/objects", "bare/refs", "sub/.git/hooks"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	write(upper, "newbare/objects/x", "")
	// The layer's config adds hooksPath entries (refused as a change, but
	// their targets are protected anyway).
	write(upper, ".git/config", cfg+"[core]\n\thooksPath = "+filepath.Join(ws, "tools/abs-hooks")+"\n[core]\n\thooksPath = .\n")
	os.MkdirAll(filepath.Join(upper, "newbare/refs"), 0o755)
	open := func(p string) int {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	g := newGuard(open(ws), open(upper), ws, []string{".git", ".envrc", ".vscode", ".claude"})
	text := func(s string) func() ([]byte, error) { return func() ([]byte, error) { return []byte(s), nil } }
	for _, c := range []struct {
		path    string
		k       kind
		content func() ([]byte, error)
		refused bool
	}{
		{"src/main.go", kindFile, nil, false},
		{".envrc", kindFile, nil, true},
		{".envrc", kindRemove, nil, true},
		{".vscode/tasks.json", kindFile, nil, true},
		{".vscode", kindDir, nil, true},
		{".claude/settings.json", kindSymlink, nil, true},
		{".envrc.bak", kindFile, nil, false},
		{".git", kindDir, nil, false},
		{".git", kindFile, nil, true}, // gitfile redirect
		{".git", kindSymlink, nil, true},
		{".git", kindRemove, nil, false},
		{".git/hooks", kindDir, nil, false},
		{".git/hooks", kindSymlink, nil, true},
		{".git/hooks/pre-commit", kindFile, nil, true},
		{".git/hooks/pre-commit", kindSymlink, nil, true},
		{".git/hooks/pre-commit.sample", kindFile, nil, false},
		{".git/hooks/pre-commit", kindRemove, nil, false},
		{".git/hooks/sub/x.sample", kindFile, nil, true},
		{".git/refs/heads/hooks/x", kindFile, nil, false}, // a branch named hooks/x
		{".git/refs/heads/config", kindFile, nil, false},  // a branch named config
		{".git/objects/ab/cdef", kindFile, nil, false},
		{".git/index", kindFile, nil, false},
		{".git/commondir", kindFile, nil, true},
		{".git/config", kindFile, text(cfg + "[user]\n\tname = x\n"), false},
		{".git/config", kindFile, text("[user]\n\tname = x\n"), false}, // removing is fine
		{".git/config", kindFile, text(cfg + "[core]\n\tfsmonitor = evil\n"), true},
		{".git/config", kindFile, text(cfg + "[alias]\n\ty = !evil\n"), true},
		{".git/config", kindFile, text(cfg + "[alias]\n\ty = status\n"), true}, // every alias can run programs
		{".git/config", kindFile, text("[core\n"), true}, // unparsable
		{".git/config", kindSymlink, nil, true},
		{".git/config", kindRemove, nil, false},
		{".git/worktrees/wt/config.worktree", kindFile, text("[core]\n\tsshCommand = evil\n"), true},
		{".git/worktrees/wt/hooks/post-checkout", kindFile, nil, true},
		{".git/modules/lib/hooks/pre-commit", kindFile, nil, true},
		{".git/modules/lib/config", kindFile, text("[core]\n\tpager = evil\n"), true},
		{"sub/.git/hooks/post-checkout", kindFile, nil, true},
		{"deep/er/.git/config", kindFile, text("[diff \"x\"]\n\ttextconv = evil\n"), true},
		{"deep/er/.git/config", kindFile, text("[user]\n\temail = a@b\n"), false},
		{"bare/hooks/pre-receive", kindFile, nil, true},
		{"bare/config", kindFile, text("[core]\n\tfsmonitor = evil\n"), true},
		{"newbare/hooks/update", kindFile, nil, true},
		{".githooks/pre-commit", kindFile, nil, true}, // core.hooksPath target
		{".githooks/pre-commit", kindRemove, nil, false},
		{".githooks", kindDir, nil, true},
		{"project.gitconfig", kindFile, text("[user]\n\tname = q\n"), false},
		{"project.gitconfig", kindFile, text("[core]\n\teditor = evil\n"), true},
		{"tools/abs-hooks/pre-push", kindFile, nil, true}, // absolute hooksPath in the layer's config
		{"tools/abs-hooks", kindRemove, nil, false},
		{"pre-commit", kindFile, nil, true}, // hooksPath "." in the layer's config
		{"README", kindFile, nil, false},
		{"src/pre-commit", kindFile, nil, false},
		{"sub/ci/hooks/pre-commit", kindFile, nil, true}, // a nested repository's hooksPath
		{"sub/ci/other", kindFile, nil, false},
		{"self/post-checkout", kindFile, nil, true}, // a nested repository whose hooksPath is its work tree
		{"self/main.go", kindFile, nil, false},
	} {
		why, refused := g.check(c.path, c.k, c.content)
		if refused != c.refused {
			t.Errorf("check(%q, %d) refused=%v (%s), want %v", c.path, c.k, refused, why, c.refused)
		}
		if refused && why == "" {
			t.Errorf("check(%q) refused without a reason", c.path)
		}
	}
}
