package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitCloneInWorkspace: cloning a repository into the workspace works,
// from the workspace's own repository (by absolute path, by relative
// path, with --no-hardlinks, by file:// URL) and from a repository
// outside it, with no boundary, and the host then has proper
// repositories (status, fsck and log work there as the caller).
//
// A local clone of the workspace's own repository would hardlink its
// objects, which in layer mode the kernel cannot do as git checks it
// (overlayfs copies the file up first, so the link's st_ino is not the
// source's, and keeping it needs overlay's index or origin file handles,
// which need CAP_DAC_READ_SEARCH in the initial user namespace): the
// run's git configuration sends such a clone through file:// instead.
func TestGitCloneInWorkspace(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, _ bool) {
		e.hostRepo(t, "")
		e.writeFile(filepath.Join(e.ws, "sub", "keep"), "x\n", 0o644)
		outside := e.outsideRepo(t, "upstream", e.id.uid, e.id.gid)
		cases := []struct{ name, script string }{
			{"absolute", "git clone -q '" + e.ws + "/.git' clone"},
			{"relative", "cd sub && git clone -q ../.git ../clone"},
			{"workspace", "git clone -q . clone"},
			{"no-hardlinks", "git clone -q --no-hardlinks '" + e.ws + "/.git' clone"},
			{"file-url", "git clone -q 'file://" + e.ws + "/.git' clone"},
			{"outside", "git clone -q '" + outside + "' clone"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				clone := filepath.Join(e.ws, "clone")
				defer os.RemoveAll(clone)
				r := e.sh(c.script).mustSucceed(t)
				noBoundaries(t, r)
				e.hostCloneOK(t, clone, r)
			})
		}
	})
}

// hostCloneOK checks, as the caller on the host, that dir is a proper
// repository with the commit it was cloned from and a clean work tree.
func (e *env) hostCloneOK(t *testing.T, dir string, r result) {
	t.Helper()
	if st, err := os.Stat(filepath.Join(dir, ".git")); err != nil || !st.IsDir() {
		t.Fatalf("no repository at %s: %v\n%s", dir, err, r)
	}
	if out, err := e.gitOut(dir, "status", "--porcelain"); err != nil || out != "" {
		t.Fatalf("git status in the clone: %v\n%s\n%s", err, out, r)
	}
	if out, err := e.gitOut(dir, "fsck", "--strict"); err != nil {
		t.Fatalf("git fsck in the clone: %v\n%s\n%s", err, out, r)
	}
	if out, err := e.gitOut(dir, "log", "--oneline"); err != nil || !strings.Contains(out, "initial") {
		t.Fatalf("git log in the clone: %v\n%s\n%s", err, out, r)
	}
}
