package layer

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/persist"
	"golang.org/x/sys/unix"
)

// TestGuard: which changes the persistence check refuses, with the
// workspace and the layer as real directories.
func TestGuard(t *testing.T) {
	ws := t.TempDir()
	write := func(root, rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const head = "ref: refs/heads/main\n"
	const cfg = "[core]\n\tbare = false\n\thooksPath = .githooks\n[include]\n\tpath = ../project.gitconfig\n[alias]\n\tx = !make\n"
	write(ws, ".git/config", cfg)
	write(ws, ".git/HEAD", head)
	write(ws, ".git/modules/lib/HEAD", head)
	write(ws, "project.gitconfig", "[user]\n\tname = p\n")
	write(ws, "sub/.git/config", "[core]\n\thooksPath = ci/hooks\n")
	write(ws, "self/.git/config", "[core]\n\thooksPath = .\n")
	write(ws, "bare/HEAD", head)
	for _, d := range []string{".git/objects", ".git/refs", "bare/objects", "bare/refs", "sub/.git/hooks", "src"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	open := func(p string) int {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	wsFD := open(ws)
	cache := t.TempDir() // written straight through by the command: unguarded
	// layer builds a layer holding what every case shares: a new bare
	// repository, and a config that adds hooksPath entries (refused as a
	// change, but their targets are protected anyway).
	layer := func() string {
		upper := t.TempDir()
		write(upper, "newbare/objects/x", "")
		write(upper, "newbare/HEAD", head)
		os.MkdirAll(filepath.Join(upper, "newbare/refs"), 0o755)
		write(upper, ".git/config", cfg+"[core]\n\thooksPath = "+filepath.Join(ws, "tools/abs-hooks")+"\n[core]\n\thooksPath = .\n")
		return upper
	}
	for _, c := range []struct {
		path    string
		k       kind
		content string // a file's; "" for "x"
		refused bool
	}{
		{"src/main.go", kindFile, "", false},
		{".envrc", kindFile, "", true},
		{".envrc", kindRemove, "", true},
		{"deep/down/.envrc", kindFile, "", true},
		{".vscode/tasks.json", kindFile, "", true},
		{"pkg/.vscode/tasks.json", kindFile, "", true},
		{".vscode", kindDir, "", true},
		{".claude/settings.json", kindSymlink, "", true},
		{".devcontainer.json", kindFile, "", false}, // listed: Dev Containers asks first
		{".npmrc", kindFile, "script-shell=/tmp/x\n", true},
		{".npmrc", kindFile, "registry=https://r/\n", false},
		{".pdbrc", kindFile, "", true},
		{"a.code-workspace", kindFile, "", true},
		{".mcp.json", kindFile, "", true},
		{"node_modules/x/.vscode/tasks.json", kindFile, "", false}, // listed, not refused
		{"AGENTS.md", kindFile, "", false},                         // listed
		{".envrc.bak", kindFile, "", false},
		{".git", kindDir, "", false},
		{".git", kindFile, "", true}, // gitfile redirect
		{".git", kindSymlink, "", true},
		{".git", kindRemove, "", false},
		{".git/hooks", kindDir, "", false},
		{".git/hooks", kindSymlink, "", true},
		{".git/hooks/pre-commit", kindFile, "", true},
		{".git/hooks/pre-commit", kindSymlink, "", true},
		{".git/hooks/pre-commit.sample", kindFile, "", false},
		{".git/hooks/pre-commit", kindRemove, "", false},
		{".git/hooks/sub/x.sample", kindFile, "", true},
		{".git/refs/heads/hooks/x", kindFile, "ref: refs/heads/none\n", false}, // a branch named hooks/x
		{".git/refs/heads/config", kindFile, "ref: refs/heads/none\n", false},  // a branch named config
		{".git/refs/heads/bad", kindFile, "x", true},                           // a ref sandboxd cannot read
		{".git/objects/ab/cdef", kindFile, "", false},
		{".git/index", kindFile, "DIRC\x00\x00\x00\x02\x00\x00\x00\x00" + strings.Repeat("\x00", 20), false},
		{".git/index", kindFile, "not an index", true}, // cannot be checked
		{".git/commondir", kindFile, "", true},
		{".git/config", kindFile, cfg + "[user]\n\tname = x\n", false},
		{".git/config", kindFile, "[user]\n\tname = x\n", false}, // removing is fine
		{".git/config", kindFile, cfg + "[core]\n\tfsmonitor = evil\n", true},
		{".git/config", kindFile, cfg + "[alias]\n\ty = !evil\n", true},
		{".git/config", kindFile, cfg + "[alias]\n\ty = status\n", true}, // every alias runs things
		{".git/config", kindFile, cfg + "[remote \"o\"]\n\turl = https://example.com/r\n", false},
		{".git/config", kindFile, "[core\n", true}, // unparsable
		{".git/config", kindFile, cfg + "[remote \"x\"]\n\turl = CACHE/evil.git\n", true},
		{".git/config", kindFile, cfg + "[remote \"x\"]\n\tpushurl = file://CACHE/evil.git\n", true},
		{".git/config", kindFile, cfg + "[url \"CACHE/evil.git\"]\n\tinsteadOf = https://example.com/\n", true},
		{".git/config", kindFile, cfg + "[remote \"x\"]\n\turl = /srv/other.git\n", false},
		{".git/config", kindFile, cfg + "[remote \"x\"]\n\turl = ext::sh -c evil\n", true},
		{".git/objects/info/alternates", kindFile, "CACHE/objects\n", true},
		{".git/objects/info/alternates", kindFile, "/srv/other.git/objects\n", false},
		{".git/remotes/o", kindFile, "URL: CACHE/evil.git\n", true},
		{".git/config", kindSymlink, "", true},
		{".git/config", kindRemove, "", false},
		{".git/rebase-merge/git-rebase-todo", kindFile, "pick 1234 x\n  exec\ttouch /tmp/x\n", true},
		{".git/rebase-merge/git-rebase-todo", kindFile, "pick 1234 x\n# exec y\n", false},
		{".git/rebase-merge/strategy", kindFile, "x/../evil\n", true},
		{".git/rebase-merge/strategy", kindFile, "ort\n", false},
		{".git/sequencer/opts", kindFile, "[options]\n\tstrategy = evil\n", true},
		{".git/sequencer/todo", kindFile, "x evil\n", true},
		{".git/remotes/o", kindFile, "URL: ext::sh -c evil\n", true},
		{".git/remotes/o", kindFile, "URL: https://example.com/r\n", false},
		{".git/worktrees/wt/config.worktree", kindFile, "[core]\n\tsshCommand = evil\n", true},
		{".git/worktrees/wt/hooks/post-checkout", kindFile, "", true},
		{".git/modules/lib/hooks/pre-commit", kindFile, "", true},
		{".git/modules/lib/config", kindFile, "[core]\n\tpager = evil\n", true},
		{"sub/.git/hooks/post-checkout", kindFile, "", true},
		{"deep/er/.git/config", kindFile, "[diff \"x\"]\n\ttextconv = evil\n", true},
		{"deep/er/.git/config", kindFile, "[user]\n\temail = a@b\n", false},
		{"bare/hooks/pre-receive", kindFile, "", true},
		{"bare/config", kindFile, "[core]\n\tfsmonitor = evil\n", true},
		{"newbare/hooks/update", kindFile, "", true},
		{"newbare/config", kindFile, "[core]\n\tfsmonitor = evil\n", true},
		{".githooks/pre-commit", kindFile, "", true}, // core.hooksPath target
		{".githooks/pre-commit", kindRemove, "", false},
		{".githooks", kindDir, "", true},
		{"project.gitconfig", kindFile, "[user]\n\tname = q\n", false},
		{"project.gitconfig", kindFile, "[core]\n\teditor = evil\n", true},
		{"tools/abs-hooks/pre-push", kindFile, "", true}, // absolute hooksPath in the layer's config
		{"tools/abs-hooks", kindRemove, "", false},
		{"pre-commit", kindFile, "", true}, // hooksPath "." in the layer's config
		{"README", kindFile, "", false},
		{"src/pre-commit", kindFile, "", false},
		{"sub/ci/hooks/pre-commit", kindFile, "", true}, // a nested repository's hooksPath
		{"sub/ci/other", kindFile, "", false},
		{"self/post-checkout", kindFile, "", true}, // a nested repository whose hooksPath is its work tree
		{"self/main.go", kindFile, "", false},
		// An existing directory turned into a repository, its objects
		// borrowed through a symlink: what it holds counts now, and it is
		// judged as a new repository is (persist's newRepo, the rule a
		// run without a layer applies too), which this one fails: it has
		// no config file. (persist's TestNewRepoBothWays has one that
		// passes.)
		{"src/HEAD", kindFile, head, true},
		{"src/hooks/post-checkout", kindFile, "", true},
	} {
		upper := layer()
		p := filepath.Join(upper, c.path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		switch c.k {
		case kindFile:
			content := strings.ReplaceAll(c.content, "CACHE", cache)
			if content == "" {
				content = "x"
			}
			os.RemoveAll(p)
			write(upper, c.path, content)
		case kindDir:
			os.MkdirAll(p, 0o755)
		case kindSymlink:
			os.RemoveAll(p)
			os.Symlink("x", p)
		}
		if c.path == "src/HEAD" || c.path == "src/hooks/post-checkout" {
			write(upper, "src/HEAD", head)
			os.Symlink(filepath.Join(ws, ".git/objects"), filepath.Join(upper, "src/objects"))
			os.MkdirAll(filepath.Join(upper, "src/refs"), 0o755)
		}
		g, err := newGuard(wsFD, open(upper), Source{}, Options{Workspace: ws, StateDir: t.TempDir(),
			Protected: []string{".envrc", ".vscode", ".claude"}, Unguarded: []string{cache}, Log: discardLog()}, true)
		if err != nil {
			t.Fatal(err)
		}
		v := g.check(c.path, c.k)
		if refused := v.Action == persist.Refuse; refused != c.refused {
			t.Errorf("check(%q, %d) = %v (%s), want refused=%v", c.path, c.k, v.Action, v.Why, c.refused)
		}
		if v.Action != 0 && v.Why == "" {
			t.Errorf("check(%q) decided without a reason", c.path)
		}
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
