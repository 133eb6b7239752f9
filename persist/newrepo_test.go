package persist

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestSafeGitConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want bool
	}{
		{"git init", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", true},
		{"user and remote", "[user]\n\tname = x\n[remote \"origin\"]\n\turl = https://example.org/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n", true},
		{"sha256", "[extensions]\n\tobjectformat = sha256\n", true},
		{"fsmonitor", "[core]\n\tfsmonitor = touch /tmp/x\n", false},
		{"hooksPath", "[core]\n\thooksPath = .h\n", false},
		{"pager", "[core]\n\tpager = sh -c x\n", false},
		{"worktree config", "[extensions]\n\tworktreeConfig = true\n", false},
		{"alias", "[alias]\n\tst = !sh\n", false},
		{"filter", "[filter \"x\"]\n\tclean = sh\n", false},
		{"include", "[include]\n\tpath = ../x\n", false},
		{"credential", "[credential]\n\thelper = !sh\n", false},
		{"section with trailing key", "[core] fsmonitor = x\n", false},
		{"core.worktree", "[core]\n\tworktree = ..\n", false},
		{"remote without name", "[remote]\n\turl = x\n", false},
		{"initialized submodule", "[submodule \"sub\"]\n\turl = https://example.org/s.git\n\tactive = true\n", true},
		{"recursive clone", "[submodule]\n\tactive = .\n[submodule \"sub\"]\n\turl = /srv/sub\n", true},
		{"submodule section key", "[submodule]\n\tfetchJobs = 4\n", false},
		{"submodule update command", "[submodule \"sub\"]\n\tupdate = !sh\n", false},
		{"submodule ext url", "[submodule \"sub\"]\n\turl = ext::sh -c x\n", false},
		{"submodule other key", "[submodule \"sub\"]\n\tpath = x\n", false},
	} {
		if got := safeGitConfig(tc.text); got != tc.want {
			t.Errorf("%s: safeGitConfig = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The workspace's git files are written by the sandboxed command: their
// parsers must never panic, whatever they hold.
func FuzzGitConfig(f *testing.F) {
	for _, s := range []string{
		"[core]\n\thooksPath = x\n", "[include]\npath=\"a\"", "[", "]", "[core \"x\"] a=b", "\x00[user]\nname=\xff",
		"[remote \"o\"]\nurl = ext::sh -c x\n", "gitdir: ../x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		safeGitConfig(text)
	})
}

// TestNewRepoBothWays: a repository the run makes (git init, git clone,
// git worktree add, a directory made a repository) is judged by one rule
// whichever way the run wrote the workspace: a layer's commit (Check,
// the final tree against a copy of the tree before) and a run without a
// layer (the sweep) keep the same ones and refuse the same ones.
func TestNewRepoBothWays(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	upDir := t.TempDir()
	sh(t, upDir, "git init -q -b main up && cd up && echo s > s.txt && git add s.txt && git commit -qm s")
	up := filepath.Join(upDir, "up")
	const made = "mkdir -p tools/refs tools/objects && echo 'ref: refs/heads/main' > tools/HEAD"
	for _, tc := range []struct {
		name, script string
		path         string // what the commit decides
		k            Change
		refused      bool
	}{
		{"init", "git init -q fresh", "fresh/.git", Dir, false},
		{"init-commit", "git init -q fresh && cd fresh && echo a > a && git add a && git commit -qm a", "fresh/.git", Dir, false},
		{"clone", "git clone -q " + up + " fresh", "fresh/.git", Dir, false},
		{"clone-branch-config", "git clone -q " + up + " fresh && git -C fresh config branch.main.rebase true", "fresh/.git", Dir, false},
		{"init-config-beyond", "git init -q fresh && git -C fresh config pull.rebase false", "fresh/.git", Dir, true},
		{"init-fsmonitor", "git init -q fresh && git -C fresh config core.fsmonitor 'touch MARK'", "fresh/.git", Dir, true},
		{"init-hook", "git init -q fresh && printf '#!/bin/sh\\n' > fresh/.git/hooks/pre-commit", "fresh/.git", Dir, true},
		{"init-alternates", "git init -q fresh && echo " + up + "/.git/objects > fresh/.git/objects/info/alternates", "fresh/.git", Dir, true},
		{"init-no-config", "git init -q fresh && rm fresh/.git/config", "fresh/.git", Dir, true},
		{"worktree", "git worktree add -q wt2", ".git/worktrees/wt2", Dir, false},
		{"dir-made-repo", made + " && printf '[core]\\n\\tbare = true\\n' > tools/config", "tools/HEAD", File, false},
		{"dir-made-repo-no-config", made, "tools/HEAD", File, true},
		{"dir-made-repo-config-beyond", made + " && printf '[gc]\\n\\tauto = 0\\n' > tools/config", "tools/HEAD", File, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := "git init -q -b main ws && cd ws && echo hi > a && mkdir tools && echo t > tools/t.sh && git add -A && git commit -qm init"
			// The layer's way: the final tree against a copy of the tree
			// before.
			ws, before, m, repos := beforeAndAfter(t, base, tc.script)
			c := NewChecker(Config{Workspace: ws, Final: layeredFS{before: viewFS{ws, before}}, Before: viewFS{ws, before}, Names: m, StartRepos: repos})
			if v := c.Check(tc.path, tc.k); (v.Action == Refuse) != tc.refused {
				t.Errorf("commit: %s %v (%s), want refused: %v", tc.path, v.Action, v.Why, tc.refused)
			}
			// The sweep's way: planned before the script, run after it.
			dir := t.TempDir()
			ws = filepath.Join(dir, "ws")
			sh(t, dir, base)
			p, err := PlanSweep(SweepSpec{Workspace: ws}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sh(t, ws, tc.script)
			done, err := p.Run(filepath.Join(t.TempDir(), "q"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(ws, tc.path)); (err != nil) != tc.refused {
				t.Errorf("sweep: %s there: %v, want refused: %v\n%+v", tc.path, err == nil, tc.refused, done)
			}
		})
	}
}
