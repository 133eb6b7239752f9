package layer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/internal/publictext"
	"golang.org/x/sys/unix"
)

// The commit's mechanics, with the layer a plain directory: what lands in
// the workspace, and that a crash anywhere is finished or undone by
// recovery.

var fixedTime = time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)

// commitCase is a workspace, a layer over it and the run's start.
type commitCase struct {
	ws, upper, state string
	started          time.Time
}

// newCommitCase builds, in dir, a workspace and a layer that changes it in
// every way a commit handles: new files in an existing directory, a
// changed file, removals, a file replaced by a directory and a directory
// by a file, and a new tree (modes, a setuid bit, owners, symlinks, empty
// and nested directories, fixed times).
func newCommitCase(t *testing.T, dir string) *commitCase {
	t.Helper()
	c := &commitCase{ws: filepath.Join(dir, "ws"), upper: filepath.Join(dir, "upper"), state: filepath.Join(dir, "state")}
	w := func(root, rel, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, fixedTime, fixedTime.Add(time.Duration(len(rel))*time.Second))
	}
	w(c.ws, "keep.txt", "keep\n", 0o644)
	w(c.ws, "old.txt", "old\n", 0o644)
	w(c.ws, "exist/a", "a\n", 0o644)
	w(c.ws, "swap", "a file\n", 0o644)
	w(c.ws, "d2/inner", "inner\n", 0o644)
	os.MkdirAll(c.state, 0o700)
	time.Sleep(30 * time.Millisecond) // past the coarse clock that stamps changes
	c.started = time.Now()
	time.Sleep(30 * time.Millisecond)

	w(c.upper, "keep.txt", "keep\nchanged\n", 0o640)
	for i := 0; i < 20; i++ {
		w(c.upper, fmt.Sprintf("exist/new%02d", i), fmt.Sprint(i), 0o644)
	}
	w(c.upper, "swap/x", "x\n", 0o644)
	os.RemoveAll(filepath.Join(c.upper, "d2"))
	w(c.upper, "d2", "now a file\n", 0o600)
	w(c.upper, "new/a", "run me\n", 0o755)
	w(c.upper, "new/b", "secret\n", 0o600)
	w(c.upper, "new/ro", "read only\n", 0o444)
	w(c.upper, "new/sticky", "sticky\n", 0o644|os.ModeSticky)
	w(c.upper, "new/suid", "suid\n", 0o755|os.ModeSetuid)
	w(c.upper, "new/sub/deep/f", "deep\n", 0o644)
	for i := 0; i < 30; i++ {
		w(c.upper, fmt.Sprintf("new/many/f%02d", i), strings.Repeat("x", i*100), 0o644)
	}
	os.MkdirAll(filepath.Join(c.upper, "new/empty"), 0o755)
	os.Symlink("a", filepath.Join(c.upper, "new/link"))
	os.Symlink("/etc/passwd", filepath.Join(c.upper, "new/abs"))
	os.Symlink("../keep.txt", filepath.Join(c.upper, "exist/up"))
	if os.Geteuid() == 0 {
		os.Lchown(filepath.Join(c.upper, "new/b"), 1234, 4321)
		os.Lchown(filepath.Join(c.upper, "new/link"), 1234, 4321)
		os.Lchown(filepath.Join(c.upper, "new/sub"), 1234, 4321)
		// A whiteout (a character device 0/0) removes old.txt.
		if err := unix.Mknod(filepath.Join(c.upper, "old.txt"), unix.S_IFCHR|0o600, 0); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(c.upper, "new/sub"), 0o750)
	for _, d := range []string{"new/sub/deep", "new/sub", "new/many", "new/empty", "new", "swap"} {
		p := filepath.Join(c.upper, d)
		os.Chtimes(p, fixedTime, fixedTime.Add(time.Duration(len(d))*time.Minute))
	}
	return c
}

// want is the workspace as the commit must leave it (tree's form).
func (c *commitCase) want(t *testing.T) map[string]string {
	t.Helper()
	want := tree(t, c.ws)
	up := tree(t, c.upper)
	for p, v := range up {
		if strings.HasPrefix(v, "whiteout") {
			delete(want, p)
			continue
		}
		for q := range want {
			if strings.HasPrefix(q, p+"/") && !strings.HasPrefix(up[p], "dir") {
				delete(want, q) // a directory replaced by a file
			}
		}
		want[p] = strings.Replace(v, "mode=4755", "mode=755", 1) // setuid dropped
	}
	return want
}

// tree describes every entry below root: type, mode, owner, mtime,
// content or target.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		desc := fmt.Sprintf("mode=%o owner=%d:%d mtime=%d", st.Mode&0o7777, st.Uid, st.Gid, st.Mtim.Nano())
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			out[rel] = "dir " + desc
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			out[rel] = "symlink " + desc + " -> " + target
		case unix.S_IFCHR:
			out[rel] = "whiteout"
		default:
			b, _ := os.ReadFile(p)
			out[rel] = "file " + desc + " " + string(b)
		}
		return nil
	})
	return out
}

// same compares trees, leaving out the times of the directories that
// existed before (existing: their times are the renames').
func same(t *testing.T, got, want map[string]string, existing ...string) {
	t.Helper()
	strip := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			for _, e := range existing {
				if k == e {
					v = v[:strings.Index(v, " mtime=")]
				}
			}
			out[k] = v
		}
		return out
	}
	g, w := strip(got), strip(want)
	var diff []string
	for k := range g {
		if g[k] != w[k] {
			diff = append(diff, fmt.Sprintf("%s:\n\tgot  %q\n\twant %q", k, g[k], w[k]))
		}
	}
	for k := range w {
		if _, ok := g[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: missing, want %q", k, w[k]))
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		t.Fatalf("workspace differs:\n%s", strings.Join(diff, "\n"))
	}
}

func (c *commitCase) commit(crashAt string) (Outcome, error) {
	f, err := os.Open(c.upper)
	if err != nil {
		return Outcome{}, err
	}
	defer f.Close()
	return Commit(context.Background(), Source{Upper: f, Started: c.started, HostUID: -1, HostGID: -1},
		Options{Workspace: c.ws, StateDir: c.state, RunID: "testrun0123", CrashAt: crashAt, Caller: testCaller()})
}

// testCaller is the test process itself, with the usual umask: the
// caller a CLI run would describe.
func testCaller() fsid.ID {
	groups, _ := os.Getgroups()
	return fsid.ID{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups, Umask: 0o022}
}

// TestCommitTree: a commit leaves the workspace as the layer says, new
// trees included, with modes, owners, times and symlinks kept, and
// leaves nothing of its own behind.
func TestCommitTree(t *testing.T) {
	c := newCommitCase(t, t.TempDir())
	want := c.want(t)
	out, err := c.commit("")
	if err != nil {
		t.Fatal(err)
	}
	same(t, tree(t, c.ws), want, "exist")
	if len(out.Conflicts) != 0 || len(out.Refused) != 0 {
		t.Fatalf("conflicts %v, refused %v", out.Conflicts, out.Refused)
	}
	if out.Stripped == nil || out.Stripped[0] != "new/suid" {
		t.Fatalf("stripped %v", out.Stripped)
	}
	if ents, _ := os.ReadDir(Where(c.state)); len(ents) != 0 {
		t.Fatalf("left in %s: %v", Where(c.state), ents)
	}
}

// TestCommitCrashAnywhere: sandboxd killed at any point of a commit (a
// file staged, staged, after each op) leaves the workspace untouched
// until staged, and recovery then leaves it exactly as a whole commit
// does, reports no conflict, and leaves nothing of the commit behind.
func TestCommitCrashAnywhere(t *testing.T) {
	points := []string{"stage:1", "stage:40", "staged"}
	for i := 1; i <= 60; i++ {
		points = append(points, fmt.Sprintf("apply:%d", i))
	}
	completed := false
	for _, at := range points {
		dir := t.TempDir()
		c := newCommitCase(t, dir)
		before, want := tree(t, c.ws), c.want(t)
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCommitCrashHelper$")
		cmd.Env = append(os.Environ(), "LAYER_CRASH_DIR="+dir, "LAYER_CRASH_AT="+at, "LAYER_CRASH_STARTED="+strconv.FormatInt(c.started.UnixNano(), 10))
		out, err := cmd.CombinedOutput()
		if err == nil {
			if !strings.HasPrefix(at, "apply:") {
				t.Fatalf("%s: not killed\n%s", at, out)
			}
			same(t, tree(t, c.ws), want, "exist")
			completed = true
			break // past the last op
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("%s: %v\n%s", at, err, out)
		}
		if strings.HasPrefix(at, "stage:") {
			same(t, tree(t, c.ws), before)
		}
		rec, err := Recover(c.state, testCaller(), nil)
		if err != nil || len(rec) != 1 {
			t.Fatalf("%s: recover: %v %+v", at, err, rec)
		}
		if strings.HasPrefix(at, "stage:") {
			same(t, tree(t, c.ws), before)
		} else {
			same(t, tree(t, c.ws), want, "exist")
		}
		if len(rec[0].Conflicts) != 0 {
			t.Fatalf("%s: recovery saw conflicts: %+v", at, rec[0].Conflicts)
		}
		if ents, _ := os.ReadDir(Where(c.state)); len(ents) != 0 {
			t.Fatalf("%s: left in %s: %v", at, Where(c.state), ents)
		}
	}
	if !completed {
		t.Fatal("the commit has more ops than the crash points")
	}
}

// TestCommitCrashHelper is the process TestCommitCrashAnywhere kills.
func TestCommitCrashHelper(t *testing.T) {
	dir := os.Getenv("LAYER_CRASH_DIR")
	if dir == "" {
		t.Skip("run by TestCommitCrashAnywhere")
	}
	ns, _ := strconv.ParseInt(os.Getenv("LAYER_CRASH_STARTED"), 10, 64)
	c := &commitCase{ws: filepath.Join(dir, "ws"), upper: filepath.Join(dir, "upper"), state: filepath.Join(dir, "state"), started: time.Unix(0, ns)}
	if _, err := c.commit(os.Getenv("LAYER_CRASH_AT")); err != nil {
		t.Fatal(err)
	}
}

// TestCommitDeepNewTree: a new tree deeper than a path can name commits
// what the workspace can be asked about and refuses the rest, as any
// other path the workspace cannot be reached at (the staging itself would
// reach any depth).
func TestCommitDeepNewTree(t *testing.T) {
	dir := t.TempDir()
	c := &commitCase{ws: filepath.Join(dir, "ws"), upper: filepath.Join(dir, "upper"), state: filepath.Join(dir, "state")}
	os.MkdirAll(c.ws, 0o755)
	c.started = time.Now()
	time.Sleep(20 * time.Millisecond)
	name := strings.Repeat("a", 200)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range append([]string{"upper"}, strings.Split(strings.Repeat(name+"/", 25)+"f", "/")...) {
		if n == "f" {
			f, err := unix.Openat(fd, n, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(f)
			break
		}
		if err := unix.Mkdirat(fd, n, 0o755); err != nil && i > 0 {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, n, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)
	out, err := c.commit("")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Refused) != 1 || !strings.Contains(out.Refused[0].Why, "cannot be reached in the workspace") {
		t.Fatalf("refused %+v", out.Refused)
	}
	// The reason is the report's: the errno in sandboxd's words, never
	// the layer's path or an error's text.
	if want := "cannot be reached in the workspace (file name too long)"; out.Refused[0].Why != want {
		t.Errorf("the reason is %q, want %q", out.Refused[0].Why, want)
	}
	if p := publictext.Problems(out.Refused[0].Why, nil); len(p) != 0 {
		t.Errorf("the reason %q has %q", out.Refused[0].Why, p)
	}
	depth := strings.Count(out.Refused[0].Path, "/")
	if p := filepath.Join(c.ws, strings.Repeat(name+"/", depth)); len(p) < 4096 {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			t.Fatalf("the reachable levels were not committed: %v", err)
		}
	}
}

// stagedDir makes, in a new staging directory, the staged directory "1"
// holding files a and b and sub/c, and returns the stager.
func stagedDir(t *testing.T) *stager {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"1/a", "1/b", "1/sub/c"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o700)
		os.WriteFile(filepath.Join(dir, p), []byte("staged "+p), 0o644)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &stager{dir: dir, fd: fd}
}

func openWS(t *testing.T, ws string) int {
	t.Helper()
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestPlaceDirMerge: a new directory that appeared in the workspace
// during the commit gets the staged entries it does not have; the ones it
// has stay, the command's saved beside them; running the op again (a
// replay) changes nothing.
func TestPlaceDirMerge(t *testing.T) {
	s := stagedDir(t)
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "out/sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "out/b"), []byte("outside"), 0o644)
	o := op{Kind: "placedir", Path: "out", Stage: "1", Expect: &expect{Absent: true}}
	for _, replay := range []bool{false, true} {
		s.replay = replay
		var out Outcome
		if err := applyOp(openWS(t, ws), s, &o, true, &out, "run0123456789"); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range []string{"out/a", "out/b", "out/b.sandboxd-conflict-run01234", "out/sub/c"} {
			b, _ := os.ReadFile(filepath.Join(ws, p))
			got[p] = string(b)
		}
		want := map[string]string{"out/a": "staged 1/a", "out/b": "outside", "out/b.sandboxd-conflict-run01234": "staged 1/b", "out/sub/c": "staged 1/sub/c"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("replay %v: %v", replay, got)
		}
		if !replay && (len(out.Conflicts) != 1 || out.Conflicts[0].Path != "out/b" || out.Conflicts[0].SavedAs != "out/b.sandboxd-conflict-run01234") {
			t.Fatalf("conflicts %+v", out.Conflicts)
		}
		if replay && len(out.Conflicts) != 0 {
			t.Fatalf("replay: conflicts %+v", out.Conflicts)
		}
	}
}

// TestPlaceDirOverFile: a file (or a symlink) that took a new directory's
// name during the commit stays; the directory is saved beside it.
func TestPlaceDirOverFile(t *testing.T) {
	for _, kind := range []string{"file", "symlink"} {
		s := stagedDir(t)
		ws := t.TempDir()
		outside := t.TempDir()
		if kind == "file" {
			os.WriteFile(filepath.Join(ws, "out"), []byte("outside"), 0o644)
		} else {
			os.Symlink(outside, filepath.Join(ws, "out"))
		}
		var out Outcome
		o := op{Kind: "placedir", Path: "out", Stage: "1", Expect: &expect{Absent: true}}
		if err := applyOp(openWS(t, ws), s, &o, true, &out, "run0123456789"); err != nil {
			t.Fatal(err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("%s: written through the symlink: %v", kind, ents)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "out.sandboxd-conflict-run01234/sub/c")); string(b) != "staged 1/sub/c" {
			t.Fatalf("%s: not saved beside: %q", kind, b)
		}
		if len(out.Conflicts) != 1 || out.Conflicts[0].SavedAs != "out.sandboxd-conflict-run01234" {
			t.Fatalf("%s: conflicts %+v", kind, out.Conflicts)
		}
	}
}

// TestPlaceTaken: a staged file whose name was free when planned but is
// taken when it is placed never replaces what took it.
func TestPlaceTaken(t *testing.T) {
	s := stagedDir(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("outside"), 0o644)
	var out Outcome
	o := op{Kind: "place", Path: "f", Stage: "2", Expect: &expect{Absent: true}}
	os.WriteFile(filepath.Join(s.dir, "2"), []byte("staged"), 0o644)
	if err := applyOp(openWS(t, ws), s, &o, true, &out, "run0123456789"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "outside" {
		t.Fatalf("replaced: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f.sandboxd-conflict-run01234")); string(b) != "staged" {
		t.Fatalf("not saved beside: %q", b)
	}
}

// TestDoneRecords: records are batched, but a removal's is written, with
// all before it, before the next op starts; a line a crash cut short
// does not count.
func TestDoneRecords(t *testing.T) {
	dir := t.TempDir()
	j, err := newJournal(dir, "run", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if err := j.markStaged(nil); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "gone"), nil, 0o644)
	var out Outcome
	a := &applier{ws: openWS(t, ws), s: &stager{fd: -1}, j: j, out: &out, runID: "run"}
	ops := []op{{Kind: "meta", Path: "m1", Mode: 0o755}, {Kind: "meta", Path: "m2", Mode: 0o755}, {Kind: "remove", Path: "gone"}, {Kind: "meta", Path: "m3", Mode: 0o755}}
	for i := range ops {
		if err := a.apply(i, &ops[i], true); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(j.path(".done")); string(b) != "0\n1\n2\n" {
		t.Fatalf("done records %q", b)
	}
	if last := lastDone(j.path(".done")); last != 2 {
		t.Fatalf("last done %d", last)
	}
	j.done.WriteString("12")
	if last := lastDone(j.path(".done")); last != 2 {
		t.Fatalf("a cut line counted: last done %d", last)
	}
}
