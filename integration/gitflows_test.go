package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Git's own workflows commit whole or not at all. `git worktree add` and
// `git submodule add` write one piece of state in several places (a
// worktree's git directory with its commondir, a submodule's git
// directory with its core.worktree, gitfiles, .gitmodules, the index, the
// config); when everything they point to stays in the workspace and
// nothing in them can run a program, all of it is committed; otherwise
// none of it, and the repository is left as it was: never a prunable
// worktree, an untracked copy of a worktree's files, or an index entry
// without its .gitmodules.

// allowLocalSubmodules lets git clone a local repository as a submodule,
// inside the sandbox and on the host (git refuses the file transport for
// submodules by default).
func (e *env) allowLocalSubmodules(t *testing.T) {
	t.Helper()
	p := filepath.Join(e.home, ".gitconfig")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	e.writeFile(p, string(b)+"[protocol \"file\"]\n\tallow = always\n", 0o644)
}

// gitOK runs git on the host in dir and fails unless it exits 0.
func (e *env) gitOK(t *testing.T, r result, dir string, args ...string) string {
	t.Helper()
	out, err := e.gitOut(dir, args...)
	if err != nil {
		t.Fatalf("host git %v in %s: %v\n%s\n%s\nboundaries %v\npersistence %v", args, dir, err, out, r, r.report["boundaries"], r.report["persistence"])
	}
	return out
}

// noPersistBoundaries fails when the run has persist boundaries (and, in a
// layer run, any boundary: without a layer, git's own write to the
// read-only .git/config is denied during the run).
func noPersistBoundaries(t *testing.T, r result, layer bool) {
	t.Helper()
	for _, b := range boundaries(r) {
		if layer || b["operation"] == "persist" {
			t.Fatalf("unexpected boundary %v\n%s", b, r)
		}
	}
	if layer {
		for _, p := range listOf(r, "persistence") {
			if a := p["action"]; a != "committed" && a != "listed" {
				t.Fatalf("unexpected persistence entry %v\n%s", p, r)
			}
		}
	}
}

func listOf(r result, key string) []map[string]any {
	var out []map[string]any
	list, _ := r.report[key].([]any)
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// TestGitFlowWorktreeAdd: a worktree added inside the workspace is
// committed whole: the host's git lists it (not prunable), its checkout is
// clean, the repository is sound.
func TestGitFlowWorktreeAdd(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, ".")
		r := e.run(t, `git worktree add -q wt2 && cd wt2 && echo b > b && git add b && git commit -qm b`)
		defer logRun(t, r)
		noPersistBoundaries(t, r, layer)
		list := e.gitOK(t, r, e.ws, "worktree", "list", "--porcelain")
		if !strings.Contains(list, "worktree "+filepath.Join(e.ws, "wt2")+"\n") || strings.Contains(list, "prunable") {
			t.Fatalf("git worktree list on the host:\n%s\n%s", list, r)
		}
		if st := e.gitOK(t, r, filepath.Join(e.ws, "wt2"), "status", "--porcelain"); st != "" {
			t.Fatalf("wt2 is not clean on the host: %q\n%s", st, r)
		}
		if got := e.gitOK(t, r, e.ws, "log", "-1", "--format=%s", "refs/heads/wt2"); strings.TrimSpace(got) != "b" {
			t.Fatalf("the branch wt2 is at %q, want the commit made in the worktree\n%s", got, r)
		}
		// As git itself leaves it: the worktree is a nested repository
		// in the main work tree, shown as untracked there.
		if st := e.gitOK(t, r, e.ws, "status", "--porcelain"); st != "?? wt2/\n" {
			t.Fatalf("git status on the host: %q\n%s", st, r)
		}
		e.gitOK(t, r, e.ws, "fsck")
		e.useRepo(t, "wt2")
		if e.marked() {
			t.Fatalf("something the command planted ran when the host used git in wt2\n%s", r)
		}
	})
}

// TestGitFlowSubmoduleAdd: a submodule from a repository inside the
// workspace and from one outside it is committed whole (the index's
// gitlink with its .gitmodules, the submodule's git directory, its
// checkout), and the host's git sees a sound, clean superproject.
func TestGitFlowSubmoduleAdd(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"inside", "outside"} {
		t.Run(where, func(t *testing.T) {
			forModes(t, func(t *testing.T, e *env, layer bool) {
				e.hostRepo(t, ".")
				e.allowLocalSubmodules(t)
				url := e.upstream(t)
				if where == "inside" {
					e.hostRepo(t, "lib")
					e.writeFile(filepath.Join(e.ws, ".git", "info", "exclude"), "/lib/\n", 0o644)
					url = filepath.Join(e.ws, "lib") // by path: a local clone

				}
				r := e.run(t, `git submodule add -q `+url+` sub && git commit -qm sub`)
				defer logRun(t, r)
				noPersistBoundaries(t, r, layer)
				status := e.gitOK(t, r, e.ws, "submodule", "status")
				if !strings.Contains(status, " sub") {
					t.Fatalf("git submodule status on the host: %q\n%s", status, r)
				}
				if layer && strings.HasPrefix(status, "-") {
					// Without a layer .git/config is read-only during the
					// run, so git cannot record the submodule as
					// initialized; with one it can.
					t.Fatalf("the submodule is not initialized on the host: %q\n%s", status, r)
				}
				if st := e.gitOK(t, r, e.ws, "status", "--porcelain"); st != "" {
					t.Fatalf("git status on the host: %q\n%s", st, r)
				}
				if st := e.gitOK(t, r, filepath.Join(e.ws, "sub"), "status", "--porcelain"); st != "" {
					t.Fatalf("git status in sub on the host: %q\n%s", st, r)
				}
				if _, err := os.Stat(filepath.Join(e.ws, "sub", "README")); err != nil && where == "inside" {
					t.Fatalf("the submodule's checkout is missing: %v\n%s", err, r)
				}
				e.gitOK(t, r, e.ws, "fsck")
				e.gitOK(t, r, filepath.Join(e.ws, "sub"), "fsck")
				e.hostProbe(t, "sub", r)
			})
		})
	}
}

// TestGitFlowRollback: a worktree or submodule the command made and then
// bent (its gitdir pointing outside, a .gitmodules that runs a command or
// names a transport helper, a hook in its git directory) is refused whole:
// the host's repository is as it was, and nothing planted runs.
func TestGitFlowRollback(t *testing.T) {
	t.Parallel()
	const add = `git submodule add -q UPSTREAM sub && `
	cases := []struct{ name, script string }{
		{"worktree-gitdir-outside", `git worktree add -q wt2 && echo /nonexistent/wt2/.git > .git/worktrees/wt2/gitdir`},
		{"submodule-update-command", add + `git config -f .gitmodules submodule.sub.update '!touch MARK'`},
		{"submodule-ext-url", add + `git config -f .gitmodules submodule.sub.url 'ext::sh -c touch% MARK'`},
		{"submodule-hook", add + `printf '#!/bin/sh\ntouch MARK\n' > .git/modules/sub/hooks/post-checkout && chmod +x .git/modules/sub/hooks/post-checkout`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "submodule-hook" {
				// The control: without sandboxd the hook runs on the host.
				t.Run("unsandboxed", func(t *testing.T) {
					e := newEnv(t, identities(t)[0])
					e.hostRepo(t, ".")
					e.allowLocalSubmodules(t)
					e.hostSh(t, e.expand(strings.ReplaceAll(c.script, "UPSTREAM", e.upstream(t)), "")+" && git -C sub checkout -q -b x")
					if !e.marked() {
						t.Fatalf("the hook did not run even without sandboxd: the case proves nothing")
					}
				})
			}
			forModes(t, func(t *testing.T, e *env, layer bool) {
				e.hostRepo(t, ".")
				e.allowLocalSubmodules(t)
				head := strings.TrimSpace(e.hostGit(t, "rev-parse", "HEAD"))
				r := e.run(t, e.expand(strings.ReplaceAll(c.script, "UPSTREAM", e.upstream(t)), ""))
				defer logRun(t, r)
				e.rolledBack(t, r, layer, head)
			})
		})
	}
}

// rolledBack checks that the repository at the workspace is as it was
// before a run whose worktree or submodule was refused whole, that the run
// said so, and that the host's git runs nothing planted.
func (e *env) rolledBack(t *testing.T, r result, layer bool, head string) {
	t.Helper()
	if !strings.Contains(r.stderr, "rolled back") {
		t.Fatalf("stderr does not say what was rolled back\n%s", r)
	}
	said := false
	for _, b := range boundaries(r) {
		if b["operation"] == "persist" && strings.Contains(b["rationale"].(string), "rolled back") {
			said = true
		}
	}
	for _, p := range listOf(r, "persistence") {
		if why, _ := p["why"].(string); strings.Contains(why, "rolled back") && (p["action"] == "quarantined" || p["action"] == "restored") {
			said = true
		}
	}
	if !said {
		t.Fatalf("the report does not say what was rolled back: boundaries %v, persistence %v", r.report["boundaries"], r.report["persistence"])
	}
	if st := e.gitOK(t, r, e.ws, "status", "--porcelain"); st != "" {
		t.Fatalf("git status on the host shows a half state: %q\n%s", st, r)
	}
	if list := e.gitOK(t, r, e.ws, "worktree", "list", "--porcelain"); strings.Contains(list, "prunable") || strings.Count(list, "worktree ") != 1 {
		t.Fatalf("git worktree list on the host:\n%s\n%s", list, r)
	}
	if st := e.gitOK(t, r, e.ws, "submodule", "status"); st != "" {
		t.Fatalf("git submodule status on the host: %q\n%s", st, r)
	}
	e.gitOK(t, r, e.ws, "fsck")
	if got := strings.TrimSpace(e.hostGit(t, "rev-parse", "HEAD")); got != head {
		t.Fatalf("HEAD moved from %s to %s\n%s", head, got, r)
	}
	if branches := e.hostGit(t, "branch", "--format=%(refname:short)"); strings.TrimSpace(branches) != "main" {
		t.Fatalf("branches on the host: %q\n%s", branches, r)
	}
	e.gone(t, r, "", ".gitmodules", "sub", "wt2", ".git/modules/sub", ".git/worktrees/wt2")
	// The host user carries on: nothing the command planted runs.
	e.hostRun(t, e.ws, "git", "submodule", "update", "--init")
	e.hostRun(t, e.ws, "git", "worktree", "prune")
	e.hostProbe(t, ".", r)
	if e.marked() {
		t.Fatalf("something the command planted ran on the host\n%s", r)
	}
}
