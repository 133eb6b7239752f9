package persist

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandboxd/sandboxd/fsid"
	"golang.org/x/sys/unix"
)

// nobody is the caller of the tests that need the kernel to refuse a
// locked directory: root reads one anyway.
const nobody = 65534

// asNobody runs f with nobody's file-system identity, in a workspace
// nobody owns (the temporary directories above it opened for the
// search), when the test runs as root.
func asNobody(t *testing.T) (ws string, do func(f func())) {
	t.Helper()
	if err := fsid.Do(fsid.ID{UID: nobody, GID: nobody}, func() error { return nil }); err != nil {
		t.Skipf("cannot act as uid %d: %v", nobody, err)
	}
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	ws = filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	os.Chown(ws, nobody, nobody)
	// f must not end its goroutine (t.Fatal): fsid.Do waits for it to
	// return.
	return ws, func(f func()) {
		t.Helper()
		if err := fsid.Do(fsid.ID{UID: nobody, GID: nobody, Umask: 0o022}, func() error { f(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// planAsNobody plans the sweep of ws as nobody (do is asNobody's).
func planAsNobody(t *testing.T, ws string, do func(f func())) *Sweep {
	t.Helper()
	var p *Sweep
	do(func() {
		var err error
		if p, err = PlanSweep(SweepSpec{Workspace: ws, Owner: nobody, Umask: 0o022}, nil); err != nil {
			t.Error(err)
		}
	})
	if p == nil {
		t.FailNow()
	}
	return p
}

// modeOf is p's permission bits and ctime (0, 0 when it cannot be
// looked at).
func modeOf(p string) (uint32, int64) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return 0, 0
	}
	return st.Mode & 0o7777, st.Ctim.Nano()
}

// plant writes entries (as tree) into ws, owned by nobody.
func plant(t *testing.T, ws string, entries map[string]string) {
	t.Helper()
	tree(t, ws, entries)
	filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, nobody, nobody)
		}
		return nil
	})
}

// TestScanOnlyReads: a scan records a directory it may not list (locked
// by its owner) and changes nothing; unlock opens it, a second scan reads
// it and what is below it, and restore puts the mode back, in the tree
// and in the scan.
func TestScanOnlyReads(t *testing.T) {
	ws, do := asNobody(t)
	m := NewMatcher(Builtin())
	plant(t, ws, map[string]string{"a/b/.envrc": "x", "a/.pdbrc": "x", "c/": ""})
	os.Chmod(filepath.Join(ws, "a"), 0)
	mode, ctime := modeOf(filepath.Join(ws, "a"))
	do(func() {
		s, err := ScanWorkspace(ws, m, nil)
		if err != nil {
			t.Error(err)
			return
		}
		if m2, c2 := modeOf(filepath.Join(ws, "a")); m2 != mode || c2 != ctime {
			t.Errorf("the scan changed a locked directory: mode %o ctime %d, was %o %d", m2, c2, mode, ctime)
		}
		if !reflect.DeepEqual(s.Unread, []string{"a"}) || !reflect.DeepEqual(s.lockedBy(nobody), []string{"a"}) || s.lockedBy(nobody+1) != nil {
			t.Errorf("unread %q, locked %q", s.Unread, s.lockedBy(nobody))
			return
		}
		opened := unlocked{}
		s.unlock(ws, s.lockedBy(nobody), opened)
		again, err := ScanWorkspace(ws, m, s)
		opened.restore(ws, again)
		if err != nil {
			t.Error(err)
			return
		}
		if _, ok := again.Dirs["a/b"]; !ok || len(again.Unread) != 0 {
			t.Errorf("the scan with a opened did not read below it: %v, unread %q", again.Dirs, again.Unread)
		}
		if got := again.WithMark(".pdbrc"); !reflect.DeepEqual(got, []string{"a"}) {
			t.Errorf(".pdbrc marked in %q", got)
		}
		if m2, _ := modeOf(filepath.Join(ws, "a")); m2 != 0 || again.Dirs["a"].Mode != 0 {
			t.Errorf("a is %o after restore (%o in the scan), want 0", m2, again.Dirs["a"].Mode)
		}
	})
	// The workspace itself locked: an error, and the scan so far names it.
	os.Chmod(ws, 0o311)
	defer os.Chmod(ws, 0o755)
	do(func() {
		s, err := ScanWorkspace(ws, m, nil)
		if err == nil || !reflect.DeepEqual(s.lockedBy(nobody), []string{""}) {
			t.Errorf("a locked workspace: %v, locked %q", err, s.lockedBy(nobody))
		}
	})
}

// TestSweepReachesBelowLocked: what the command leaves in or below a
// directory it locks (chmod 0), or in a workspace it locks, is swept all
// the same, and every mode is put back.
func TestSweepReachesBelowLocked(t *testing.T) {
	for _, locked := range []string{"a", "a/b", ""} {
		ws, do := asNobody(t)
		plant(t, ws, map[string]string{"a/b/keep": "x"})
		p := planAsNobody(t, ws, do)
		// The command's work.
		plant(t, ws, map[string]string{"a/b/c/.envrc": "x", "a/.pdbrc": "x"})
		if locked == "" {
			os.Chmod(ws, 0o311)
		} else {
			os.Chmod(filepath.Join(ws, locked), 0)
		}
		var done []Persisted
		var err error
		q := filepath.Join(filepath.Dir(ws), "q")
		os.Mkdir(q, 0o700)
		os.Chown(q, nobody, nobody)
		do(func() { done, err = p.Run(filepath.Join(q, "run")) })
		mode, _ := modeOf(filepath.Join(ws, locked))
		os.Chmod(filepath.Join(ws, locked), 0o755)
		if err != nil {
			t.Fatalf("locked %q: %v", locked, err)
		}
		for _, gone := range []string{"a/b/c/.envrc", "a/.pdbrc"} {
			if _, err := os.Lstat(filepath.Join(ws, gone)); err == nil {
				t.Errorf("locked %q: %s stayed in the workspace: %+v", locked, gone, done)
			}
		}
		if _, err := os.Lstat(filepath.Join(ws, "a/b/keep")); err != nil {
			t.Errorf("locked %q: a/b/keep is gone: %v", locked, err)
		}
		if locked != "" && mode != 0 || locked == "" && mode != 0o311 {
			t.Errorf("locked %q: its mode after the sweep is %o", locked, mode)
		}
	}
}

// TestSweepJudgesInsideLocked: the rules read the workspace itself (a
// git directory's entries, a new repository's HEAD and config), so what
// the command locked stays open until they have judged and the sweep has
// moved what they refuse. Before, the modes were put back first, and a
// new config.worktree in a git directory the command locked, or a new
// repository below a locked directory, stayed in the workspace unseen.
func TestSweepJudgesInsideLocked(t *testing.T) {
	repo := func(at string) map[string]string {
		return map[string]string{at + ".git/HEAD": "ref: refs/heads/main\n", at + ".git/config": "[core]\n",
			at + ".git/objects/": "", at + ".git/refs/heads/": "", at + ".git/hooks/": ""}
	}
	for _, tc := range []struct {
		name   string
		before map[string]string
		made   map[string]string
		lock   string
		mode   uint32
		gone   string
	}{
		{"a git directory locked", repo(""), map[string]string{".git/config.worktree": "[core]\n\tfsmonitor = touch /tmp/x\n"}, ".git", 0, ".git/config.worktree"},
		{"a new repository below a locked directory", nil, merge(repo("sub/"), map[string]string{"sub/.git/hooks/post-checkout": "#!/bin/sh\n"}), "sub", 0, "sub/.git/hooks/post-checkout"},
		{"a new repository two levels below", nil, merge(repo("a/sub/"), map[string]string{"a/sub/.git/hooks/post-checkout": "#!/bin/sh\n"}), "a", 0, "a/sub/.git/hooks/post-checkout"},
		{"a new repository in a directory not searchable", nil, merge(repo("sub/"), map[string]string{"sub/.git/config": "[core]\n\tfsmonitor = touch /tmp/x\n"}), "sub", 0o600, "sub/.git/config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, do := asNobody(t)
			plant(t, ws, tc.before)
			p := planAsNobody(t, ws, do)
			plant(t, ws, tc.made)
			os.Chmod(filepath.Join(ws, tc.lock), os.FileMode(tc.mode))
			q := filepath.Join(filepath.Dir(ws), "q")
			os.Mkdir(q, 0o700)
			os.Chown(q, nobody, nobody)
			var done []Persisted
			var err error
			do(func() { done, err = p.Run(filepath.Join(q, "run")) })
			if err != nil {
				t.Logf("sweep: %v", err)
			}
			mode, _ := modeOf(filepath.Join(ws, tc.lock))
			os.Chmod(filepath.Join(ws, tc.lock), 0o755)
			if _, err := os.Lstat(filepath.Join(ws, tc.gone)); err == nil {
				t.Errorf("%s stayed in the workspace: %+v", tc.gone, done)
			}
			if mode != tc.mode {
				t.Errorf("%s's mode after the sweep is %o, the command left %o", tc.lock, mode, tc.mode)
			}
		})
	}
}

// merge is a and b in one map (b wins).
func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
