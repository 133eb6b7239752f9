package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Leaks: what a command leaves behind for a later host tool to run, by
// routes wider than a file's name — a directory git takes for a
// repository, an alias without "!", a pending rebase or cherry-pick,
// widened permissions, protected names at any depth — and whether
// sandboxd's own messages about them can drive the terminal they are
// shown on.
//
// Every attack of the table-driven tests here is first run on the host
// without sandboxd (the "unsandboxed" subtest, as the first identity):
// the host's git
// (2.39.5 when these were written) must run the planted program there, or
// the sandboxed cases prove nothing. Where the attack a reader might first
// try does not work on plain git, the comment says so and the case uses
// the variant that does.

// planted is printed by a case's check when the attack was staged inside
// the sandbox (a layer run always stages it; a direct run may be refused
// the write itself).
const planted = "__LEAK_PLANTED__"

// leakCase is one attack.
type leakCase struct {
	name string
	// setup is host-side preparation after the test's shared setup.
	setup func(t *testing.T, e *env)
	// script is the attack, run in the workspace (placeholders: expand);
	// check prints planted when it was staged.
	script, check string
	// probe is what the host does afterwards, as the user.
	probe func(t *testing.T, e *env)
	// after checks more once the probe ran (nil: nothing).
	after func(t *testing.T, e *env, r result, layer bool)
	// stagedDirect: the attack is staged in direct mode too (it writes
	// no path that is read-only during the run).
	stagedDirect bool
}

// runLeaks runs each case unsandboxed (the marker must appear), then in
// both modes for both identities (the marker must not).
func runLeaks(t *testing.T, base func(t *testing.T, e *env), cases []leakCase) {
	t.Helper()
	for _, c := range cases {
		script := c.script + "\n" + c.check
		prepare := func(t *testing.T, e *env) {
			base(t, e)
			if c.setup != nil {
				c.setup(t, e)
			}
		}
		t.Run(c.name, func(t *testing.T) {
			t.Run("unsandboxed", func(t *testing.T) {
				e := newEnv(t, identities(t)[0])
				prepare(t, e)
				out := e.hostSh(t, e.expand(script, ""))
				if !strings.Contains(out, planted) {
					t.Fatalf("the attack could not even be staged on the host:\n%s", out)
				}
				if e.marked() {
					t.Fatalf("the script itself left the marker: the case proves nothing\n%s", out)
				}
				c.probe(t, e)
				if !e.marked() {
					t.Fatalf("without sandboxd the attack does not run anything on the host either: the case proves nothing\n%s", out)
				}
			})
			forModes(t, func(t *testing.T, e *env, layer bool) {
				prepare(t, e)
				r := e.run(t, e.expand(script, ""))
				if (layer || c.stagedDirect) && !strings.Contains(r.stdout, planted) {
					t.Fatalf("the attack was not staged inside the sandbox (the case would pass vacuously)\n%s", r)
				}
				if e.marked() {
					t.Fatalf("%s exists before the host ran anything: the command wrote into HOME\n%s", e.mark(), r)
				}
				c.probe(t, e)
				if e.marked() {
					t.Fatalf("what the command left in the workspace ran when the host used it\n%s\nreport persistence: %v\nboundaries: %v",
						r, r.report["persistence"], r.report["boundaries"])
				}
				if c.after != nil {
					c.after(t, e, r, layer)
				}
			})
		})
	}
}

// repoConfig is a repository config that runs MARK. The obvious one —
// core.bare = false, core.worktree = .. and core.fsmonitor — does not
// fire in a directory git discovers as a bare repository: git ignores
// core.worktree there, and `git status` stops with "this operation must
// be run in a work tree" before the fsmonitor could run (confirmed on
// git 2.39.5). The pager (on `git log` at a terminal) and an ext::
// remote (on `git fetch`) run in a bare repository, so they are here too.
const repoConfig = "[core]\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"touch MARK; false\"\n\tpager = \"touch MARK; cat\"\n" +
	"[remote \"origin\"]\n\turl = ext::sh -c touch% MARK\n[protocol \"ext\"]\n\tallow = always\n"

// writeConfig is shell writing repoConfig to the file named.
func writeConfig(name string) string {
	return "cat > " + name + " <<'EOF'\n" + repoConfig + "EOF\n"
}

// TestLeakGitDirWiderThanName: a directory with HEAD, refs and objects
// (a symlink will do) is a repository to git whatever its name. Planted
// in a tracked directory, its config and hooks would run when the user
// works there; the host then uses git in the workspace, in tools/, x/
// and node_modules/x/ the way a user would. A directory found that way
// is a bare repository to git: it has no work tree, so only what runs
// without one (the pager, a fetch, the reference-transaction hook) would
// fire there.
func TestLeakGitDirWiderThanName(t *testing.T) {
	t.Parallel()
	base := func(t *testing.T, e *env) {
		e.hostRepo(t, ".")
		e.writeFile(filepath.Join(e.ws, "tools", "t.sh"), "#!/bin/sh\necho tool\n", 0o755)
		e.hostGit(t, "add", "-A")
		e.hostGit(t, "commit", "-q", "-m", "tools")
	}
	probe := func(t *testing.T, e *env) {
		for _, rel := range []string{".", "tools", "x", "node_modules/x"} {
			e.useRepo(t, rel)
		}
	}
	// born makes tools/ a repository on the workspace's objects with the
	// workspace's HEAD commit (so `git log` and `git branch` work there).
	const born = "h=$(git rev-parse HEAD)\nmkdir -p tools/refs/heads && echo \"$h\" > tools/refs/heads/main\n" +
		"echo 'ref: refs/heads/main' > tools/HEAD\nln -s ../.git/objects tools/objects\n"
	isRepo := func(dir string) string {
		return `[ "$(cd ` + dir + ` && git rev-parse --git-dir 2>/dev/null)" = . ] && echo ` + planted
	}
	cases := []leakCase{
		{name: "objects-symlink-config", script: born + writeConfig("tools/config"), check: isRepo("tools"), probe: probe, stagedDirect: true},
		// post-checkout and pre-commit alone never run in a bare
		// repository (git checkout and git commit need a work tree;
		// confirmed); reference-transaction runs on `git branch`.
		{name: "objects-symlink-hooks", script: born + "mkdir -p tools/hooks\nfor h in post-checkout pre-commit reference-transaction; do " +
			evilHook + " > tools/hooks/$h; chmod +x tools/hooks/$h; done",
			check: isRepo("tools"), probe: probe, stagedDirect: true},
		// HEAD a symlink into refs/ (the target need not exist), refs and
		// objects any searchable directory: still a repository (unborn),
		// and `git fetch` runs its ext:: remote.
		{name: "symlinked-head-refs-objects", script: "ln -s refs/heads/main tools/HEAD\nln -s /usr tools/refs\nln -s /usr tools/objects\n" +
			writeConfig("tools/config"), check: isRepo("tools"), probe: probe, stagedDirect: true},
		// objects and refs need only be searchable: an executable file
		// passes git's access(X_OK).
		{name: "executable-files", script: "echo 'ref: refs/heads/main' > tools/HEAD\ncp /bin/true tools/refs\ncp /bin/true tools/objects\n" +
			writeConfig("tools/config"), check: isRepo("tools"), probe: probe, stagedDirect: true},
		// A package tree's protected names are committed and listed; a
		// repository inside one is still a repository.
		{name: "in-package-tree", script: "mkdir -p node_modules/x && cd node_modules/x && git init -q && echo x > f && git add f && git commit -qm x\n" +
			"for h in post-checkout pre-commit reference-transaction; do " + evilHook + " > .git/hooks/$h; chmod +x .git/hooks/$h; done\n" +
			"git config core.fsmonitor 'touch MARK; false'\ncd ../..",
			check: `[ "$(cd node_modules/x && git rev-parse --git-dir)" = .git ] && echo ` + planted, probe: probe, stagedDirect: true},
		// x/ holds only HEAD and commondir; its config comes from the
		// common directory, which is no repository by itself (no HEAD).
		// (commondir = ../.git with a config in x/ runs nothing: git reads
		// the common directory's config, not x/config; confirmed.)
		{name: "commondir", script: "h=$(git rev-parse HEAD)\nmkdir -p x common/refs/heads\necho 'ref: refs/heads/main' > x/HEAD\n" +
			"echo ../common > x/commondir\nln -s ../.git/objects common/objects\necho \"$h\" > common/refs/heads/main\n" +
			writeConfig("common/config"), check: isRepo("x"), probe: probe, stagedDirect: true},
		// A tracked file that happens to be called config stays dormant
		// until HEAD, refs and objects appear beside it.
		{name: "dormant-config", setup: func(t *testing.T, e *env) {
			e.writeFile(filepath.Join(e.ws, "tools", "config"), e.expand(repoConfig, ""), 0o644)
			e.hostGit(t, "add", "-A")
			e.hostGit(t, "commit", "-q", "-m", "tool config")
		}, script: born, check: isRepo("tools"), probe: probe, stagedDirect: true},
		// Everything is tracked already but HEAD, which is no ref: the
		// command rewrites that one file in place (same inode, its
		// directory unchanged).
		{name: "dormant-head-rewritten", setup: func(t *testing.T, e *env) {
			e.dormantRepo(t, "none\n", true)
		}, script: "echo 'ref: refs/heads/main' > tools/HEAD", check: isRepo("tools"), probe: probe, stagedDirect: true},
		// Everything is tracked already, objects a plain file: the command
		// only makes it executable, which is all git's access(X_OK) asks.
		{name: "dormant-chmod", setup: func(t *testing.T, e *env) {
			e.dormantRepo(t, "ref: refs/heads/main\n", false)
		}, script: "chmod +x tools/objects", check: isRepo("tools"), probe: probe, stagedDirect: true},
	}
	// What the user had there and the command never touched stays: the
	// refusal takes away what makes the repository, not the directory.
	for i := range cases {
		cases[i].after = func(t *testing.T, e *env, r result, layer bool) {
			if b, err := os.ReadFile(filepath.Join(e.ws, "tools", "t.sh")); err != nil || string(b) != "#!/bin/sh\necho tool\n" {
				t.Errorf("the user's tracked tools/t.sh, which the command never touched, is no longer in the workspace (%q, %v)\nreport persistence: %v\n%s",
					b, err, r.report["persistence"], r)
			}
		}
	}
	runLeaks(t, base, cases)
}

// dormantRepo commits, on the host, all of a repository in tools/ but
// what makes git take it for one: config (repoConfig), HEAD (head),
// refs/heads/main, and objects, a symlink to the workspace's objects
// (link) or a plain, not executable, file.
func (e *env) dormantRepo(t *testing.T, head string, link bool) {
	t.Helper()
	tools := filepath.Join(e.ws, "tools")
	e.writeFile(filepath.Join(tools, "config"), e.expand(repoConfig, ""), 0o644)
	e.writeFile(filepath.Join(tools, "HEAD"), head, 0o644)
	e.writeFile(filepath.Join(tools, "refs", "heads", "main"), e.hostGit(t, "rev-parse", "HEAD"), 0o644)
	if link {
		if err := os.Symlink("../.git/objects", filepath.Join(tools, "objects")); err != nil {
			t.Fatal(err)
		}
		e.chown(filepath.Join(tools, "objects"))
	} else {
		e.writeFile(filepath.Join(tools, "objects"), "", 0o644)
	}
	e.hostGit(t, "add", "-A")
	e.hostGit(t, "commit", "-q", "-m", "dormant")
	if out, err := e.gitOut(tools, "rev-parse", "--git-dir"); err == nil && strings.TrimSpace(out) == "." {
		t.Fatalf("setup: tools/ is a repository already")
	}
}

// TestLeakAliasWithoutBang: an alias without "!" still runs programs
// through the options it passes (-c core.fsmonitor=..., grep -O...), and
// a repository alias shadows the user's own (`git st`, an alias of
// ~/.gitconfig).
func TestLeakAliasWithoutBang(t *testing.T) {
	t.Parallel()
	base := func(t *testing.T, e *env) {
		e.hostRepo(t, ".")
		e.writeFile(filepath.Join(e.ws, "x.txt"), "x\n", 0o644)
		e.hostGit(t, "add", "-A")
		e.hostGit(t, "commit", "-q", "-m", "x")
		gc := filepath.Join(e.home, ".gitconfig")
		b, err := os.ReadFile(gc)
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(gc, string(b)+"[alias]\n\tst = status\n", 0o644)
	}
	probe := func(t *testing.T, e *env) {
		e.hostRun(t, e.ws, "git", "st")
		e.hostRun(t, e.ws, "git", "g")
	}
	after := func(t *testing.T, e *env, r result, layer bool) {
		if !e.named(r, ".git/config") {
			t.Fatalf("the refusal of .git/config is not reported (no persist boundary, persistence entry or stderr line)\n%s\nboundaries: %v", r, r.report["boundaries"])
		}
	}
	cases := []leakCase{
		// The repository reads .git/config.worktree (the user turned on
		// extensions.worktreeConfig), which does not exist yet. git looks
		// aliases up before it reads config.worktree, so an alias there
		// runs nothing (confirmed); what the alias would pass, it takes
		// from there directly.
		{name: "worktree-config", setup: func(t *testing.T, e *env) {
			e.hostGit(t, "config", "extensions.worktreeConfig", "true")
		}, script: `git config --worktree core.fsmonitor 'touch MARK; false'`,
			check: `git config --worktree core.fsmonitor | grep -q MARK && echo ` + planted, probe: probe, stagedDirect: true,
			after: func(t *testing.T, e *env, r result, layer bool) {
				if !e.named(r, ".git/config.worktree") {
					t.Fatalf("the refusal of .git/config.worktree is not reported\n%s\nboundaries: %v", r, r.report["boundaries"])
				}
			}},
		{name: "fsmonitor-via-c", script: `git config alias.st '-c core.fsmonitor="touch MARK; false" status'`,
			check: `git config --local alias.st | grep -q fsmonitor && echo ` + planted, probe: probe, after: after},
		{name: "grep-open-files-in-pager", script: `git config alias.g 'grep -O"touch MARK;" -e x'`,
			check: `git config --local alias.g | grep -q MARK && echo ` + planted, probe: probe, after: after},
	}
	runLeaks(t, base, cases)
}

// TestLeakSequencerState: an operation in progress runs its todo list
// (exec lines) and merge strategy when the user continues it. For the
// cherry-pick, the minimal state (found on the host) is
// sequencer/head, sequencer/opts and a todo of two picks: `--continue`
// takes the first as the one in progress and skips it; the second runs
// "git merge-x/../evil.sh", which git resolves as a path from the top of
// the work tree.
func TestLeakSequencerState(t *testing.T) {
	t.Parallel()
	base := func(t *testing.T, e *env) {
		e.hostRepo(t, ".")
		e.writeFile(filepath.Join(e.ws, "two.txt"), "two\n", 0o644)
		e.hostGit(t, "add", "-A")
		e.hostGit(t, "commit", "-q", "-m", "two")
	}
	probe := func(t *testing.T, e *env) {
		e.hostRun(t, e.ws, "git", "rebase", "--continue")
		e.hostRun(t, e.ws, "git", "cherry-pick", "--continue")
		e.hostRun(t, e.ws, "git", "status")
	}
	execTodo := `grep -q '^exec' .git/rebase-merge/git-rebase-todo && echo ` + planted
	cases := []leakCase{
		// The todo stops at "break" before its exec line: the command never
		// runs it, the next `git rebase --continue` would.
		{name: "rebase-exec-real-git", script: `GIT_SEQUENCE_EDITOR='sed -i 1ibreak' git rebase -q -i --exec 'touch MARK' HEAD~1`,
			check: execTodo, probe: probe, stagedDirect: true},
		{name: "rebase-exec-planted", script: "mkdir -p .git/rebase-merge && echo refs/heads/main > .git/rebase-merge/head-name && " +
			"git rev-parse HEAD > .git/rebase-merge/onto && git rev-parse HEAD > .git/rebase-merge/orig-head && " +
			"printf 'exec touch MARK\\n' > .git/rebase-merge/git-rebase-todo",
			check: execTodo, probe: probe, stagedDirect: true},
		// "x", after blanks, is exec too.
		{name: "rebase-exec-short", script: "mkdir -p .git/rebase-merge && echo refs/heads/main > .git/rebase-merge/head-name && " +
			"git rev-parse HEAD > .git/rebase-merge/onto && git rev-parse HEAD > .git/rebase-merge/orig-head && " +
			"printf '  x touch MARK\\n' > .git/rebase-merge/git-rebase-todo",
			check: `grep -q 'x touch' .git/rebase-merge/git-rebase-todo && echo ` + planted, probe: probe, stagedDirect: true},
		// A rebase's merge strategy is a file of its own. (The pick must
		// not be a fast-forward: HEAD is moved to a sibling commit.)
		{name: "rebase-strategy", script: "h=$(git rev-parse HEAD)\nmkdir -p .git/rebase-merge git-merge-x\n" +
			evilHook + " > evil.sh && chmod +x evil.sh\n" +
			"echo refs/heads/main > .git/rebase-merge/head-name && git rev-parse HEAD~1 > .git/rebase-merge/onto && " +
			"echo $h > .git/rebase-merge/orig-head && echo x/../evil.sh > .git/rebase-merge/strategy && " +
			"git reset -q --hard HEAD~1 && echo c > c.txt && git add c.txt && git commit -qm c && printf 'pick %s\\n' $h > .git/rebase-merge/git-rebase-todo",
			check: `grep -q evil .git/rebase-merge/strategy && echo ` + planted, probe: probe, stagedDirect: true},
		// Section and key names are case-insensitive to git.
		{name: "cherry-pick-strategy-case", script: "h=$(git rev-parse HEAD)\nmkdir -p .git/sequencer git-merge-x\n" +
			evilHook + " > evil.sh && chmod +x evil.sh\n" +
			"printf '[OPTIONS]\\n\\tStrategy = x/../evil.sh\\n' > .git/sequencer/opts\n" +
			"git rev-parse HEAD~1 > .git/sequencer/head\nprintf 'pick %s\\npick %s\\n' $h $h > .git/sequencer/todo",
			check: `grep -q evil .git/sequencer/opts && echo ` + planted, probe: probe, stagedDirect: true},
		// A rebase the user left stopped (at a break): its todo exists when
		// the run starts, and the command appends to it in place. (In
		// direct mode existing sequencer state is read-only: the write
		// fails.)
		{name: "existing-rebase-append", setup: func(t *testing.T, e *env) {
			e.hostSh(t, `GIT_SEQUENCE_EDITOR='sed -i 1ibreak' git rebase -q -i HEAD~1`)
			if _, err := os.Stat(filepath.Join(e.ws, ".git", "rebase-merge", "git-rebase-todo")); err != nil {
				t.Fatalf("setup: no rebase in progress: %v", err)
			}
		}, script: `echo 'exec touch MARK' >> .git/rebase-merge/git-rebase-todo`, check: execTodo, probe: probe},
		// A cherry-pick the user left in progress, with harmless options:
		// the command rewrites them in place.
		{name: "existing-sequencer-opts", setup: func(t *testing.T, e *env) {
			h := strings.TrimSpace(e.hostGit(t, "rev-parse", "HEAD"))
			seq := filepath.Join(e.ws, ".git", "sequencer")
			e.writeFile(filepath.Join(seq, "head"), e.hostGit(t, "rev-parse", "HEAD~1"), 0o644)
			e.writeFile(filepath.Join(seq, "todo"), "pick "+h+"\npick "+h+"\n", 0o644)
			e.writeFile(filepath.Join(seq, "opts"), "[options]\n\tsignoff = false\n", 0o644)
		}, script: "mkdir -p git-merge-x\n" + evilHook + " > evil.sh && chmod +x evil.sh\n" +
			"printf '[options]\\n\\tstrategy = x/../evil.sh\\n' > .git/sequencer/opts",
			check: `grep -q evil .git/sequencer/opts && echo ` + planted, probe: probe},
		{name: "cherry-pick-strategy", script: "h=$(git rev-parse HEAD)\nmkdir -p .git/sequencer git-merge-x\n" +
			evilHook + " > evil.sh && chmod +x evil.sh\n" +
			"printf '[options]\\n\\tstrategy = x/../evil.sh\\n' > .git/sequencer/opts\n" +
			"git rev-parse HEAD~1 > .git/sequencer/head\nprintf 'pick %s\\npick %s\\n' $h $h > .git/sequencer/todo",
			check: `grep -q evil .git/sequencer/opts && echo ` + planted, probe: probe, stagedDirect: true},
	}
	runLeaks(t, base, cases)
}

// TestLeakPermissions: the commit never widens permissions, so no other
// account can plant what the caller's git runs later; a repository shared
// on purpose stays shared. (chmod widens them on the host, of course: no
// unsandboxed control is needed.)
func TestLeakPermissions(t *testing.T) {
	t.Parallel()
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	t.Run("widen", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, layer bool) {
			e.hostRepo(t, ".")
			src := filepath.Join(e.ws, "src")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			e.chown(src)
			r := e.run(t, `chmod 0777 .git/hooks .git; chmod 0666 .git/config; chmod 0777 README; `+
				`mkdir newdir && chmod 0777 newdir; echo x > newfile && chmod 0666 newfile; mkdir -p src && chmod 0777 src; `+
				`stat -c '%a %n' .git .git/hooks .git/config README newdir newfile src`)
			mode := func(rel string) uint32 { return modeOf(t, filepath.Join(e.ws, rel)) & 0o7777 }
			noWrite := func(rel, what string) {
				t.Helper()
				if m := mode(rel); m&0o022 != 0 {
					t.Errorf("%s is mode %04o on the host: %s\n", rel, m, what)
				}
			}
			for _, g := range []string{".git", ".git/hooks", ".git/config"} {
				noWrite(g, "the repository's own files are group- or other-writable after the run")
			}
			noWrite("src", "an existing directory gained group/other write")
			if layer {
				noWrite("README", "an existing file gained group/other write")
				noWrite("newdir", "a new directory has bits the caller's umask (022) masks")
				noWrite("newfile", "a new file has bits the caller's umask (022) masks")
			} else {
				// Without a commit, files are the command's; but a directory
				// other accounts can write is one they can plant a .envrc, a
				// .vscode or a .git in, new or not.
				noWrite("newdir", "a new directory is left group/other-writable (only directories that existed are narrowed)")
			}
			if t.Failed() {
				t.Logf("%s\nreport persistence: %v\ntransaction: %v", r, r.report["persistence"], r.report["transaction"])
			}
		})
	})
	// POSIX ACLs grant other accounts write without mode bits showing it
	// all, and a default ACL overrides the umask of every file made in the
	// directory later: on .git, the user's next `git config` would leave
	// a world-writable config.
	t.Run("acl", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, layer bool) {
			e.hostRepo(t, ".")
			e.writeFile(filepath.Join(e.ws, "old"), "x\n", 0o644)
			r := e.run(t, `python3 -c '
import os, struct
def acl(entries):
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)
rwx_other = acl([(1, 7, 0xffffffff), (4, 5, 0xffffffff), (0x20, 7, 0xffffffff)])
os.mkdir("newdir")
for d in [".git", ".", "newdir"]:
    os.setxattr(d, "system.posix_acl_default", rwx_other)
open("newfile", "w").close()
for f in ["newfile", "old"]:
    os.setxattr(f, "system.posix_acl_access", acl([(1, 6, 0xffffffff), (4, 4, 0xffffffff), (0x20, 6, 0xffffffff)]))
'`)
			for _, d := range []string{".git", ".", "newdir"} {
				buf := make([]byte, 256)
				if n, err := syscall.Getxattr(filepath.Join(e.ws, d), "system.posix_acl_default", buf); err == nil && n > 0 {
					t.Errorf("%s keeps the default ACL the command gave it\n%s", d, r)
				}
			}
			// The host's own git now rewrites its config under .git.
			e.hostGit(t, "config", "user.name", "After")
			if m := modeOf(t, filepath.Join(e.ws, ".git", "config")); m&0o022 != 0 {
				t.Errorf(".git/config is mode %04o after the host's git rewrote it\n%s", m&0o7777, r)
			}
			if layer {
				for _, f := range []string{"newfile", "old"} {
					if m := modeOf(t, filepath.Join(e.ws, f)); m&0o022 != 0 {
						t.Errorf("%s is mode %04o: the command's ACL widened it\n%s", f, m&0o7777, r)
					}
				}
			}
		})
	})
	t.Run("shared-repository", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, layer bool) {
			e.hostRepo(t, ".")
			e.hostGit(t, "config", "core.sharedRepository", "group")
			if out, err := exec.Command("chmod", "-R", "g+w", filepath.Join(e.ws, ".git")).CombinedOutput(); err != nil {
				t.Fatalf("chmod: %v %s", err, out)
			}
			// git makes every directory it creates in a shared repository
			// setgid (chmod 02775), which seccomp refuses (it cannot tell a
			// directory from a file), so a commit that creates object
			// directories fails inside; a new branch (a file, 0664) works.
			r := e.run(t, `git branch shared-branch && echo BRANCHED`)
			if r.code != 0 || !strings.Contains(r.stdout, "BRANCHED") {
				t.Fatalf("git branch in a shared repository failed\n%s", r)
			}
			if m := modeOf(t, filepath.Join(e.ws, ".git")); m&0o020 == 0 {
				t.Fatalf(".git lost the group write it was shared with: mode %04o\n%s", m&0o7777, r)
			}
			ref := filepath.Join(e.ws, ".git", "refs", "heads", "shared-branch")
			if m := modeOf(t, ref); m&0o020 == 0 || m&0o002 != 0 {
				t.Fatalf("the new branch is mode %04o: a shared repository keeps group write, never other write\n%s", m&0o7777, r)
			}
			if got := e.hostGit(t, "branch", "--list", "shared-branch"); !strings.Contains(got, "shared-branch") {
				t.Fatalf("the branch is not in the repository on the host: %q\n%s", got, r)
			}
			if layer {
				shared := strings.Contains(r.stderr, "shared repository")
				if tr, ok := r.report["transaction"].(map[string]any); ok {
					if c, ok := tr["committed"].(map[string]any); ok && c["shared_repositories"] != nil {
						shared = true
					}
				}
				if !shared {
					t.Fatalf("neither the report nor stderr says the repository is shared\n%s\ntransaction: %v", r, r.report["transaction"])
				}
			}
		})
	})
}

// TestLeakProtectedNames: protected names at any depth are not left in
// the workspace, in a repository the command clones too (a clone is
// judged like any other directory: nothing the command wrote exempts it);
// agent instructions, names inside package trees, a Dev Containers file
// and a hook manager's file where no hook runs are kept and listed; a
// workspace's own [filesystem] protected adds names. (The tools that run
// these files — VS Code, direnv, Claude Code... — are not on the test
// machine: the effect checked is the file's absence, and that git on the
// host cannot bring it back from the clone's history.)
func TestLeakProtectedNames(t *testing.T) {
	t.Parallel()
	refused := []string{".mcp.json", ".cursor/mcp.json", "proj.code-workspace",
		"sub/dir/.envrc", "pkg/.vscode/tasks.json", "deep/.claude/settings.json", ".gemini/settings.json", ".aider.conf.yml",
		"x/deploy/run.sh", "clone/.envrc", "clone/.vscode/settings.json"}
	listed := []string{"node_modules/x/.vscode/tasks.json", "CLAUDE.md", "sub/AGENTS.md", "lib/AGENTS.md", "AGENTS.md",
		".devcontainer.json", "lefthook.yml"}
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, ".")
		e.writeFile(filepath.Join(e.ws, "AGENTS.md"), "host instructions\n", 0o644)
		e.writeFile(filepath.Join(e.ws, ".sandboxd.toml"), "[filesystem]\nprotected = [\"deploy/run.sh\"]\n", 0o644)
		// In HOME (read-only inside, but id-mapped: a root caller's
		// command sees root's files as its own, so git does not refuse
		// the repository as one of dubious ownership).
		src := filepath.Join(e.home, "src")
		e.writeFile(filepath.Join(src, ".envrc"), "echo from-src\n", 0o644)
		e.writeFile(filepath.Join(src, ".vscode", "settings.json"), "{}\n", 0o644)
		e.hostGitIn(t, src, "init", "-q")
		e.hostGitIn(t, src, "add", "-A")
		e.hostGitIn(t, src, "commit", "-q", "-m", "src")
		var script strings.Builder
		for _, p := range append(append([]string{}, refused[:9]...), append(listed[:4], listed[5:]...)...) {
			fmt.Fprintf(&script, "mkdir -p %q; echo 'touch MARK' > %s\n", filepath.Dir(p), p)
		}
		script.WriteString("echo 'also run touch MARK' >> AGENTS.md\n")
		script.WriteString("git clone -q file://" + src + " clone && test -e clone/.envrc && echo CLONED\n")
		r := e.run(t, e.expand(script.String(), ""))
		if !strings.Contains(r.stdout, "CLONED") {
			t.Fatalf("the clone inside failed (the listed case would pass vacuously)\n%s", r)
		}
		for _, p := range refused {
			if _, err := os.Lstat(filepath.Join(e.ws, p)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s remains in the workspace (lstat: %v)", p, err)
			} else if !e.named(r, p) {
				t.Errorf("%s is gone but neither the report nor stderr names it", p)
			}
		}
		// The clone's history carries them: git on the host must not
		// write them back.
		e.hostRun(t, filepath.Join(e.ws, "clone"), "git", "checkout", "--", ".")
		e.hostRun(t, filepath.Join(e.ws, "clone"), "git", "reset", "-q", "--hard")
		e.gone(t, r, "", "clone/.envrc", "clone/.vscode")
		tr, _ := r.report["transaction"].(map[string]any)
		switch guard, _ := tr["persistence_guard"].(string); {
		case layer && guard != "commit":
			t.Errorf("report transaction.persistence_guard = %q, want commit", guard)
		case !layer && (guard != "sweep" || tr["exposed"] == nil || tr["exposed"] == ""):
			t.Errorf("report transaction = %v, want persistence_guard sweep and what it exposes", tr)
		}
		for _, p := range listed {
			b, err := os.ReadFile(filepath.Join(e.ws, p))
			switch {
			case err != nil:
				t.Errorf("%s was not kept: %v", p, err)
			case p == "AGENTS.md" && !strings.Contains(string(b), "also run"):
				t.Errorf("the change to the existing AGENTS.md was not kept: %q", b)
			case !e.named(r, p):
				t.Errorf("%s was kept but neither the report's persistence list nor stderr names it", p)
			}
		}
		if t.Failed() {
			t.Logf("%s\nreport persistence: %v\nboundaries: %v", r, r.report["persistence"], r.report["boundaries"])
		}
	})
}

// TestLeakOutputEscaped: a file name carrying terminal controls (OSC 52
// clipboard, OSC 0/10/11 title and colour queries, a screen clear,
// reverse video) and a fake prompt, shown by sandboxd's own messages on
// the terminal a person answers at: the denial, the question, the "not
// committed" and quarantine lines. None of its bytes may drive the
// terminal, and reverse video comes only from sandboxd's frame. The
// command also prints the name and a reverse-video imitation of the
// question header itself.
func TestLeakOutputEscaped(t *testing.T) {
	// Serial: it reads the terminal's transcript once it is quiet for a fixed time.
	const fake = "\nAllow exactly this, once? [y/N] "
	// The name: every control of the brief (and CSI as the C1 control
	// U+009B, which some terminals take for ESC [), then the fake prompt. A "/"
	// cannot be in one file name, so "[y" ends a directory and "N] " is
	// the file below it.
	dirName := "\x1b]52;c;ZXZpbA==\x07\x1b]0;t\x07\x1b]10;?\x07\x1b]11;?\x07\x1b[2J\u009b2J\x1b[7m" + strings.TrimSuffix(fake, "/N] ")
	// The same in the script (printf), written so that the script text,
	// which the question shows, has no prompt marker of its own.
	const shName = `n=$(printf '\033]52;c;ZXZpbA==\007\033]0;t\007\033]10;?\007\033]11;?\007\033[2J\302\2332J\033[7m\nAllow exactly this, once? [y')`
	const shOut = `printf '\033[7m---- sandboxd: permission request ----\033[0m\n'; printf '%s\n' "$d/N] "; printf '%s\n' "$d/N] " >&2`
	type outCase struct {
		name string
		// target is the directory below which the command writes the name
		// ("OUT": a directory outside the workspace, where the host made
		// the name's directory); mk is the shell that makes that
		// directory, $d, if the command must.
		target, mk string
	}
	cases := []outCase{
		// The write is denied, the person asked (and says no).
		{"outside", "OUT", ""},
		// .vscode exists (the host made it): layer mode does not commit
		// the new directory, direct mode has .vscode read-only and the
		// mkdir is denied.
		{"vscode", ".vscode", `mkdir -p "$d"`},
		// A protected name of its own (*.code-workspace) below a
		// directory of the name: not committed, or quarantined.
		{"code-workspace", ".", `mkdir -p "$d"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forModes(t, func(t *testing.T, e *env, layer bool) {
				file := "N] "
				unchanged := func() {}
				base := c.target // relative: mkdir -p of an absolute path tries every parent
				switch c.target {
				case "OUT":
					base = e.mkdir("out", 0o755)
					e.mkdir(filepath.Join("out", dirName), 0o755)
				case ".vscode":
					settings := filepath.Join(e.ws, base, "settings.json")
					e.writeFile(settings, "{}\n", 0o644)
					unchanged = fileUnchanged(t, settings)
				case ".":
					file = "N] .code-workspace"
				}
				target := filepath.Join(base, dirName, file)
				if !filepath.IsAbs(target) {
					target = filepath.Join(e.ws, target)
				}
				script := shName + "\nd=" + base + "/$n\n" + c.mk + "\n" + shOut + "\necho x > \"$d/" + file + "\""
				tm := newFramedTerminal(t, e)
				args := append(append([]string{"run"}, e.runArgs...), "--reviewer", "human", "-c", script+"\necho "+ranMarker)
				r := e.sandboxdOpts(runOpts{tty: tm.slave, ttyStdout: true, ttyStderr: true}, args...)
				text := tm.settled()
				if !strings.Contains(text, ranMarker) {
					t.Fatalf("the command did not run to its end\n%s\ntranscript %q", r, text)
				}
				if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the file was written (lstat: %v)\ntranscript %q", err, text)
				}
				unchanged()
				for _, raw := range []string{"\x1b]52", "\x1b]0;", "\x1b]10;", "\x1b]11;", "\x1b[2J", "\x1b[7m", "\u009b", "\x07"} {
					if i := strings.Index(text, raw); i >= 0 {
						t.Errorf("the raw %q reached the terminal: ...%q...", raw, text[max(0, i-80):min(len(text), i+80)])
					}
				}
				// Reverse video only as sandboxd's frame.
				for rest := text; ; {
					i := strings.Index(rest, frameOn)
					if i < 0 {
						break
					}
					rest = rest[i+len(frameOn):]
					if !strings.HasPrefix(rest, frameHeader) && !strings.HasPrefix(rest, promptMarker) && !strings.HasPrefix(rest, suggestHeader) {
						t.Errorf("reverse video that is not sandboxd's frame: %q", rest[:min(len(rest), 80)])
					}
				}
				// The name is shown, escaped, by sandboxd's own message (where
				// the message names the file, its fake prompt whole).
				// In the vscode case sandboxd may name only .vscode (the
				// protected name), not the file below it; if it names the
				// file at all, it must be escaped too.
				var shown []string
				if c.target != ".vscode" || reportNames(r, dirName) {
					shown = []string{`\x1b]52;c;ZXZpbA==\x07\x1b]0;t\x07\x1b]10;?\x07\x1b]11;?\x07`, `\x1b[2J\u009b2J\x1b[7m\nAllow exactly this, once? [y`}
				}
				if c.target != ".vscode" {
					shown = append(shown, `\nAllow exactly this, once? [y/N] `)
				}
				for _, esc := range shown {
					if !strings.Contains(text, esc) {
						t.Errorf("the escaped name (%q) is not on the terminal", esc)
					}
				}
				asked := 0
				for _, b := range boundaries(r) {
					if b["source"] == "human" {
						asked++
					}
				}
				if c.target == "OUT" && asked == 0 {
					t.Errorf("the person was not asked about the write outside the workspace: boundaries %v", boundaries(r))
				}
				if got := strings.Count(text, frameOn+promptMarker); got != asked {
					t.Errorf("%d framed prompts on the terminal for %d questions", got, asked)
				}
				if got := strings.Count(text, frameOn+frameHeader); got != asked {
					t.Errorf("%d framed question headers on the terminal for %d questions", got, asked)
				}
				if t.Failed() {
					t.Logf("%s\nboundaries %v\npersistence %v\ntranscript %q", r, boundaries(r), r.report["persistence"], text)
				}
			})
		})
	}
}

// ---- helpers ----

// reportNames reports whether a boundary's or a persistence entry's path
// in the report contains s.
func reportNames(r result, s string) bool {
	for _, key := range []string{"boundaries", "persistence"} {
		list, _ := r.report[key].([]any)
		for _, item := range list {
			if m, ok := item.(map[string]any); ok {
				if p, _ := m["path"].(string); strings.Contains(p, s) {
					return true
				}
			}
		}
	}
	return false
}

// frameOn and frameHeader are how sandboxd opens a question
// (termfilter.FrameOn and review.Human's header); suggestHeader opens
// the rules it shows the person once the run is over.
const (
	frameOn       = "\x1b[0;7m"
	frameHeader   = "---- sandboxd: permission request ----"
	suggestHeader = "---- sandboxd: rules that would allow what was denied, next time ----"
)

// framedTerminal is a pty that answers "n" to every question sandboxd
// frames — only those: text that merely reads like the prompt (from the
// command's output, or an escaped name) is not answered.
type framedTerminal struct {
	master, slave *os.File
	mu            sync.Mutex
	transcript    bytes.Buffer
	done          chan struct{}
}

func newFramedTerminal(t *testing.T, e *env) *framedTerminal {
	t.Helper()
	m, s := openPTY(t, e)
	tm := &framedTerminal{master: m, slave: s, done: make(chan struct{})}
	t.Cleanup(func() { m.Close(); s.Close(); <-tm.done })
	go func() {
		defer close(tm.done)
		answered := 0
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			if n > 0 {
				tm.mu.Lock()
				tm.transcript.Write(buf[:n])
				asked := strings.Count(tm.transcript.String(), frameOn+promptMarker)
				tm.mu.Unlock()
				for ; answered < asked; answered++ {
					m.Write([]byte("n\n"))
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return tm
}

// settled returns the transcript once nothing more arrives.
func (tm *framedTerminal) settled() string {
	last := -1
	for i := 0; i < 50; i++ {
		tm.mu.Lock()
		n := tm.transcript.Len()
		tm.mu.Unlock()
		if n == last {
			break
		}
		last = n
		time.Sleep(20 * time.Millisecond)
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.transcript.String()
}

// marked reports whether the marker exists.
func (e *env) marked() bool {
	_, err := os.Lstat(e.mark())
	return err == nil
}

// hostEnv is the environment host-side tools run with: the env's HOME, no
// system git config, no repository discovery above the env's directory,
// and no editor or pager that could wait for a person.
func (e *env) hostEnv() []string {
	return []string{"HOME=" + e.home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES=" + e.dir, "GIT_EDITOR=true", "PAGER=cat"}
}

func (e *env) hostCmd(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = e.hostEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
	}
	return cmd
}

// hostRun runs a program on the host in dir as the env's identity, the
// way the user would after the run, and returns its output; its exit
// status does not matter (the effect is checked).
func (e *env) hostRun(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := e.hostCmd(ctx, dir, name, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v in %s did not finish: %s", name, args, dir, out)
	}
	return string(out)
}

// hostSh runs script on the host without sandboxd, in the workspace.
func (e *env) hostSh(t *testing.T, script string) string {
	t.Helper()
	return e.hostRun(t, e.ws, "bash", "-c", script)
}

// gitTTY runs git in dir with a pty as its terminal, so that git starts
// its pager as it would for a person.
func (e *env) gitTTY(t *testing.T, dir string, args ...string) {
	t.Helper()
	tm := newTerminal(t, e, func(int, string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := e.hostCmd(ctx, dir, "git", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tm.slave, tm.slave, tm.slave
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("git %v at a terminal in %s did not finish: %q", args, dir, tm.text())
	}
}

// useRepo is the user working with git in the workspace directory rel:
// status, log at a terminal, a branch, a fetch, a commit and a checkout.
func (e *env) useRepo(t *testing.T, rel string) {
	t.Helper()
	dir := filepath.Join(e.ws, rel)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return
	}
	e.hostRun(t, dir, "git", "status")
	e.gitTTY(t, dir, "log", "-1")
	e.hostRun(t, dir, "git", "log", "-1")
	e.hostRun(t, dir, "git", "branch", "probe-"+randHex(3))
	e.hostRun(t, dir, "git", "fetch", "-q")
	e.hostRun(t, dir, "git", "commit", "-q", "--allow-empty", "-m", "probe")
	e.hostRun(t, dir, "git", "checkout", "-q", "-b", "probe-"+randHex(3))
}

// named reports whether the run told about the workspace path rel: an
// entry of the report's persistence list at or around it, a boundary on
// it, or stderr naming it.
func (e *env) named(r result, rel string) bool {
	abs := filepath.Join(e.ws, rel)
	return reportListNames(r, "persistence", rel) || reportListNames(r, "boundaries", abs) || strings.Contains(r.stderr, abs)
}

// inCache sets C to the run's private cache (the parent of
// XDG_CACHE_HOME, which the command writes straight through and which
// stays on the host), or, without sandboxd, to a directory in HOME. The
// variable's name is spelled so that expand leaves it alone.
const inCache = `x=$(printenv XDG_CACHE_H''OME || echo HOME/.cache/xdg); C=$(dirname "$x"); [ -d "$C" ] || mkdir -p "$C"` + "\n"

// gone fails for every workspace-relative path of rels that is still
// there (lstat: a dangling symlink counts).
func (e *env) gone(t *testing.T, r result, root string, rels ...string) {
	t.Helper()
	if root == "" {
		root = e.ws
	}
	for _, rel := range rels {
		if st, err := os.Lstat(filepath.Join(root, rel)); !errors.Is(err, fs.ErrNotExist) {
			what := fmt.Sprint(err)
			if err == nil {
				what = st.Mode().String()
			}
			t.Errorf("%s remains in the workspace (%s)", rel, what)
		}
	}
}

// logRun shows the run and its report when the test failed.
func logRun(t *testing.T, r result) {
	t.Helper()
	if t.Failed() {
		t.Logf("%s\nreport persistence: %v\nboundaries: %v", r, r.report["persistence"], r.report["boundaries"])
	}
}

// noOtherWritable fails for every directory under root that group or
// other accounts may write.
func noOtherWritable(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Errorf("walking %s: %v", p, err)
			return nil
		}
		if d.IsDir() {
			if m := modeOf(t, p); m&0o022 != 0 {
				t.Errorf("%s is mode %04o on the host: other accounts could plant in it", p, m&0o7777)
			}
		}
		return nil
	})
}

// twoCommits is a workspace repository with two commits (a rebase of
// HEAD~1 has something to do).
func twoCommits(t *testing.T, e *env) {
	e.hostRepo(t, ".")
	e.writeFile(filepath.Join(e.ws, "two.txt"), "two\n", 0o644)
	e.hostGit(t, "add", "-A")
	e.hostGit(t, "commit", "-q", "-m", "two")
}

// TestLeakSequencerSymlink: sequencer state moved out of the git
// directory and reached through a symlink in its place: what git reads
// there comes from a path no rule of the git directory looks at.
func TestLeakSequencerSymlink(t *testing.T) {
	t.Parallel()
	probe := func(t *testing.T, e *env) {
		e.hostRun(t, e.ws, "git", "rebase", "--continue")
		e.hostRun(t, e.ws, "git", "cherry-pick", "--continue")
		e.hostRun(t, e.ws, "git", "status")
	}
	notLink := func(rel string) func(t *testing.T, e *env, r result, layer bool) {
		return func(t *testing.T, e *env, r result, layer bool) {
			if st, err := os.Lstat(filepath.Join(e.ws, rel)); err == nil && st.Mode()&fs.ModeSymlink != 0 {
				t.Errorf("%s is still a symlink on the host\n%s\nreport persistence: %v", rel, r, r.report["persistence"])
			}
		}
	}
	runLeaks(t, twoCommits, []leakCase{
		// A real rebase stopped at a break; its state moved to notes/ in
		// the work tree, an exec line added there.
		{name: "rebase-merge", script: `GIT_SEQUENCE_EDITOR="sed -i '1i break'" git rebase -q -i HEAD~1` + "\n" +
			`mv .git/rebase-merge notes && ln -s ../notes .git/rebase-merge && sed -i "1i exec touch MARK" notes/git-rebase-todo`,
			check: `grep -q '^exec' .git/rebase-merge/git-rebase-todo && echo ` + planted, probe: probe,
			after: notLink(".git/rebase-merge"), stagedDirect: true},
		// The cherry-pick state of TestLeakSequencerState's strategy case,
		// in seqstate/.
		{name: "sequencer", script: "h=$(git rev-parse HEAD)\nmkdir -p seqstate git-merge-x\n" +
			evilHook + " > payload && chmod +x payload\n" +
			"printf '[options]\\n\\tstrategy = x/../payload\\n' > seqstate/opts\n" +
			"git rev-parse HEAD~1 > seqstate/head\nprintf 'pick %s\\npick %s\\n' $h $h > seqstate/todo\n" +
			"ln -s ../seqstate .git/sequencer",
			check: `grep -q payload .git/sequencer/opts && echo ` + planted, probe: probe,
			after: notLink(".git/sequencer"), stagedDirect: true},
	})
}

// TestLeakRedirectedOnTheWay: a directory on the way to a git directory,
// or to a path a repository's config names, replaced by a symlink into
// the private cache, which the command writes straight through and which
// stays on the host. What git then reads there is the command's.
func TestLeakRedirectedOnTheWay(t *testing.T) {
	t.Parallel()
	addSub := func(t *testing.T, e *env, dir string) {
		e.hostGitIn(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", e.upstream(t), "sub")
		e.hostGitIn(t, dir, "commit", "-q", "-m", "sub")
	}
	cases := []leakCase{
		// .git/modules of an existing submodule, copied, the copy given an
		// fsmonitor (and the absolute work tree it needs from there). (In
		// direct mode the existing .git/modules is pinned: the swap fails.)
		{name: "modules-existing", setup: func(t *testing.T, e *env) {
			e.hostRepo(t, ".")
			addSub(t, e, e.ws)
		}, script: inCache + `cp -a .git/modules "$C/m"` + "\n" +
			`git config --file "$C/m/sub/config" core.worktree "$PWD/sub"` + "\n" +
			`git config --file "$C/m/sub/config" core.fsmonitor "touch MARK; false"` + "\n" +
			`rm -rf .git/modules && ln -s "$C/m" .git/modules`,
			check: `git -C sub config core.fsmonitor | grep -q MARK && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, e.ws, "git", "status")
				e.hostRun(t, filepath.Join(e.ws, "sub"), "git", "status")
			}},
		// A fresh clone whose submodule is declared, not initialised: the
		// command plants its git directory; `submodule update --init`
		// takes it and fetches through its sshCommand.
		{name: "modules-uninitialised", setup: func(t *testing.T, e *env) {
			proj := e.mkdir("proj", 0o755)
			e.writeFile(filepath.Join(proj, "README"), "hello\n", 0o644)
			e.hostGitIn(t, proj, "init", "-q")
			e.hostGitIn(t, proj, "add", "-A")
			e.hostGitIn(t, proj, "commit", "-q", "-m", "initial")
			addSub(t, e, proj)
			e.hostGitIn(t, e.dir, "clone", "-q", proj, e.ws)
			if _, err := os.Lstat(filepath.Join(e.ws, ".git", "modules")); err == nil {
				t.Fatal("setup: the clone initialised its submodule")
			}
		}, script: inCache + `mkdir -p "$C/m" && git init -q --bare "$C/m/sub"` + "\n" +
			`git config --file "$C/m/sub/config" core.bare false` + "\n" +
			`git config --file "$C/m/sub/config" core.fsmonitor "touch MARK; false"` + "\n" +
			`git config --file "$C/m/sub/config" remote.origin.url "x@localhost:repo"` + "\n" +
			`git config --file "$C/m/sub/config" core.sshCommand "touch MARK; false"` + "\n" +
			evilHook + ` > "$C/m/sub/hooks/post-checkout" && chmod +x "$C/m/sub/hooks/post-checkout"` + "\n" +
			`ln -s "$C/m" .git/modules`,
			check: `git config --file .git/modules/sub/config core.sshCommand | grep -q MARK && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, e.ws, "git", "-c", "protocol.file.allow=always", "submodule", "update", "--init")
				e.hostRun(t, e.ws, "git", "status")
			}, stagedDirect: true},
		// .git/worktrees of a linked worktree, copied, the copy's commondir
		// a planted common directory with an fsmonitor. (In direct mode
		// the existing .git/worktrees is pinned: the swap fails.)
		{name: "worktrees", setup: func(t *testing.T, e *env) {
			e.hostRepo(t, ".")
			e.hostGit(t, "worktree", "add", "-q", "wt")
		}, script: inCache + `cp -a .git/worktrees "$C/wt"` + "\n" +
			`mkdir -p "$C/common" && cp -a .git/HEAD .git/objects .git/refs .git/config "$C/common/" && mkdir -p "$C/common/hooks"` + "\n" +
			`git config --file "$C/common/config" core.fsmonitor "touch MARK; false"` + "\n" +
			`echo "$C/common" > "$C/wt/wt/commondir"` + "\n" +
			`rm -rf .git/worktrees && ln -s "$C/wt" .git/worktrees`,
			check: `git -C wt config core.fsmonitor | grep -q MARK && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, filepath.Join(e.ws, "wt"), "git", "status")
				e.hostRun(t, filepath.Join(e.ws, "wt"), "git", "commit", "-q", "--allow-empty", "-m", "probe")
			}},
		// core.hooksPath = scripts/githooks, committed with a harmless
		// pre-commit: scripts/ becomes a symlink to a copy with an evil one.
		// (In direct mode the hooks path is read-only: the swap fails.)
		{name: "hookspath-parent", setup: func(t *testing.T, e *env) {
			e.hostRepo(t, ".")
			e.hostGit(t, "config", "core.hooksPath", "scripts/githooks")
			e.writeFile(filepath.Join(e.ws, "scripts", "githooks", "pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
			e.hostGit(t, "add", "-A")
			e.hostGit(t, "commit", "-q", "-m", "hooks")
		}, script: inCache + `cp -a scripts "$C/scripts"` + "\n" +
			evilHook + ` > "$C/scripts/githooks/pre-commit"; chmod +x "$C/scripts/githooks/pre-commit"` + "\n" +
			`rm -rf scripts && ln -s "$C/scripts" scripts`,
			check: `grep -q MARK scripts/githooks/pre-commit && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, e.ws, "git", "commit", "-q", "--allow-empty", "-m", "x")
			}},
	}
	runLeaks(t, func(t *testing.T, e *env) {}, cases)
}

// TestLeakFakeBareHides: a directory made to look like a bare repository
// for a moment (HEAD, objects, refs) is not entered by a scan that skips
// git directories' insides: what the command put below it must still be
// seen.
func TestLeakFakeBareHides(t *testing.T) {
	t.Parallel()
	base := func(t *testing.T, e *env) {
		e.hostRepo(t, ".")
		e.writeFile(filepath.Join(e.ws, "src", "main.c"), "int main(void) { return 0; }\n", 0o644)
		e.hostGit(t, "add", "-A")
		e.hostGit(t, "commit", "-q", "-m", "src")
	}
	const fakeBare = "echo 'ref: refs/heads/main' > src/HEAD && mkdir -p src/objects src/refs"
	runLeaks(t, base, []leakCase{
		// A nested repository with an fsmonitor, added as a gitlink: the
		// host's `git status` at the top looks into it.
		{name: "nested-repo", script: "git init -q src/lib && git -C src/lib -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && git add src/lib && " +
			`git config --file src/lib/.git/config core.fsmonitor "touch MARK; false" && ` + fakeBare,
			check: `git config --file src/lib/.git/config core.fsmonitor | grep -q MARK && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, e.ws, "git", "status")
				e.hostRun(t, filepath.Join(e.ws, "src", "lib"), "git", "status")
			},
			after: func(t *testing.T, e *env, r result, layer bool) {
				noExecConfig(t, filepath.Join(e.ws, "src", "lib", ".git", "config"), "", r)
			}, stagedDirect: true},
		// A gitfile into a repository in the cache, and a .envrc beside it.
		{name: "gitfile-and-envrc", script: inCache + `git init -q "$C/r" && git -C "$C/r" config core.fsmonitor "touch MARK; false"` + "\n" +
			`mkdir -p src/app && printf 'gitdir: %s\n' "$C/r/.git" > src/app/.git && echo 'touch MARK' > src/app/.envrc && ` + fakeBare,
			check: `test -f src/app/.envrc && git -C src/app config core.fsmonitor | grep -q MARK && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, e.ws, "git", "status")
				e.hostRun(t, filepath.Join(e.ws, "src", "app"), "git", "status")
			},
			after: func(t *testing.T, e *env, r result, layer bool) {
				e.gone(t, r, "", "src/app/.git", "src/app/.envrc")
				logRun(t, r)
			}, stagedDirect: true},
	})
}

// TestLeakGlobalHooksPath: the caller's own ~/.gitconfig has a relative
// core.hooksPath, so .githooks in any work tree — a repository the
// command makes, or the workspace's own — holds hooks.
func TestLeakGlobalHooksPath(t *testing.T) {
	t.Parallel()
	base := func(t *testing.T, e *env) {
		gc := filepath.Join(e.home, ".gitconfig")
		b, err := os.ReadFile(gc)
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(gc, string(b)+"[core]\n\thooksPath = .githooks\n", 0o644)
		e.hostRepo(t, ".")
	}
	runLeaks(t, base, []leakCase{
		{name: "new-repo", script: "git init -q sub && mkdir -p sub/.githooks && " + evilHook + " > sub/.githooks/pre-commit && chmod +x sub/.githooks/pre-commit",
			check: `test -x sub/.githooks/pre-commit && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, e.ws, "git", "-C", "sub", "commit", "-q", "--allow-empty", "-m", "x")
			}, stagedDirect: true},
		{name: "workspace-repo", script: "mkdir -p .githooks && " + evilHook + " > .githooks/pre-commit && chmod +x .githooks/pre-commit",
			check: `test -x .githooks/pre-commit && echo ` + planted,
			probe: func(t *testing.T, e *env) {
				e.hostRun(t, e.ws, "git", "commit", "-q", "--allow-empty", "-m", "x")
			}, stagedDirect: true},
	})
}

// TestLeakSequencerModes: the sequencer state of a real stopped rebase
// and the refs made writable to other accounts, who could then plant an
// exec line or move a branch. (chmod widens them on the host, of course:
// no unsandboxed control is needed.) The break was in direct mode; both
// are checked.
func TestLeakSequencerModes(t *testing.T) {
	t.Parallel()
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	forModes(t, func(t *testing.T, e *env, layer bool) {
		twoCommits(t, e)
		r := e.run(t, `GIT_SEQUENCE_EDITOR="sed -i '1i break'" git rebase -q -i HEAD~1`+"\n"+
			`chmod 666 .git/rebase-merge/git-rebase-todo; chmod 777 .git/refs; stat -c 'mode %a %n' .git/rebase-merge/git-rebase-todo .git/refs`)
		if !strings.Contains(r.stdout, "mode 666 .git/rebase-merge/git-rebase-todo") || !strings.Contains(r.stdout, "mode 777 .git/refs") {
			t.Fatalf("the rebase or the chmod did not happen inside (the test would pass vacuously)\n%s", r)
		}
		for _, rel := range []string{".git/rebase-merge/git-rebase-todo", ".git/refs"} {
			p := filepath.Join(e.ws, rel)
			if _, err := os.Lstat(p); err != nil {
				continue // not committed at all: nothing to write
			}
			if m := modeOf(t, p); m&0o022 != 0 {
				t.Errorf("%s is mode %04o on the host", rel, m&0o7777)
			}
		}
		if t.Failed() {
			t.Logf("%s\nreport persistence: %v", r, r.report["persistence"])
		}
	})
}

// TestLeakSymlinkedNamePart: the first part of a protected name of
// several parts (.hg of .hg/hgrc, .github of .github/hooks, mise of
// mise/config.toml) made a symlink to a directory that holds the rest,
// and a symlink the user made (.github -> shared) written through.
func TestLeakSymlinkedNamePart(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("hg"); err == nil {
		// Mercurial is there: the repository's own .hg moved aside and
		// linked back, with a hook that `hg status` runs.
		runLeaks(t, func(t *testing.T, e *env) {
			e.writeFile(filepath.Join(e.ws, "README"), "hello\n", 0o644)
			e.hostRun(t, e.ws, "hg", "init")
			if _, err := os.Stat(filepath.Join(e.ws, ".hg", "requires")); err != nil {
				t.Fatalf("setup: hg init: %v", err)
			}
		}, []leakCase{{name: "hg-moved",
			script: `mv .hg h && ln -s h .hg && printf '[hooks]\npre-status = touch MARK\n' >> h/hgrc`,
			check:  `grep -q MARK .hg/hgrc && echo ` + planted,
			probe:  func(t *testing.T, e *env) { e.hostRun(t, e.ws, "hg", "status") },
			after: func(t *testing.T, e *env, r result, layer bool) {
				if st, err := os.Lstat(filepath.Join(e.ws, ".hg")); err == nil && st.Mode()&fs.ModeSymlink != 0 {
					t.Errorf(".hg is still a symlink on the host\n%s\nreport persistence: %v", r, r.report["persistence"])
				}
			}}}) // not staged in direct mode: .hg/requires is read-only for the run, so .hg is pinned and cannot be moved
	}
	t.Run("new-links", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, layer bool) {
			r := e.run(t, e.expand("mkdir -p h gh/hooks m && printf '[hooks]\\npre-status = touch MARK\\n' > h/hgrc && ln -s h .hg\n"+
				"echo '{\"hooks\":{}}' > gh/hooks/evil.json && ln -s gh .github\n"+
				"echo '[env]' > m/config.toml && ln -s m mise\n"+
				"test -f .hg/hgrc && test -f .github/hooks/evil.json && test -f mise/config.toml && echo "+planted, ""))
			if !strings.Contains(r.stdout, planted) {
				t.Fatalf("the links were not made inside\n%s", r)
			}
			e.gone(t, r, "", ".hg", ".github", "mise")
			logRun(t, r)
		})
	})
	t.Run("existing-link", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, layer bool) {
			e.mkdir(filepath.Join("ws", "shared", "hooks"), 0o755)
			e.chown(filepath.Join(e.ws, "shared"))
			if err := os.Symlink("shared", filepath.Join(e.ws, ".github")); err != nil {
				t.Fatal(err)
			}
			e.chown(filepath.Join(e.ws, ".github"))
			r := e.run(t, `echo '{"hooks":{}}' > shared/hooks/evil.json; test -f .github/hooks/evil.json && echo `+planted)
			if layer && !strings.Contains(r.stdout, planted) {
				t.Fatalf("the file was not written inside (the layer case would pass vacuously)\n%s", r)
			}
			e.gone(t, r, "", "shared/hooks/evil.json")
			logRun(t, r)
		})
	})
}

// TestLeakLockedDirectories: a directory the command locks (no read
// permission, even for its owner) is not skipped by the checks, and the
// run still ends normally.
func TestLeakLockedDirectories(t *testing.T) {
	t.Parallel()
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	const plant = "echo 'touch MARK' > %[1]s.envrc; mkdir %[1]s.vscode; echo {} > %[1]s.vscode/tasks.json; mkdir %[1]sopen; chmod 777 %[1]sopen\n"
	cases := []struct{ name, script, dir string }{
		{"subdir", "mkdir sub; " + fmt.Sprintf(plant, "sub/") + "chmod 0311 sub", "sub/"},
		{"workspace-root", fmt.Sprintf(plant, "") + "chmod 311 .", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forModes(t, func(t *testing.T, e *env, layer bool) {
				t.Cleanup(func() {
					os.Chmod(filepath.Join(e.ws, "sub"), 0o755)
					os.Chmod(e.ws, 0o755)
				})
				r := e.run(t, e.expand(c.script, ""))
				if r.code == 125 {
					t.Errorf("sandboxd failed (exit 125) on what the command locked")
				}
				e.gone(t, r, "", c.dir+".envrc", c.dir+".vscode")
				noOtherWritable(t, e.ws)
				logRun(t, r)
			})
		})
	}
}

// TestLeakGlobNames: glob characters in directory names, above a
// protected name or in the workspace's own path, do not hide it.
func TestLeakGlobNames(t *testing.T) {
	t.Parallel()
	t.Run("in-directory-names", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, layer bool) {
			r := e.run(t, `mkdir -p 'x[/.github/hooks' && echo x > 'x[/.github/hooks/h.json'; `+
				`mkdir -p 'y[a]/mise' && echo x > 'y[a]/mise/config.toml'; mkdir -p 'z*' && echo x > 'z*/.envrc'`)
			e.gone(t, r, "", "x[/.github/hooks/h.json", "y[a]/mise/config.toml", "z*/.envrc")
			logRun(t, r)
		})
	})
	t.Run("in-workspace-path", func(t *testing.T) {
		forModes(t, func(t *testing.T, e *env, layer bool) {
			ws := e.mkdir("p[1]", 0o755)
			args := append(append([]string{"run"}, e.runArgs...), "-c",
				"mkdir -p .github/hooks mise sub && echo x > .github/hooks/h.json && echo x > mise/config.toml && echo x > sub/.envrc\necho "+ranMarker)
			r := e.sandboxdOpts(runOpts{dir: ws}, args...)
			if !strings.Contains(r.stdout, ranMarker) {
				t.Fatalf("the command did not run to its end\n%s", r)
			}
			e.gone(t, r, ws, ".github/hooks/h.json", "mise/config.toml", "sub/.envrc")
			logRun(t, r)
		})
	})
}

// TestLeakDeepPath: protected names below a path longer than PATH_MAX
// (25 directories of 200 characters), which a check by path cannot
// reach.
func TestLeakDeepPath(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		r := e.run(t, "n=$(printf 'a%.0s' $(seq 1 200))\nfor i in $(seq 1 25); do mkdir $n && cd $n || exit 1; done\n"+
			"echo 'touch MARK' > .envrc && mkdir .vscode && echo {} > .vscode/tasks.json && echo "+planted+"\ncd /")
		if !strings.Contains(r.stdout, planted) {
			t.Fatalf("the deep tree was not made inside\n%s", r)
		}
		if layer && r.code == 125 {
			t.Errorf("sandboxd failed (exit 125) on the deep tree\n%s", r)
		}
		out, err := exec.Command("find", e.ws, "(", "-name", ".envrc", "-o", "-name", ".vscode", "-o", "-name", "tasks.json", ")", "-printf", "%d %f\n").CombinedOutput()
		if err != nil || len(out) != 0 {
			t.Errorf("protected names remain at the bottom of the deep tree (find: %v):\n%s", err, out)
		}
		if !layer {
			if _, err := os.Lstat(filepath.Join(e.ws, strings.Repeat("a", 200))); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the deep new tree was not removed (lstat of its top: %v)", err)
			}
		}
		if t.Failed() {
			t.Logf("exit %d\n--- stderr\n%s\nreport persistence: %v", r.code, r.stderr, r.report["persistence"])
		}
	})
}

// TestLeakReplacedSymlinkMode: a symlink the user had, replaced by a file
// the command makes world-writable: a symlink's mode bits (0777) must not
// pass for the file's. The break was in layer mode. With --no-transaction
// sandboxd does not see each file the command chmods (README: "other
// files keep what the command gave them"), so only the layer is held to
// it; the direct run still runs, to show the difference is that rule.
func TestLeakReplacedSymlinkMode(t *testing.T) {
	t.Parallel()
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	forModes(t, func(t *testing.T, e *env, layer bool) {
		f := filepath.Join(e.ws, "f")
		if err := os.Symlink("/etc/hostname", f); err != nil {
			t.Fatal(err)
		}
		e.chown(f)
		r := e.run(t, `rm f; echo x > f; chmod 666 f; stat -c 'mode %a %F' f`)
		if !strings.Contains(r.stdout, "mode 666 regular file") {
			t.Fatalf("the file was not made inside\n%s", r)
		}
		st, err := os.Lstat(f)
		switch {
		case err != nil:
		case st.Mode()&fs.ModeSymlink != 0:
			t.Errorf("f is still the symlink")
		case !layer:
		default:
			if m := modeOf(t, f); m&0o022 != 0 {
				t.Errorf("f is mode %04o on the host: other accounts may write it\n%s\nreport persistence: %v", m&0o7777, r, r.report["persistence"])
			}
		}
	})
}

// TestLeakForgedClone: what the command clones may keep protected names
// (its own repository, with a remote); a gitfile naming the workspace's
// own repository, which has a remote, must not pass for one.
func TestLeakForgedClone(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, ".")
		e.hostGit(t, "remote", "add", "origin", "https://example.com/r.git")
		r := e.run(t, `mkdir w; printf 'gitdir: ../.git\n' > w/.git; echo evil > w/.envrc; mkdir w/.claude; echo {} > w/.claude/settings.json; echo {} > w/.mcp.json`)
		e.gone(t, r, "", "w/.envrc", "w/.claude", "w/.mcp.json", "w/.git")
		logRun(t, r)
	})
}

// TestLeakMissedNames: names the table once missed (hk's, in a
// repository that runs hooks: elsewhere a hook manager's file is listed).
func TestLeakMissedNames(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, ".")
		e.hostGit(t, "config", "core.hooksPath", ".hooks")
		r := e.run(t, "mkdir -p mise .config .jj && echo x > mise/config.local.toml && echo x > hk.local.pkl && echo x > .config/hk.pkl && "+
			"printf ../jjr > .jj/repo && echo x > .bash_aliases && echo x > .direnvrc")
		e.gone(t, r, "", "mise/config.local.toml", "hk.local.pkl", ".config/hk.pkl", ".jj/repo", ".bash_aliases", ".direnvrc")
		logRun(t, r)
	})
}

// TestLeakFlagErrorEscaped: an unknown flag's or command's name is the
// caller's (maybe a command's) text: sandboxd's error about it carries
// no terminal control.
func TestLeakFlagErrorEscaped(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		for _, args := range [][]string{
			append(append([]string{"run"}, e.runArgs...), "-\x1b]52;c;ZXZpbA==\x07\x1b[7m\u202e\u009b2J", "-c", "true"),
			// flag cuts a name at "=": without one, every byte is in it.
			append(append([]string{"run"}, e.runArgs...), "-\x1b]52;c;ZXZpbA\x07\x1b[7m\u202e\u009b2J", "-c", "true"),
			{"doctor", "-\x1b[7mX"},
			{"cache", "list", "-\x1b[7mX"},
			{"\x1b[7mX"},
		} {
			r := e.sandboxdOpts(runOpts{noReport: true}, args...)
			// run's usage errors are 125, every other command's 2.
			want := 2
			if args[0] == "run" {
				want = 125
			}
			if r.code != want {
				t.Errorf("sandboxd %q with the bad flag exited %d, not %d\n%s", args[0], r.code, want, r)
			}
			if strings.TrimSpace(r.stderr) == "" {
				t.Errorf("sandboxd %q said nothing about the bad flag", args[0])
			}
			for _, raw := range []string{"\x1b", "\x07", "\u202e", "\u009b"} {
				if i := strings.Index(r.stderr, raw); i >= 0 {
					t.Errorf("sandboxd %q: the raw %q is on stderr: %q", args[0], raw, r.stderr)
				}
			}
		}
	})
}

// upstream is a repository outside the workspace to add as a submodule.
func (e *env) upstream(t *testing.T) string {
	t.Helper()
	up := e.mkdir("up", 0o755)
	e.writeFile(filepath.Join(up, "s.txt"), "s\n", 0o644)
	e.hostGitIn(t, up, "init", "-q")
	e.hostGitIn(t, up, "add", "-A")
	e.hostGitIn(t, up, "commit", "-q", "-m", "s")
	return up
}
