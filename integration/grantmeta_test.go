package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fileMeta is what a grant must never change: mode, owner, and the
// extended attributes.
type fileMeta struct {
	mode     os.FileMode
	uid, gid uint32
	xattrs   string
}

func metaOf(t *testing.T, p string) fileMeta {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	buf := make([]byte, 4096)
	n, _ := unix.Llistxattr(p, buf)
	return fileMeta{mode: st.Mode(), uid: sys.Uid, gid: sys.Gid, xattrs: string(buf[:max(n, 0)])}
}

// TestGrantChangesContentOnly: a file granted for writing (an existing
// one, and one the grant creates) gets the command's content and nothing
// else: its mode, owner and extended attributes stay as they were on the
// host, while the command runs (stat'ed from outside then) and after,
// whatever chmod, touch and setfattr the command tries; a created file
// gets the caller's umask; each such attempt is a boundary, not granted.
func TestGrantChangesContentOnly(t *testing.T) {
	// Serial: it looks at the host's files in the seconds the command is still running.
	forEach(t, func(t *testing.T, e *env) {
		e.runArgs = []string{"--no-transaction"} // the marker below must reach the host while the command runs
		m := newFakeModel(t, func(string) (string, string, string, string) {
			return "allow", "low", "high", "the task writes these files"
		})
		out := e.mkdir("out", 0o755)
		existing, created := filepath.Join(out, "existing.txt"), filepath.Join(out, "created.txt")
		e.writeFile(existing, "old\n", 0o640)
		before := metaOf(t, existing)
		ready := filepath.Join(e.ws, "ready")
		script := fmt.Sprintf(`echo more >> %[1]s; echo new > %[2]s
if grep -q more %[1]s && [ -s %[2]s ]; then
  for f in %[1]s %[2]s; do chmod 666 $f; chmod +x $f; touch -d 2001-01-01 $f; setfattr -n user.evil -v 1 $f; done
  echo READY > %[3]s; sleep 3; echo WROTE
fi`, existing, created, ready)
		pol := modelPolicy(t, e, m, "")
		done := make(chan result, 1)
		go func() {
			done <- e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}}, append(append([]string{"run"}, e.runArgs...),
				"--policy", pol, "--reviewer", "model", "-c", script)...)
		}()
		var r result
		deadline := time.After(50 * time.Second)
	wait:
		for {
			select {
			case r = <-done:
				break wait
			case <-deadline:
				t.Fatal("the run did not finish")
			case <-time.After(50 * time.Millisecond):
				if _, err := os.Stat(ready); err == nil {
					// The command has tried everything and is still running.
					if got := metaOf(t, existing); got != before {
						t.Errorf("while the command runs, the granted file's metadata changed on the host: %+v, was %+v", got, before)
					}
					if st, err := os.Stat(created); err == nil && st.Mode().Perm()&0o111 != 0 {
						t.Errorf("while the command runs, the created file is %v on the host", st.Mode())
					}
					r = <-done
					break wait
				}
			}
		}
		if !strings.Contains(r.stdout, "WROTE") {
			t.Fatalf("the grants were not used (the test would prove nothing)\n%s", r)
		}
		if b, _ := os.ReadFile(existing); string(b) != "old\nmore\n" {
			t.Errorf("the granted content did not land: %q\n%s", b, r)
		}
		if b, _ := os.ReadFile(created); string(b) != "new\n" {
			t.Errorf("the created file's content did not land: %q\n%s", b, r)
		}
		if got := metaOf(t, existing); got != before {
			t.Errorf("after the run, the granted file's metadata changed: %+v, was %+v\n%s", got, before, r)
		}
		if st, err := os.Stat(existing); err == nil && st.ModTime().Year() == 2001 {
			t.Errorf("the command set the granted file's time")
		}
		got := metaOf(t, created) // the caller's umask: 022 (the harness's)
		if got.mode.Perm() != 0o644 || got.xattrs != "" {
			t.Errorf("the created file is %v with xattrs %q, want 0644 and none\n%s", got.mode, got.xattrs, r)
		}
		if st, err := os.Stat(created); err == nil && st.ModTime().Year() == 2001 {
			t.Errorf("the command set the created file's time")
		}
		reported := map[string]bool{}
		for _, b := range boundaries(r) {
			if b["attempt"] == float64(2) && (b["path"] == existing || b["path"] == created) {
				reported[fmt.Sprint(b["operation"])] = true
				if b["decision"] != "deny" {
					t.Errorf("a metadata change on a granted file was decided %v: %v", b["decision"], b)
				}
			}
		}
		for _, op := range []string{"chmod", "utime", "xattr"} {
			if !reported[op] {
				t.Errorf("the %s attempt on a granted file was not reported as a boundary (reported: %v)\n%s", op, reported, r)
			}
		}
	})
}
