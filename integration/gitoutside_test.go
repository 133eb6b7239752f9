package integration

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// outsideRepo makes dir/name, outside the workspace, a git repository
// with one commit and a modified tracked file, owned (every file of it)
// by uid:gid.
func (e *env) outsideRepo(t *testing.T, name string, uid, gid int) string {
	t.Helper()
	repo := filepath.Join(e.dir, "outside-"+name)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "initial"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com",
			"-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = repo
		cmd.Env = []string{"HOME=" + e.dir, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("hello\nchanged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		filepath.Walk(repo, func(p string, _ os.FileInfo, err error) error {
			if err == nil {
				os.Lchown(p, uid, gid)
			}
			return nil
		})
	}
	return repo
}

// testUserIDs are the unprivileged test user's uid and gid.
func testUserIDs(t *testing.T) (int, int) {
	t.Helper()
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatalf("the unprivileged test user %q does not exist: %v", testUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

// repoState is what the host's git says about a repository (as root,
// trusting it): HEAD, the status and the index's bytes.
func repoState(t *testing.T, repo string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"rev-parse", "HEAD"}, {"status", "--porcelain"}, {"log", "--oneline"}} {
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", repo}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("host git %v: %v\n%s", args, err, out)
		}
		b.Write(out)
	}
	index, err := os.ReadFile(filepath.Join(repo, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	return b.String() + string(index)
}

func hostFsck(t *testing.T, repo string) {
	t.Helper()
	cmd := exec.Command("git", "-c", "safe.directory=*", "-C", repo, "fsck", "--strict")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("host git fsck %s: %v\n%s", repo, err, out)
	}
	if _, err := os.Lstat(filepath.Join(repo, ".git", "index.lock")); err == nil {
		t.Fatalf("%s/.git/index.lock was left behind", repo)
	}
}

func noBoundaries(t *testing.T, r result) {
	t.Helper()
	if bs := boundaries(r); len(bs) != 0 || strings.Contains(r.stderr, "sandboxd: denied") {
		t.Fatalf("boundaries reported: %v\n%s", bs, r)
	}
}

// TestGitOutsideOwnRepo: git works on a repository outside the workspace
// that the caller owns (as it does on the host, without safe.directory),
// reading it with no boundary (git status takes no optional lock), and
// nothing about it becomes writable: a commit fails and leaves the
// repository as it was.
func TestGitOutsideOwnRepo(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		repo := e.outsideRepo(t, "mine", e.id.uid, e.id.gid)
		if out, err := e.gitOut(repo, "log", "--oneline"); err != nil {
			t.Fatalf("setup: the host's git refuses the caller's own repository: %v\n%s", err, out)
		}
		before := repoState(t, repo)
		r := e.sh("git -C '" + repo + "' log --oneline && git -C '" + repo + "' status --porcelain && git -C '" + repo + "' diff").mustSucceed(t)
		for _, want := range []string{"initial", " M README", "+changed"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("git output lacks %q\n%s", want, r)
			}
		}
		noBoundaries(t, r)

		r = e.sh("git -C '" + repo + "' commit -q -am sneaky && echo COMMITTED")
		if r.code == 0 || strings.Contains(r.stdout, "COMMITTED") {
			t.Fatalf("a commit in a repository outside the workspace succeeded\n%s", r)
		}
		if after := repoState(t, repo); after != before {
			t.Fatalf("the repository outside changed:\nbefore %q\nafter  %q\n%s", before, after, r)
		}
		hostFsck(t, repo)
	})
}

// TestGitOutsideOtherOwner: a repository outside the workspace owned by
// another user is refused inside exactly as the caller's git refuses it
// on the host (its config could otherwise run code): root's git refuses
// the test user's, the test user's git refuses root's. A SUDO_UID in the
// caller's environment does not make root's sandboxed git trust that
// user (sandboxd sets its own).
func TestGitOutsideOtherOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("making a repository of another user needs root")
	}
	forEach(t, func(t *testing.T, e *env) {
		uid, gid := 0, 0
		if e.id.root() {
			uid, gid = testUserIDs(t)
		}
		repo := e.outsideRepo(t, "theirs", uid, gid)
		if out, err := e.gitOut(repo, "log", "--oneline"); err == nil || !strings.Contains(out, "dubious ownership") {
			t.Fatalf("setup: the host's git does not refuse another user's repository: %v\n%s", err, out)
		}
		before := repoState(t, repo)
		r := e.sh("git -C '" + repo + "' log --oneline; echo rc=$?; stat -c owner=%u '" + repo + "/.git'")
		if !strings.Contains(r.stdout, "rc=128") || !strings.Contains(r.stderr, "dubious ownership") {
			t.Fatalf("git inside trusted another user's repository\n%s", r)
		}
		if e.id.root() && !strings.Contains(r.stdout, "owner="+strconv.Itoa(uid)+"\n") {
			t.Fatalf("the other user's repository does not show its real owner %d inside\n%s", uid, r)
		}
		if e.id.root() {
			r = e.sandboxdOpts(runOpts{env: []string{"SUDO_UID=" + strconv.Itoa(uid)}},
				"run", "-c", "echo sudo=$SUDO_UID; git -C '"+repo+"' log --oneline; echo rc=$?")
			if !strings.Contains(r.stdout, "rc=128") || strings.Contains(r.stdout, "sudo="+strconv.Itoa(uid)+"\n") {
				t.Fatalf("the caller's SUDO_UID made git inside trust that user's repository\n%s", r)
			}
		}
		if after := repoState(t, repo); after != before {
			t.Fatalf("the repository outside changed:\nbefore %q\nafter  %q", before, after)
		}
	})
}

// TestGitOutsideRootSecrets: the uid map that shows host owners inside
// (root callers) gives the command no file it could not read or write
// before: a 0600 file of root's or of another user's outside stays
// unreadable, so does /etc/shadow; in the workspace, another user's
// files stay unwritable whatever their mode, and what the command creates
// is root's on the host.
func TestGitOutsideRootSecrets(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("root callers only")
	}
	uid, gid := testUserIDs(t)
	forModes(t, func(t *testing.T, e *env, layer bool) {
		if !e.id.root() {
			return
		}
		secrets := filepath.Join(e.dir, "secrets")
		os.MkdirAll(secrets, 0o755)
		rootSecret := filepath.Join(secrets, "root-secret")
		userSecret := filepath.Join(secrets, "user-secret")
		for _, f := range []struct {
			path     string
			uid, gid int
		}{{rootSecret, 0, 0}, {userSecret, uid, gid}} {
			if err := os.WriteFile(f.path, []byte(e.canary+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chown(f.path, f.uid, f.gid)
		}
		theirs := map[string]os.FileMode{"theirs-0644": 0o644, "theirs-0666": 0o666}
		var checks []func()
		for name, mode := range theirs {
			p := filepath.Join(e.ws, name)
			if err := os.WriteFile(p, []byte("theirs\n"), mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, mode)
			os.Chown(p, uid, gid)
			checks = append(checks, fileUnchanged(t, p))
		}
		r := e.sh(`for f in ` + rootSecret + ` ` + userSecret + ` /etc/shadow; do cat "$f" >/dev/null 2>&1 && echo "READ $f"; done
stat -c 'secret=%u' ` + userSecret + `
for f in theirs-0644 theirs-0666; do (echo more >> "$f") 2>/dev/null && echo "WROTE $f"; done
echo made > mine.txt`)
		e.noCanary(t, r)
		if strings.Contains(r.stdout, "READ ") || strings.Contains(r.stdout, "WROTE ") {
			t.Fatalf("the command read or wrote what it must not\n%s", r)
		}
		if !strings.Contains(r.stdout, "secret="+strconv.Itoa(uid)+"\n") {
			t.Fatalf("another user's file does not show its real owner %d inside\n%s", uid, r)
		}
		for _, check := range checks {
			check()
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(e.ws, "mine.txt"), &st); err != nil || st.Uid != 0 || st.Gid != 0 {
			t.Fatalf("a file the command made in the workspace: %+v, %v\n%s", st, err, r)
		}
	})
}
