package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLeakThroughHistory: git's history is a second copy of the work tree.
// A hook the work tree check refuses must not come back through a commit,
// the index or a stash the command wrote: the user's next `git checkout
// .`, `git stash pop` or `git reset --hard` would write it, and the next
// commit would run it.
func TestLeakThroughHistory(t *testing.T) {
	t.Parallel()
	hook := `printf '#!/bin/sh\ntouch MARK\n'`
	cases := []struct {
		name, script string
		restore      []string // what the host user runs, then a commit
	}{
		{"commit", hook + ` > .husky/pre-commit && git add .husky && git commit -qm tidy`,
			[]string{"checkout", "--", "."}},
		{"plumbing", `b=$(` + hook + ` | git hash-object -w --stdin) && git update-index --cacheinfo 100755,$b,.husky/pre-commit && git commit -qm tidy`,
			[]string{"reset", "-q", "--hard"}},
		{"index-only", `b=$(` + hook + ` | git hash-object -w --stdin) && git update-index --cacheinfo 100755,$b,.husky/pre-commit`,
			[]string{"checkout", "--", "."}},
		{"stash", `b=$(` + hook + ` | git hash-object -w --stdin) && git update-index --cacheinfo 100755,$b,.husky/pre-commit && git stash -q && git checkout -q -- .`,
			[]string{"stash", "pop", "-q"}},
		{"branch", `git checkout -qb topic && b=$(` + hook + ` | git hash-object -w --stdin) && git update-index --cacheinfo 100755,$b,.husky/pre-commit && git commit -qm x && git checkout -q -f main`,
			[]string{"checkout", "-q", "-f", "topic"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forModes(t, func(t *testing.T, e *env, layer bool) {
				e.hostRepo(t, ".")
				e.writeFile(filepath.Join(e.ws, ".husky", "pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
				e.hostGit(t, "add", ".husky")
				e.hostGit(t, "commit", "-q", "-m", "husky")
				e.hostGit(t, "config", "core.hooksPath", ".husky")
				r := e.run(t, e.expand(c.script, ""))
				// The user restores what git has, then commits.
				e.gitOut(e.ws, c.restore...)
				e.gitOut(e.ws, "commit", "-q", "--allow-empty", "-m", "probe")
				if _, err := os.Lstat(e.mark()); err == nil {
					b, _ := os.ReadFile(filepath.Join(e.ws, ".husky", "pre-commit"))
					t.Fatalf("a hook the command put into git's history ran on the host (hook now %q)\n%s", b, r)
				}
				if b, _ := os.ReadFile(filepath.Join(e.ws, ".husky", "pre-commit")); strings.Contains(string(b), "MARK") || strings.Contains(string(b), "pwned") {
					t.Fatalf("the hook came back through git: %q\n%s", b, r)
				}
			})
		})
	}
}

// TestLeakRefsThroughLink: refs/ (or logs/) made a symlink into the
// private cache, which the command writes unchecked, would let it move
// any branch later without a run; it is not left, and the repository
// still works.
func TestLeakRefsThroughLink(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, ".")
		r := e.run(t, `C=$(dirname "$XDG_CACHE_HOME") && cp -a .git/refs "$C/refs" && rm -rf .git/refs && ln -s "$C/refs" .git/refs && git log -1 --format=%s`)
		if !strings.Contains(r.stdout, "initial") {
			t.Fatalf("the link was not made inside (git did not follow it)\n%s", r)
		}
		st, err := os.Lstat(filepath.Join(e.ws, ".git", "refs"))
		if err != nil || st.Mode()&os.ModeSymlink != 0 || !st.IsDir() {
			t.Fatalf(".git/refs is not the repository's own directory after the run (%v, %v)\n%s", st, err, r)
		}
		if got := e.hostGit(t, "log", "-1", "--format=%s"); strings.TrimSpace(got) != "initial" {
			t.Fatalf("the repository's history is broken on the host: %q\n%s", got, r)
		}
	})
}

// historyPayload is an .envrc (or hook) body that leaves the marker.
const historyPayload = `printf 'touch MARK\n'`

// plantEnvrc makes a commit whose tree adds .envrc with the payload,
// without touching the work tree or the real index; $C is its name.
const plantEnvrc = `B=$(` + historyPayload + ` | git hash-object -w --stdin) && export GIT_INDEX_FILE=$PWD/.tmpidx && git read-tree HEAD && ` +
	`git update-index --add --cacheinfo 100644,$B,.envrc && T=$(git write-tree) && C=$(git commit-tree $T -p HEAD -m docs) && rm -f .tmpidx && unset GIT_INDEX_FILE`

// TestLeakHistoryVariants: history the command writes must not bring
// back a refused file however its objects are stored or found, and the
// check must not be steered by files the command can change. Each case
// ends with the host user restoring what git holds (checkout, reset,
// worktree add); the planted .envrc must not appear with the payload.
func TestLeakHistoryVariants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		setup   func(t *testing.T, e *env)
		scripts []string // runs, in order
		restore [][]string
		where   string // the work tree the .envrc would land in
	}{
		{name: "objects-from-an-earlier-run",
			scripts: []string{plantEnvrc + ` && echo $C > .git/planted`, `C=$(cat .git/planted) && git update-ref refs/heads/main $C && git read-tree $C`},
			restore: [][]string{{"checkout", "--", "."}, {"reset", "-q", "--hard"}}},
		{name: "objects-behind-alternates",
			scripts: []string{`mkdir -p docs/.objstore && export GIT_OBJECT_DIRECTORY=$PWD/docs/.objstore GIT_ALTERNATE_OBJECT_DIRECTORIES=$PWD/.git/objects && ` + plantEnvrc +
				` && unset GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES && echo ../../docs/.objstore > .git/objects/info/alternates && git update-ref refs/heads/main $C && git read-tree $C`},
			restore: [][]string{{"checkout", "--", "."}, {"reset", "-q", "--hard"}}},
		{name: "packed",
			scripts: []string{plantEnvrc + ` && git update-ref refs/heads/main $C && git read-tree $C && git gc -q`},
			restore: [][]string{{"checkout", "--", "."}, {"reset", "-q", "--hard"}}},
		{name: "bare-in-config-worktree",
			scripts: []string{`printf '[core]\n\tbare = true\n' > .git/config.worktree && B=$(` + historyPayload + ` | git hash-object -w --stdin) && git update-index --add --cacheinfo 100644,$B,.envrc && git commit -qm docs`},
			restore: [][]string{{"reset", "-q", "--hard"}}},
		{name: "replace-object",
			setup: func(t *testing.T, e *env) {
				e.writeFile(filepath.Join(e.ws, ".envrc"), "export A=1\n", 0o644)
				e.hostGit(t, "add", ".envrc")
				e.hostGit(t, "commit", "-q", "-m", "envrc")
			},
			scripts: []string{`X=$(git rev-parse HEAD:.envrc) && Y=$(` + historyPayload + ` | git hash-object -w --stdin) && git replace $X $Y`},
			restore: [][]string{{"rm", "-q", "--cached", ".envrc"}, {"reset", "-q", "--hard"}, {"worktree", "add", "-q", "wtx"}}},
		{name: "worktree-gitdir-redirected",
			setup: func(t *testing.T, e *env) { e.hostGit(t, "worktree", "add", "-q", "--detach", "wt2") },
			scripts: []string{`cd wt2 && echo /nonexistent/.git > ../.git/worktrees/wt2/gitdir; B=$(` + historyPayload + ` | git hash-object -w --stdin) && ` +
				`git update-index --add --cacheinfo 100644,$B,.envrc && git commit -qm docs`},
			restore: [][]string{{"-C", "wt2", "checkout", "--", "."}, {"-C", "wt2", "reset", "-q", "--hard"}},
			where:   "wt2"},
		{name: "submodule-commit",
			setup: func(t *testing.T, e *env) {
				e.hostGit(t, "-c", "protocol.file.allow=always", "submodule", "add", "-q", e.upstream(t), "sub")
				e.hostGit(t, "commit", "-q", "-m", "sub")
			},
			scripts: []string{`cd sub && ` + plantEnvrc + ` && cd .. && git update-index --cacheinfo 160000,$C,sub && git commit -qm bump`},
			restore: [][]string{{"-c", "protocol.file.allow=always", "reset", "-q", "--hard", "--recurse-submodules"}},
			where:   "sub"},
		{name: "submodule-worktree-unset",
			setup: func(t *testing.T, e *env) {
				e.hostGit(t, "-c", "protocol.file.allow=always", "submodule", "add", "-q", e.upstream(t), "sub")
				e.hostGit(t, "commit", "-q", "-m", "sub")
			},
			scripts: []string{`git config -f .git/modules/sub/config --unset core.worktree; cd sub && B=$(` + historyPayload + ` | git hash-object -w --stdin) && ` +
				`git update-index --add --cacheinfo 100644,$B,.envrc && git commit -qm docs`},
			restore: [][]string{{"-C", "sub", "checkout", "--", "."}, {"-C", "sub", "reset", "-q", "--hard"}},
			where:   "sub"},
		{name: "index-rewritten-in-place",
			scripts: []string{`B=$(` + historyPayload + ` | git hash-object -w --stdin) && cp .git/index /tmp/idx && GIT_INDEX_FILE=/tmp/idx git update-index --add --cacheinfo 100644,$B,.envrc && cat /tmp/idx > .git/index`},
			restore: [][]string{{"checkout", "--", "."}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The control: without sandboxd the attack brings the file back.
			t.Run("unsandboxed", func(t *testing.T) {
				e := newEnv(t, identities(t)[0])
				e.hostRepo(t, ".")
				if c.setup != nil {
					c.setup(t, e)
				}
				for _, s := range c.scripts {
					e.hostSh(t, strings.ReplaceAll(e.expand(s, ""), "/tmp/idx", filepath.Join(e.dir, "idx")))
				}
				for _, args := range c.restore {
					e.gitOut(e.ws, args...)
				}
				b, _ := os.ReadFile(filepath.Join(e.ws, c.where, ".envrc"))
				if !strings.Contains(string(b), e.mark()) {
					if b2, _ := os.ReadFile(filepath.Join(e.ws, "wtx", ".envrc")); !strings.Contains(string(b2), e.mark()) {
						t.Fatalf("the attack does not work even without sandboxd: the case proves nothing (.envrc %q)", b)
					}
				}
			})
			forModes(t, func(t *testing.T, e *env, layer bool) {
				e.hostRepo(t, ".")
				if c.setup != nil {
					c.setup(t, e)
				}
				var r result
				for _, s := range c.scripts {
					r = e.sh(e.expand(s, ""))
				}
				for _, args := range c.restore {
					e.gitOut(e.ws, args...)
				}
				envrc := filepath.Join(e.ws, c.where, ".envrc")
				if b, err := os.ReadFile(envrc); err == nil && strings.Contains(string(b), e.mark()) {
					t.Fatalf("the .envrc the command put into git's history came back on the host\n%s\nreport persistence %v", r, r.report["persistence"])
				}
				if _, err := os.Lstat(filepath.Join(e.ws, "wtx", ".envrc")); err == nil {
					if b, _ := os.ReadFile(filepath.Join(e.ws, "wtx", ".envrc")); strings.Contains(string(b), e.mark()) {
						t.Fatalf("a new worktree took the replaced .envrc\n%s", r)
					}
				}
			})
		})
	}
}

// TestLeakHistoryRestoreNoWriteThrough: putting history back never writes
// through a link the command made (a reflog hard-linked to a pack file
// must not truncate the pack).
func TestLeakHistoryRestoreNoWriteThrough(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, ".")
		e.hostGit(t, "gc", "-q")
		packs, _ := filepath.Glob(filepath.Join(e.ws, ".git", "objects", "pack", "*.pack"))
		if len(packs) != 1 {
			t.Fatalf("setup: %d packs", len(packs))
		}
		unchanged := fileUnchanged(t, packs[0])
		r := e.sh(`B=$(` + historyPayload + ` | git hash-object -w --stdin) && git update-index --add --cacheinfo 100644,$B,.envrc && git commit -qm docs; ` +
			`P=$(ls .git/objects/pack/*.pack) && chmod u+w $P && rm .git/logs/HEAD && ln $P .git/logs/HEAD`)
		if st, err := os.Stat(packs[0]); err != nil || st.Size() == 0 {
			t.Fatalf("the pack is gone or empty (%v)\n%s", err, r)
		}
		if got, err := e.gitOut(e.ws, "log", "-1", "--format=%s"); err != nil || strings.TrimSpace(got) != "initial" {
			t.Fatalf("the repository's history is broken on the host: %q %v\n%s", got, err, r)
		}
		_ = unchanged // the pack's mode may have changed (chmod inside); its bytes are what count
		if b, _ := os.ReadFile(packs[0]); len(b) < 32 || string(b[:4]) != "PACK" {
			t.Fatalf("the pack was written through the link\n%s", r)
		}
	})
}

// TestHistoryEverydayGit: ordinary history work is kept whole: gc packs
// refs and objects, a stash round trip, a branch and a tag.
func TestHistoryEverydayGit(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, ".")
		e.writeFile(filepath.Join(e.ws, ".envrc"), "export A=1\n", 0o644)
		e.hostGit(t, "add", ".envrc")
		e.hostGit(t, "commit", "-q", "-m", "envrc")
		r := e.run(t, `echo a > a && git add a && git commit -qm a && git gc -q && git tag v1 && git checkout -qb topic && echo b > b && git add b && git commit -qm b && `+
			`echo c > a && git stash -q && git stash pop -q && git checkout -q main`)
		for _, rev := range []string{"main", "topic", "v1"} {
			if _, err := e.gitOut(e.ws, "rev-parse", "--verify", "-q", rev); err != nil {
				t.Fatalf("%s is missing on the host after the run\n%s\nrefused: %v", rev, r, committedOf(t, r)["refused"])
			}
		}
		if got := e.hostGit(t, "log", "-1", "--format=%s", "topic"); strings.TrimSpace(got) != "b" {
			t.Fatalf("topic is at %q\n%s", got, r)
		}
	})
}
