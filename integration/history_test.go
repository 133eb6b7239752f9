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
