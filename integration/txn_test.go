package integration

import (
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Transactional attempts: each attempt's workspace writes are held in a
// copy-on-write layer; a retried attempt's are dropped, the final one's
// committed.

// txnOf returns the report's transaction object.
func txnOf(t *testing.T, r result) map[string]any {
	t.Helper()
	m, ok := r.report["transaction"].(map[string]any)
	if !ok {
		t.Fatalf("no transaction in the report\n%s", r)
	}
	return m
}

// committedOf returns the report's transaction.committed object.
func committedOf(t *testing.T, r result) map[string]any {
	t.Helper()
	m, ok := txnOf(t, r)["committed"].(map[string]any)
	if !ok {
		t.Fatalf("nothing committed in the report: %v\n%s", txnOf(t, r), r)
	}
	return m
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

// TestTxnRetryRunsOnce: `git commit && write outside` is denied at the
// outside write, a person allows it, and the retry runs from the
// untouched workspace: exactly one commit, the appended line once, and
// the outside write done.
func TestTxnRetryRunsOnce(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.hostRepo(t, ".")
		e.writeFile(filepath.Join(e.ws, "log.txt"), "start\n", 0o644)
		e.hostGit(t, "add", "-A")
		e.hostGit(t, "commit", "-q", "-m", "log")
		target := filepath.Join(e.mkdir("out", 0o755), "deployed.txt")
		tm := newTerminal(t, e, func(n int, prompt string) string {
			if n == 0 && strings.Contains(prompt, "make_reg "+target) {
				return "y"
			}
			return "n"
		})
		script := "echo line >> log.txt && git commit -qam sandboxed && echo deployed > " + target
		r := e.sandboxdOpts(runOpts{tty: tm.slave}, "run", "--reviewer", "human", "-c", script)
		if r.code != 0 || r.report["attempts"] != float64(2) {
			t.Fatalf("want a successful second attempt\n%s\n%s", r, tm.text())
		}
		if got := readFile(t, target); got != "deployed\n" {
			t.Fatalf("outside write: %q\n%s", got, r)
		}
		if got := readFile(t, filepath.Join(e.ws, "log.txt")); got != "start\nline\n" {
			t.Fatalf("log.txt = %q, want the line appended once\n%s", got, r)
		}
		log := e.hostGit(t, "log", "--format=%s")
		if strings.Count(log, "sandboxed") != 1 {
			t.Fatalf("git log has %d sandboxed commits, want 1:\n%s\n%s", strings.Count(log, "sandboxed"), log, r)
		}
		if st := e.hostGit(t, "status", "--porcelain"); st != "" {
			t.Fatalf("work tree not clean after commit: %q\n%s", st, r)
		}
		txn := txnOf(t, r)
		if txn["mode"] != "layer" || txn["discarded_attempts"] != float64(1) {
			t.Fatalf("transaction %v", txn)
		}
	})
}

// TestTxnDiscardedAttemptLeavesNoTrace: the first attempt removes src and
// is retried; the retry starts with src in place and keeps it.
func TestTxnDiscardedAttemptLeavesNoTrace(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.ws, "src", "main.go"), "package main\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "src", "lib", "lib.go"), "package lib\n", 0o644)
		target := filepath.Join(e.mkdir("out", 0o755), "ok.txt")
		pol := filepath.Join(e.mkdir("policy", 0o755), "p.toml")
		e.writeFile(pol, "[boundaries]\nallow = [\"fs make_reg "+target+"\"]\n", 0o644)
		// The grant pre-creates the target, so the retry takes the other branch.
		script := fmt.Sprintf(`if [ -e %[1]s ]; then test -f src/lib/lib.go && echo SRC-INTACT; echo second >> %[1]s; else rm -rf src; echo first > new.txt; echo first > %[1]s; fi`, target)
		r := e.sandboxd("run", "--policy", pol, "-c", script)
		if !strings.Contains(r.stdout, "SRC-INTACT") || r.report["attempts"] != float64(2) {
			t.Fatalf("the retry did not start from the untouched workspace\n%s", r)
		}
		for _, p := range []string{"src/main.go", "src/lib/lib.go"} {
			if _, err := os.Stat(filepath.Join(e.ws, p)); err != nil {
				t.Fatalf("%s is gone after the discarded attempt: %v\n%s", p, err, r)
			}
		}
		if _, err := os.Lstat(filepath.Join(e.ws, "new.txt")); err == nil {
			t.Fatalf("the discarded attempt's new.txt reached the workspace\n%s", r)
		}
	})
}

// TestTxnCommitShapes: whiteouts, opaque directories, replaced types,
// renames, modes and times are committed as the command left them.
func TestTxnCommitShapes(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		w := func(rel, content string) { e.writeFile(filepath.Join(e.ws, rel), content, 0o644) }
		w("gone.txt", "x\n")
		w("file-to-dir", "x\n")
		w("dir-to-file/a", "a\n")
		w("redo/old1", "1\n")
		w("redo/sub/old2", "2\n")
		w("keep/k", "k\n")
		w("renamed-from", "moved\n")
		w("exe.sh", "#!/bin/sh\n")
		w("ro/old", "old\n")
		os.Chmod(filepath.Join(e.ws, "ro"), 0o555)
		t.Cleanup(func() { os.Chmod(filepath.Join(e.ws, "ro"), 0o755) })
		script := strings.Join([]string{
			"rm gone.txt",
			"rm file-to-dir && mkdir file-to-dir && echo in > file-to-dir/x",
			"rm -rf dir-to-file && echo now-a-file > dir-to-file",
			"rm -rf redo && mkdir redo && echo fresh > redo/only",
			"mv renamed-from renamed-to",
			"chmod 700 exe.sh && touch -d '2001-02-03 04:05:06' exe.sh",
			"mkdir -p new/deep/er && echo deep > new/deep/er/f && chmod 750 new/deep",
			"ln -s keep/k link",
			"mkdir locked && echo l > locked/f && chmod 000 locked/f && chmod 500 locked",
			"chmod 755 ro && echo new > ro/new && chmod 555 ro",
		}, " && ")
		r := e.run(t, script)
		want := map[string]string{
			"file-to-dir/x": "in\n",
			"dir-to-file":   "now-a-file\n",
			"redo/only":     "fresh\n",
			"keep/k":        "k\n",
			"renamed-to":    "moved\n",
			"exe.sh":        "#!/bin/sh\n",
			"new/deep/er/f": "deep\n",
			"link":          "-> keep/k",
			"file-to-dir/":  "dir",
			"redo/":         "dir",
			"new/deep/er/":  "dir",
			"new/deep/":     "dir",
			"new/":          "dir",
			"keep/":         "dir",
		}
		got := tree(t, e.ws)
		for k, v := range want {
			if got[strings.TrimSuffix(k, "/")] != v {
				t.Errorf("%s = %q, want %q", k, got[strings.TrimSuffix(k, "/")], v)
			}
		}
		for _, gone := range []string{"gone.txt", "redo/old1", "redo/sub", "renamed-from", "dir-to-file/a"} {
			if _, ok := got[gone]; ok {
				t.Errorf("%s still exists", gone)
			}
		}
		st, err := os.Stat(filepath.Join(e.ws, "exe.sh"))
		if err != nil || st.Mode().Perm() != 0o700 || st.ModTime().UTC().Year() != 2001 {
			t.Errorf("exe.sh mode/time not kept: %v %v", st.Mode(), st.ModTime())
		}
		if st, err := os.Stat(filepath.Join(e.ws, "new", "deep")); err != nil || st.Mode().Perm() != 0o750 {
			t.Errorf("new/deep mode not kept: %v", st.Mode())
		}
		if got["ro/new"] != "new\n" {
			t.Errorf("ro/new not committed into a directory the command opened and locked again")
		}
		if st, err := os.Lstat(filepath.Join(e.ws, "ro")); err != nil || st.Mode().Perm() != 0o555 {
			t.Errorf("ro mode not kept: %v %v", st, err)
		}
		// A directory and file the command locked are committed locked.
		if st, err := os.Lstat(filepath.Join(e.ws, "locked")); err != nil || st.Mode().Perm() != 0o500 {
			t.Errorf("locked mode not kept: %v %v", st, err)
		}
		if st, err := os.Lstat(filepath.Join(e.ws, "locked", "f")); err != nil || st.Mode().Perm() != 0 {
			t.Errorf("locked/f mode not kept: %v %v", st, err)
		}
		os.Chmod(filepath.Join(e.ws, "locked"), 0o755)
		var sys syscall.Stat_t
		syscall.Stat(filepath.Join(e.ws, "new", "deep", "er", "f"), &sys)
		if int(sys.Uid) != e.id.uid {
			t.Errorf("new file owned by uid %d, want %d (the workspace owner)", sys.Uid, e.id.uid)
		}
		if t.Failed() {
			t.Logf("tree %v\n%s", got, r)
		}
	})
}

// tree maps every path below root to its content ("dir" for directories,
// "-> target" for symlinks).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "-> " + l
		case info.IsDir():
			out[rel] = "dir"
		default:
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// TestTxnCommitNeverEscapes: symlinks and hardlinks planted in the layer
// or the workspace are never followed by the commit; fifos, setuid bits
// and device nodes are not committed.
func TestTxnCommitNeverEscapes(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outDir := e.mkdir("outside", 0o755)
		outFile := e.outside("victim.txt", "original\n")
		checkPasswd := fileUnchanged(t, "/etc/passwd")
		// A hardlink in the workspace to a file outside it.
		if err := os.Link(outFile, filepath.Join(e.ws, "hardlink")); err != nil {
			t.Fatal(err)
		}
		e.writeFile(filepath.Join(e.ws, "sub", "keep"), "k\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "suid"), "#!/bin/sh\n", 0o755)
		os.Chmod(filepath.Join(e.ws, "suid"), 0o4755)
		script := strings.Join([]string{
			"ln -s /etc/passwd passwd-link",
			"ln -s " + outDir + " outdir-link",
			"rm -rf sub && ln -s " + outDir + " sub",
			"echo pwned > hardlink",
			"echo a > x && ln x y",
			"mkfifo fifo",
			"echo more >> suid",
		}, "; ")
		r := e.run(t, script)
		// Replacing the workspace's link drops the victim's link count
		// (its ctime moves); its content and mode must not.
		if st, err := os.Stat(outFile); err != nil || readFile(t, outFile) != "original\n" || st.Mode().Perm() != 0o644 {
			t.Fatalf("the file outside changed through a hardlink: %v %v\n%s", st, err, r)
		}
		checkPasswd()
		if ents, _ := os.ReadDir(outDir); len(ents) != 1 {
			t.Fatalf("the outside directory gained entries: %v\n%s", ents, r)
		}
		got := tree(t, e.ws)
		if got["hardlink"] != "pwned\n" || got["x"] != "a\n" || got["y"] != "a\n" {
			t.Fatalf("workspace after commit: %v\n%s", got, r)
		}
		if got["passwd-link"] != "-> /etc/passwd" || got["sub"] != "-> "+outDir {
			t.Fatalf("symlinks not committed as symlinks: %v\n%s", got, r)
		}
		if _, err := os.Lstat(filepath.Join(e.ws, "fifo")); err == nil {
			t.Fatalf("a fifo was committed\n%s", r)
		}
		if st, err := os.Stat(filepath.Join(e.ws, "suid")); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Fatalf("suid kept: %v %v\n%s", st.Mode(), err, r)
		}
		if !strings.Contains(r.stderr, "fifo") {
			t.Fatalf("the skipped fifo is not reported\n%s", r)
		}
	})
}

// TestTxnCommitRefusesThroughSwappedDir: while the command runs, a
// directory it writes into is replaced on the host by a symlink to a
// directory outside; the commit does not write through it.
func TestTxnCommitRefusesThroughSwappedDir(t *testing.T) {
	// Serial: the test swaps a directory 0.7 s into the run, which must still be running then.
	forEach(t, func(t *testing.T, e *env) {
		outDir := e.mkdir("outside", 0o755)
		e.writeFile(filepath.Join(e.ws, "d", "a"), "a\n", 0o644)
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(700 * time.Millisecond)
			os.Rename(filepath.Join(e.ws, "d"), filepath.Join(e.ws, "d.orig"))
			os.Symlink(outDir, filepath.Join(e.ws, "d"))
		}()
		r := e.run(t, "echo planted > d/new; echo changed > d/a; sleep 2")
		<-done
		if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
			t.Fatalf("the commit wrote through a swapped-in symlink: %v\n%s", ents, r)
		}
		if len(committedOf(t, r)["conflicts"].([]any)) == 0 {
			t.Fatalf("no conflict reported\n%s", r)
		}
	})
}

// TestTxnConflict: a file the command changed was also changed on the
// host while it ran: the host's version stays, the command's is saved
// beside it, and the report says so. An untouched outside edit stays.
func TestTxnConflict(t *testing.T) {
	// Serial: the test edits files 0.7 s into the run, which must still be running then.
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.ws, "both.txt"), "original\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "host-only.txt"), "original\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "deleted-by-cmd.txt"), "original\n", 0o644)
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(700 * time.Millisecond)
			for _, n := range []string{"both.txt", "host-only.txt", "deleted-by-cmd.txt"} {
				os.WriteFile(filepath.Join(e.ws, n), []byte("host edit\n"), 0o644)
			}
		}()
		r := e.run(t, "echo command > both.txt; rm deleted-by-cmd.txt; sleep 2")
		<-done
		for _, n := range []string{"both.txt", "host-only.txt", "deleted-by-cmd.txt"} {
			if got := readFile(t, filepath.Join(e.ws, n)); got != "host edit\n" {
				t.Fatalf("%s = %q: the host's edit was lost\n%s", n, got, r)
			}
		}
		matches, _ := filepath.Glob(filepath.Join(e.ws, "both.txt.sandboxd-conflict-*"))
		if len(matches) != 1 || readFile(t, matches[0]) != "command\n" {
			t.Fatalf("the command's version is not saved beside: %v\n%s", matches, r)
		}
		var paths []string
		for _, c := range committedOf(t, r)["conflicts"].([]any) {
			paths = append(paths, c.(map[string]any)["path"].(string))
		}
		sort.Strings(paths)
		if strings.Join(paths, ",") != "both.txt,deleted-by-cmd.txt" {
			t.Fatalf("conflicts %v\n%s", paths, r)
		}
	})
}

// TestTxnGitConfigParsed: an ordinary git config change is committed; one
// that adds a program to run is not, however the command wrote it.
func TestTxnGitConfigParsed(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.hostRepo(t, ".")
		e.hostRepo(t, "sub")
		r := e.run(t, `git config user.name "Sandboxed Name" && cd sub && git config alias.st status && printf '[alias]\n\tx = "!touch MARK"\n' >> .git/config`)
		if got := e.hostGit(t, "config", "user.name"); strings.TrimSpace(got) != "Sandboxed Name" {
			t.Fatalf("user.name = %q, want the sandboxed change committed\n%s", got, r)
		}
		sub := filepath.Join(e.ws, "sub")
		if out, _ := e.gitOut(sub, "config", "--get", "alias.x"); strings.TrimSpace(out) != "" {
			t.Fatalf("a shell alias was committed: %q\n%s", out, r)
		}
		if !mentions(r, "sub/.git/config") {
			t.Fatalf("the refused config is not reported\n%s", r)
		}
		var persist bool
		for _, b := range boundaries(r) {
			if b["operation"] == "persist" && b["path"] == filepath.Join(sub, ".git", "config") && b["source"] == "hard-deny" && b["decision"] == "deny" {
				persist = true
			}
		}
		if !persist {
			t.Fatalf("no persist boundary for sub/.git/config: %v", boundaries(r))
		}
		e.hostProbe(t, "sub", r)
	})
}

// TestTxnLayerSize: a write beyond the layer's size fails inside with
// ENOSPC; what fit is committed.
func TestTxnLayerSize(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		pol := filepath.Join(e.mkdir("policy", 0o755), "p.toml")
		e.writeFile(pol, "[limits]\nlayer_size = \"4MiB\"\n", 0o644)
		r := e.sandboxd("run", "--policy", pol, "-c", "head -c 8000000 /dev/zero > big; echo rc=$?; echo small > small")
		if !strings.Contains(r.stderr, "No space left on device") || !strings.Contains(r.stdout, "rc=1") {
			t.Fatalf("no ENOSPC inside\n%s", r)
		}
		st, err := os.Stat(filepath.Join(e.ws, "big"))
		if err != nil || st.Size() >= 8000000 || st.Size() > 4<<20 {
			t.Fatalf("big: %v %v\n%s", st, err, r)
		}
		if txnOf(t, r)["layer_size"] != float64(4<<20) {
			t.Fatalf("layer size not reported: %v", txnOf(t, r))
		}
	})
}

// TestTxnNoTransaction: --no-transaction writes straight through (a
// retry then repeats the first attempt's effects) and the report says so.
func TestTxnNoTransaction(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		target := filepath.Join(e.mkdir("out", 0o755), "ok.txt")
		pol := filepath.Join(e.mkdir("policy", 0o755), "p.toml")
		e.writeFile(pol, "[boundaries]\nallow = [\"fs make_reg "+target+"\"]\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "log.txt"), "", 0o644)
		r := e.sandboxd("run", "--no-transaction", "--policy", pol, "-c", "echo line >> log.txt && echo x > "+target)
		if txnOf(t, r)["mode"] != "none" || r.report["attempts"] != float64(2) {
			t.Fatalf("transaction %v attempts %v\n%s", txnOf(t, r), r.report["attempts"], r)
		}
		if got := readFile(t, filepath.Join(e.ws, "log.txt")); got != "line\nline\n" {
			t.Fatalf("log.txt = %q; without a layer both attempts write\n%s", got, r)
		}
	})
}

// TestTxnCrashDuringCommit: sandboxd is killed (SIGKILL, at a failpoint)
// while committing. Before anything reached the workspace it is left
// untouched; after that, recovery (`sandboxd recover`, or the next
// `sandboxd run`) completes the commit. It is never half-committed.
func TestTxnCrashDuringCommit(t *testing.T) {
	t.Parallel()
	script := `for i in 1 2 3 4 5 6 7 8 9 10; do echo new$i > new$i.txt; done; mkdir -p dir/sub && echo deep > dir/sub/f; rm old.txt; echo changed >> keep.txt`
	setup := func(e *env) map[string]string {
		e.writeFile(filepath.Join(e.ws, "old.txt"), "old\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "keep.txt"), "keep\n", 0o644)
		return tree(t, e.ws)
	}
	final := txnFinal
	same := func(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	for _, c := range []struct {
		at      string
		applied bool // whether anything may have reached the workspace
		viaRun  bool // recover through the next `sandboxd run`
	}{
		{"stage:1", false, false},
		{"stage:6", false, true},
		{"staged", true, false},
		{"apply:1", true, false},
		{"apply:7", true, true},
		{"apply:13", true, false},
	} {
		t.Run(strings.ReplaceAll(c.at, ":", "-"), func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				before := setup(e)
				r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_TEST_CRASH_AT=" + c.at}, noReport: true, killed: true}, "run", "-c", script)
				if r.code != -1 && r.code != 137 {
					t.Fatalf("sandboxd was not killed at %s\n%s", c.at, r)
				}
				now := tree(t, e.ws)
				if !c.applied && !same(now, before) {
					t.Fatalf("the workspace changed before the commit was staged:\nbefore %v\nafter  %v", before, now)
				}
				if !same(now, before) && !same(now, final(before)) && !c.applied {
					t.Fatalf("half-committed: %v", now)
				}
				var rr result
				if c.viaRun {
					rr = e.sandboxd("run", "-c", "true")
				} else {
					rr = e.sandboxdOpts(runOpts{noReport: true}, "recover")
					if rr.code != 0 {
						t.Fatalf("recover failed\n%s", rr)
					}
				}
				now = tree(t, e.ws)
				want := before
				if c.applied {
					want = final(before)
				}
				if !same(now, want) {
					t.Fatalf("after recovery:\nwant %v\ngot  %v\n%s", want, now, rr)
				}
				state := filepath.Join(e.home, ".local", "state", "sandboxd", "txn")
				if ents, _ := os.ReadDir(state); len(ents) != 0 {
					var names []string
					for _, x := range ents {
						names = append(names, x.Name())
					}
					t.Fatalf("recovery left %v in %s", names, state)
				}
			})
		})
	}
}

// TestTxnWorkspaceWithMounts: an overlay cannot show mounts inside the
// workspace, so such a workspace is written straight through, and the
// report says why.
func TestTxnWorkspaceWithMounts(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs in the workspace needs root")
	}
	forEach(t, func(t *testing.T, e *env) {
		mnt := e.mkdir("ws/mnt", 0o755)
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=1m,mode=0755,uid=%d,gid=%d", e.id.uid, e.id.gid)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
		r := e.run(t, "echo inner > mnt/f; echo top > top.txt")
		txn := txnOf(t, r)
		if txn["mode"] != "none" || !strings.Contains(fmt.Sprint(txn["why"]), mnt) {
			t.Fatalf("transaction %v\n%s", txn, r)
		}
		if readFile(t, filepath.Join(mnt, "f")) != "inner\n" || readFile(t, filepath.Join(e.ws, "top.txt")) != "top\n" {
			t.Fatalf("writes did not land\n%s", r)
		}
	})
}

// TestTxnKilledFromOutside: sandboxd is killed with SIGKILL from outside
// at whatever moment its commit has reached, a few milliseconds after its
// journal (staging) or its progress file (applying) appears; after
// `sandboxd recover` the workspace is exactly as before the run or
// exactly as the command left it.
func TestTxnKilledFromOutside(t *testing.T) {
	// Serial: it kills sandboxd at random times within a window of milliseconds.
	for _, phase := range []struct{ name, glob string }{{"staging", "*.journal"}, {"applying", "*.done"}} {
		t.Run(phase.name, func(t *testing.T) { killedFromOutside(t, phase.glob) })
	}
}

func killedFromOutside(t *testing.T, glob string) {
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.ws, "old.txt"), "old\n", 0o644)
		before := tree(t, e.ws)
		marker := "kill-me-" + randHex(6)
		script := `mkdir out && for i in $(seq 1500); do echo $i > out/f$i; done && rm old.txt # ` + marker
		journal := filepath.Join(e.home, ".local", "state", "sandboxd", "txn")
		stop := make(chan struct{})
		killed := make(chan bool, 1)
		go func() {
			for {
				select {
				case <-stop:
					killed <- false
					return
				default:
				}
				if m, _ := filepath.Glob(filepath.Join(journal, glob)); len(m) > 0 {
					// Somewhere in staging or applying: only sandboxd's
					// command line still names the marker (the command and
					// the helper are gone by the commit).
					time.Sleep(time.Duration(mrand.IntN(4000)) * time.Microsecond)
					exec.Command("pkill", "-KILL", "-f", marker).Run()
					killed <- true
					return
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
		r := e.sandboxdOpts(runOpts{noReport: true, killed: true}, "run", "-c", script)
		close(stop)
		if !<-killed {
			t.Skipf("the commit finished before it could be killed\n%s", r)
		}
		rr := e.sandboxdOpts(runOpts{noReport: true}, "recover")
		if rr.code != 0 {
			t.Fatalf("recover failed\n%s", rr)
		}
		t.Logf("recovery: %s", strings.TrimSpace(rr.stdout))
		now := tree(t, e.ws)
		want := map[string]string{"out": "dir"}
		for i := 1; i <= 1500; i++ {
			want[fmt.Sprintf("out/f%d", i)] = fmt.Sprintf("%d\n", i)
		}
		if fmt.Sprint(now) != fmt.Sprint(before) && fmt.Sprint(now) != fmt.Sprint(want) {
			t.Fatalf("after a kill and recovery the workspace is neither untouched nor fully committed (%d entries)\n%s", len(now), r)
		}
	})
}

// TestTxnStateOnAnotherMount: when sandboxd's state directory is not on
// the workspace's mount, files are staged inside the workspace (renames
// must not cross mounts) and nothing of the staging is left after the
// commit, or after a crash and recovery.
func TestTxnStateOnAnotherMount(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		state, err := os.MkdirTemp("/dev/shm", "sandboxd-it-state-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(state) })
		e.chown(state)
		env := []string{"XDG_STATE_HOME=" + state}
		e.writeFile(filepath.Join(e.ws, "keep.txt"), "keep\n", 0o644)
		r := e.sandboxdOpts(runOpts{env: env}, "run", "-c", "mkdir d && echo one > d/one && echo two > two")
		got := tree(t, e.ws)
		if got["d/one"] != "one\n" || got["two"] != "two\n" || got["keep.txt"] != "keep\n" || len(got) != 4 {
			t.Fatalf("workspace after commit: %v\n%s", got, r)
		}
		r = e.sandboxdOpts(runOpts{env: append(env, "SANDBOXD_TEST_CRASH_AT=apply:1"), noReport: true, killed: true}, "run", "-c", "echo three > three")
		if m, _ := filepath.Glob(filepath.Join(e.ws, ".sandboxd-commit-*")); len(m) != 1 {
			t.Fatalf("no staging directory in the workspace after a crash mid-commit: %v\n%s", m, r)
		}
		if rr := e.sandboxdOpts(runOpts{env: env, noReport: true}, "recover"); rr.code != 0 {
			t.Fatalf("recover\n%s", rr)
		}
		got = tree(t, e.ws)
		if got["three"] != "three\n" || len(got) != 5 {
			t.Fatalf("after recovery: %v", got)
		}
	})
}

// TestTxnRecoveryKeepsLaterEdits: a commit interrupted after staging is
// completed by recovery, but a file edited in the workspace between the
// crash and the recovery keeps that edit (the commit's version is saved
// beside it), and recovery says so.
func TestTxnRecoveryKeepsLaterEdits(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		p := filepath.Join(e.ws, "keep.txt")
		e.writeFile(p, "keep\n", 0o644)
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_TEST_CRASH_AT=staged"}, noReport: true, killed: true}, "run", "-c", "echo command >> keep.txt; echo new > new.txt")
		if got := readFile(t, p); got != "keep\n" {
			t.Fatalf("keep.txt changed before recovery: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
		os.WriteFile(p, []byte("edited after the crash\n"), 0o644)
		rr := e.sandboxdOpts(runOpts{noReport: true}, "recover")
		if rr.code != 0 || !strings.Contains(rr.stdout, "not committed: "+p) {
			t.Fatalf("recover does not name the kept edit\n%s", rr)
		}
		if got := readFile(t, p); got != "edited after the crash\n" {
			t.Fatalf("recovery overwrote a later edit: %q\n%s", got, rr)
		}
		if got := readFile(t, filepath.Join(e.ws, "new.txt")); got != "new\n" {
			t.Fatalf("recovery did not complete the rest: %q", got)
		}
		saved, _ := filepath.Glob(p + ".sandboxd-conflict-*")
		if len(saved) != 1 || readFile(t, saved[0]) != "keep\ncommand\n" {
			t.Fatalf("the commit's version is not saved beside: %v\n%s", saved, rr)
		}
	})
}

// TestTxnCommitMatchesDirect: random scripts of creates, appends,
// removals, renames (files and directories), symlinks, hardlinks,
// truncations, mode changes and type changes leave the same tree whether written through the layer and
// committed, or written straight to the workspace (--no-transaction).
func TestTxnCommitMatchesDirect(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		for seed := uint64(1); seed <= seeds(); seed++ {
			rng := mrand.New(mrand.NewPCG(seed, 42))
			name := func() string {
				dirs := []string{"", "a/", "a/b/", "c/"}
				return dirs[rng.IntN(len(dirs))] + []string{"x", "y", "z", "b", "c"}[rng.IntN(5)]
			}
			var ops []string
			for i := 0; i < 25; i++ {
				p, q := name(), name()
				switch rng.IntN(12) {
				case 0, 1:
					ops = append(ops, fmt.Sprintf("mkdir -p $(dirname %s) && echo %d > %s", p, i, p))
				case 2:
					ops = append(ops, fmt.Sprintf("echo %d >> %s", i, p))
				case 3:
					ops = append(ops, "rm -f "+p)
				case 4:
					ops = append(ops, "rm -rf "+p)
				case 5:
					ops = append(ops, fmt.Sprintf("mv -T %s %s", p, q))
				case 6:
					ops = append(ops, "mkdir -p "+p)
				case 7:
					ops = append(ops, fmt.Sprintf("ln -s ../%s %s", q, p))
				case 8:
					ops = append(ops, fmt.Sprintf("chmod %o %s", []int{0o600, 0o755, 0o640}[rng.IntN(3)], p))
				case 9:
					ops = append(ops, fmt.Sprintf("rm -rf %s && mkdir -p %s/%s", p, p, "in"))
				case 10:
					ops = append(ops, fmt.Sprintf("ln %s %s", p, q))
				case 11:
					ops = append(ops, "truncate -s 3 "+p)
				}
			}
			script := strings.Join(ops, " 2>/dev/null; ") + " 2>/dev/null; true"
			var trees [2]map[string]string
			for i, args := range [][]string{{"run", "-c", script}, {"run", "--no-transaction", "-c", script}} {
				ws := filepath.Join(e.dir, fmt.Sprintf("diff-%d-%d", seed, i))
				for _, f := range []string{"a/x", "a/b/y", "c/z", "x", "a/b/c"} {
					e.writeFile(filepath.Join(ws, f), "initial "+f+"\n", 0o644)
				}
				e.chown(ws)
				os.Chmod(ws, 0o755)
				r := e.sandboxdOpts(runOpts{dir: ws}, append([]string{args[0], "--workspace", ws}, args[1:]...)...)
				if r.code != 0 {
					t.Fatalf("seed %d: %v\n%s", seed, args, r)
				}
				trees[i] = treeWithModes(t, ws)
			}
			if fmt.Sprint(trees[0]) != fmt.Sprint(trees[1]) {
				t.Fatalf("seed %d: the committed tree differs from the direct one\nscript: %s\nlayer:  %v\ndirect: %v", seed, script, trees[0], trees[1])
			}
		}
	})
}

// treeWithModes is tree with each entry's permission bits.
func treeWithModes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := tree(t, root)
	for rel, v := range out {
		st, err := os.Lstat(filepath.Join(root, rel))
		if err == nil && st.Mode()&os.ModeSymlink == 0 {
			out[rel] = fmt.Sprintf("%s [%o]", v, st.Mode().Perm())
		}
	}
	return out
}

// seeds is how many random scripts TestTxnCommitMatchesDirect runs:
// SANDBOXD_TXN_SEEDS, or 12.
func seeds() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("SANDBOXD_TXN_SEEDS"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 12
}
