package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkspaceFromSubdirectory: run from a subdirectory of a
// repository, the workspace is the repository's top level and the
// command's working directory stays where the caller was, so git works
// there as it does on the host, and its commit lands whole.
func TestWorkspaceFromSubdirectory(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		e.hostRepo(t, "")
		sub := filepath.Join(e.ws, "pkg", "sub")
		e.writeFile(filepath.Join(sub, "keep.txt"), "keep\n", 0o644)
		e.hostGit(t, "add", "-A")
		e.hostGit(t, "commit", "-q", "-m", "sub")
		r := e.sandboxdOpts(runOpts{dir: sub}, append(append([]string{"run"}, e.runArgs...), "-c",
			`pwd; git rev-parse --show-toplevel; echo more >> ../../README; echo new > here.txt; git add -A && git commit -q -m "from sub" && git status --porcelain`)...).mustSucceed(t)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || lines[0] != sub || lines[1] != e.ws {
			t.Fatalf("want the working directory %s and the top level %s, got %q\n%s", sub, e.ws, lines, r)
		}
		if got := r.reportString("workspace"); got != e.ws {
			t.Errorf("report workspace = %q, want %s", got, e.ws)
		}
		if got := r.reportString("workspace_from"); got != "git" {
			t.Errorf("report workspace_from = %q, want git", got)
		}
		noBoundaries(t, r)
		if log := e.hostGit(t, "log", "-1", "--format=%s"); strings.TrimSpace(log) != "from sub" {
			t.Errorf("host git log: %q\n%s", log, r)
		}
		if st := e.hostGit(t, "status", "--porcelain"); st != "" {
			t.Errorf("host git status is not clean: %q\n%s", st, r)
		}
		if out, err := e.gitOut(e.ws, "fsck", "--no-progress"); err != nil {
			t.Errorf("host git fsck: %v\n%s", err, out)
		}
	})
}

// TestWorkspaceRootRefused: a repository whose top level is the home
// directory, or belongs to someone else, is not taken as the workspace:
// the current directory is, as before, and the report says why.
func TestWorkspaceRootRefused(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		t.Run("home", func(t *testing.T) {
			e.hostGitIn(t, e.home, "init", "-q")
			proj := filepath.Join(e.home, "proj")
			e.writeFile(filepath.Join(proj, "f"), "x\n", 0o644)
			r := e.sandboxdOpts(runOpts{dir: proj}, "run", "--", "sh", "-c", "echo ok > out").mustSucceed(t)
			if got := r.reportString("workspace"); got != proj {
				t.Errorf("workspace = %q, want %s\n%s", got, proj, r)
			}
			if note := r.reportString("workspace_note"); !strings.Contains(note, "home directory") {
				t.Errorf("workspace_note = %q", note)
			}
			if b, err := os.ReadFile(filepath.Join(proj, "out")); err != nil || string(b) != "ok\n" {
				t.Errorf("the command's write: %q, %v", b, err)
			}
		})
		if os.Geteuid() != 0 {
			return // making a repository someone else's needs root
		}
		t.Run("not yours", func(t *testing.T) {
			top := filepath.Join(e.dir, "theirs")
			e.writeFile(filepath.Join(top, "mine", "f"), "x\n", 0o644)
			e.hostGitIn(t, top, "init", "-q")
			other := 0
			if e.id.uid == 0 {
				other = identities(t)[1].uid
			}
			os.Chown(top, other, other)
			mine := filepath.Join(top, "mine")
			r := e.sandboxdOpts(runOpts{dir: mine}, "run", "--", "true").mustSucceed(t)
			if got := r.reportString("workspace"); got != mine {
				t.Errorf("workspace = %q, want %s\n%s", got, mine, r)
			}
			if note := r.reportString("workspace_note"); !strings.Contains(note, "not yours") {
				t.Errorf("workspace_note = %q", note)
			}
		})
	})
}

// TestWorkspacePolicyDirectory: outside any repository, the nearest
// .sandboxd.toml above the working directory makes the workspace, and
// the .sandboxd.toml files above it tighten the policy too.
func TestWorkspacePolicyDirectory(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.ws, ".sandboxd.toml"), "[filesystem]\nsecrets = [\"~/private-notes\"]\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "a", ".sandboxd.toml"), "[limits]\npids = 1000\n", 0o644)
		deep := filepath.Join(e.ws, "a", "b")
		e.writeFile(filepath.Join(deep, "f"), "x\n", 0o644)
		e.writeFile(filepath.Join(e.home, "private-notes"), e.canary+"\n", 0o644)
		r := e.sandboxdOpts(runOpts{dir: deep}, "run", "--", "sh", "-c", "pwd; cat ~/private-notes; echo made > ../top.txt")
		if got := r.reportString("workspace"); got != filepath.Join(e.ws, "a") {
			t.Fatalf("workspace = %q, want %s/a\n%s", got, e.ws, r)
		}
		if got := r.reportString("workspace_from"); got != ".sandboxd.toml" {
			t.Errorf("workspace_from = %q", got)
		}
		if strings.Contains(r.stdout, e.canary) {
			t.Errorf("the outer .sandboxd.toml's secret was readable\n%s", r)
		}
		if b, err := os.ReadFile(filepath.Join(e.ws, "a", "top.txt")); err != nil || string(b) != "made\n" {
			t.Errorf("a write at the workspace's top: %q, %v\n%s", b, err, r)
		}
	})
}

// TestWatcherTold: a command that watches files behind the layer is
// told once what that means; with --no-transaction, or a matching
// no_transaction entry in the user's own policy, it is not, and its
// writes go straight to the workspace. A workspace may not set that
// entry.
func TestWatcherTold(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		watch := e.outside("watch.py", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"+
			"for _ in range(2):\n    fd = libc.inotify_init1(0)\n    assert fd >= 0 and libc.inotify_add_watch(fd, b'.', 2) > 0\n"+
			"open('written', 'w').write('w')\n")
		r := e.sandboxd("run", "--", "python3", watch).mustSucceed(t)
		if n := strings.Count(r.stderr, "this command watches files"); n != 1 {
			t.Errorf("told %d times, want once\n%s", n, r)
		}
		if w, _ := r.report["watched"].(bool); !w {
			t.Errorf("report has no watched: %v", r.report["watched"])
		}
		r = e.sandboxd("run", "--no-transaction", "--", "python3", watch).mustSucceed(t)
		if strings.Contains(r.stderr, "watches files") {
			t.Errorf("told without a layer\n%s", r)
		}
		policy := filepath.Join(e.home, ".config", "sandboxd", "policy.toml")
		e.writeFile(policy, "[transaction]\nno_transaction = [\"python3 *watch.py\"]\n", 0o644)
		r = e.sandboxd("run", "--", "python3", watch).mustSucceed(t)
		tx, _ := r.report["transaction"].(map[string]any)
		if tx["mode"] != "none" || !strings.Contains(tx["why"].(string), "no_transaction") || strings.Contains(r.stderr, "watches files") {
			t.Errorf("a matching no_transaction entry: transaction %v\n%s", tx, r)
		}
		os.Remove(policy)
		e.writeFile(filepath.Join(e.ws, ".sandboxd.toml"), "[transaction]\nno_transaction = [\"python3 *\"]\n", 0o644)
		r = e.sandboxd("run", "--", "python3", watch)
		if r.code != 125 || !strings.Contains(r.stderr, "only your own policy may set transaction.no_transaction") {
			t.Errorf("a workspace's no_transaction was not refused\n%s", r)
		}
	})
}
