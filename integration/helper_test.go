package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/proctree"
)

// helperSeen is what a watch of one sandboxd process saw of the helpers
// it started.
type helperSeen struct {
	argv0 []string // each helper's argv[0]
	exes  []string // each helper's executable (/proc/PID/exe), where readable
	stats []os.FileInfo
}

// sameFile reports whether every helper seen whose executable could be
// read was the file at path, and at least one was.
func (h helperSeen) sameFile(t *testing.T, path string) bool {
	t.Helper()
	want, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range h.stats {
		if !os.SameFile(st, want) {
			return false
		}
	}
	return len(h.stats) > 0
}

// watchHelpers returns a runOpts.started that records, until sandboxd
// ends (or stop is closed), each helper process below it (its command
// line holds __sandbox-init): its argv[0] and, where this process may
// read it (root may; an unprivileged user may not read a helper that is
// not dumpable), the file it executes. The result is ready once the run
// has returned (or stop is closed).
func watchHelpers(stop <-chan struct{}) (func(p *os.Process), func() helperSeen) {
	var mu sync.Mutex
	var seen helperSeen
	done := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	started := func(p *os.Process) {
		defer close(done)
		known := map[int]bool{}
		// Until the harness has reaped sandboxd.
		for _, err := os.Stat("/proc/" + strconv.Itoa(p.Pid)); err == nil && !stopped(); _, err = os.Stat("/proc/" + strconv.Itoa(p.Pid)) {
			for _, pid := range proctree.Descendants(p.Pid) {
				proc := "/proc/" + strconv.Itoa(pid)
				cmdline, err := os.ReadFile(proc + "/cmdline")
				args := strings.Split(string(cmdline), "\x00")
				if known[pid] || err != nil || len(args) < 2 || args[1] != "__sandbox-init" {
					continue
				}
				known[pid] = true
				exe, _ := os.Readlink(proc + "/exe")
				st, statErr := os.Stat(proc + "/exe")
				mu.Lock()
				seen.argv0 = append(seen.argv0, args[0])
				if statErr == nil {
					seen.exes, seen.stats = append(seen.exes, exe), append(seen.stats, st)
				}
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return started, func() helperSeen {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// pairDir makes a directory of root's (or, unprivileged, the suite's
// user's), 0755, holding a hard link to sandbox as sandboxd and, unless
// helper is "", a copy of helper as sandboxd-helper (a copy: a test may
// change its mode or owner); it returns sandboxd's path there.
func pairDir(t *testing.T, sandboxd, helper string) string {
	t.Helper()
	dir, err := os.MkdirTemp(baseDir, "pair-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sandboxd")
	if err := os.Link(sandboxd, bin); err != nil {
		t.Fatal(err)
	}
	if helper != "" {
		copyExecutable(t, helper, filepath.Join(dir, "sandboxd-helper"))
	}
	return bin
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	// By cp, not by a descriptor of this process's: a file open for
	// writing here is inherited by whatever another test forks at that
	// moment until that child's exec, and an exec of the copy meanwhile
	// fails with ETXTBSY (seen in CI under load).
	if _, err := os.Lstat(to); err == nil {
		t.Fatalf("copy to %s: it exists", to)
	}
	if out, err := exec.Command("cp", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp %s %s: %v\n%s", from, to, err, out)
	}
	os.Chmod(to, 0o755)
}

// built builds pkg once per suite, stamped with stamp ("": unstamped),
// into a directory of its own.
var built sync.Map // key: pkg+" "+stamp → *builtBinary

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

func buildOnce(t *testing.T, pkg, stamp string) string {
	t.Helper()
	v, _ := built.LoadOrStore(pkg+" "+stamp, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		dir, err := os.MkdirTemp(baseDir, "build-")
		if err != nil {
			b.err = err
			return
		}
		os.Chmod(dir, 0o755)
		b.path = filepath.Join(dir, filepath.Base(pkg))
		b.err = buildStamped(b.path, pkg, stamp)
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", pkg, b.err)
	}
	return b.path
}

// TestLeanHelper: the built sandboxd runs its commands through the lean
// helper beside it: the helper process is that binary, and -v says so.
func TestLeanHelper(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		started, seen := watchHelpers(nil)
		r := e.sandboxdOpts(runOpts{started: started}, "run", "-v", "--", "sh", "-c", "sleep 0.5; echo ran")
		r.mustSucceed(t)
		h := seen()
		if !strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, `msg="sandbox helper" path=`+helperBinary+" separate=true") {
			t.Fatalf("the run did not say it runs the lean helper %s\n%s", helperBinary, r)
		}
		if len(h.argv0) == 0 || h.argv0[0] != "sandboxd-helper" {
			t.Fatalf("no helper process named sandboxd-helper was seen: %q", h.argv0)
		}
		if os.Geteuid() == 0 && !h.sameFile(t, helperBinary) {
			t.Fatalf("the helper process executes %q, not %s", h.exes, helperBinary)
		}
	})
}

// TestLeanHelperThroughDaemon: the daemon opens the lean helper once, at
// start, and every helper it starts for a caller (for a run, or ready for
// the next) is that binary.
func TestLeanHelperThroughDaemon(t *testing.T) {
	t.Parallel()
	d := spawnDaemon(t)
	defer d.stop(t)
	if !strings.Contains(d.log.String(), "the lean helper binary "+helperBinary) {
		t.Fatalf("the daemon does not say it runs the lean helper %s:\n%s", helperBinary, d.log.String())
	}
	forEach(t, func(t *testing.T, e *env) {
		stop := make(chan struct{})
		watch, seen := watchHelpers(stop)
		go watch(d.cmd.Process)
		r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + d.socket}}, "run", "--daemon", "--", "sh", "-c", "sleep 0.5; echo ran")
		close(stop)
		r.mustSucceed(t)
		h := seen()
		// The daemon's ready helpers (started after a run) are seen too.
		lean := len(h.argv0) > 0
		for _, a := range h.argv0 {
			lean = lean && a == "sandboxd-helper"
		}
		if !strings.Contains(r.stdout, "ran") || !lean || !h.sameFile(t, helperBinary) {
			t.Fatalf("the daemon's helpers are %q (%q), not the lean helper %s\n%s", h.argv0, h.exes, helperBinary, r)
		}
	})
}

// TestHelperOfAnotherBuild: a sandboxd-helper of another build beside
// sandboxd runs nothing: the run fails (125) saying the two do not
// belong together, the command's marker is absent, and doctor refuses.
func TestHelperOfAnotherBuild(t *testing.T) {
	t.Parallel()
	other := buildOnce(t, "../cmd/sandboxd-helper", "another-"+randHex(4))
	bin := pairDir(t, binary, other)
	forEach(t, func(t *testing.T, e *env) {
		marker := filepath.Join(e.ws, "marker")
		for _, args := range [][]string{{"run", "--", "sh", "-c", "echo ran > " + marker}, {"run", "--no-transaction", "--", "sh", "-c", "echo ran > " + marker}} {
			r := e.sandboxdOpts(runOpts{bin: bin}, args...)
			if r.code != 125 || !strings.Contains(r.stderr, "does not belong to this sandboxd") || !strings.Contains(r.stderr, "install both again from one build") {
				t.Fatalf("%v with a helper of another build: want 125 and why\n%s", args, r)
			}
			if msg, _ := r.report["error"].(string); !strings.Contains(msg, "does not belong to this sandboxd") {
				t.Fatalf("the report's error does not say why: %q", msg)
			}
			if _, err := os.Lstat(marker); !os.IsNotExist(err) {
				t.Fatalf("the command ran through a helper of another build: %s exists (%v)", marker, err)
			}
		}
		r := e.sandboxdOpts(runOpts{bin: bin}, "doctor")
		if r.code != 1 || !strings.Contains(r.stdout, "REFUSES") || !strings.Contains(r.stdout, "does not belong to this sandboxd") {
			t.Fatalf("doctor with a helper of another build: want a refusal saying why\n%s", r)
		}
	})
}

// TestHelperNotTrusted: a sandboxd-helper that someone else than root or
// sandboxd's owner could change is not used: sandboxd runs itself as the
// helper, the run works, and -v and doctor say why.
func TestHelperNotTrusted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, why string
		change    func(t *testing.T, helper string)
	}{
		{"group-writable", "may be written by its group or others", func(t *testing.T, helper string) { os.Chmod(helper, 0o775) }},
		{"owned by another user", "is owned by uid", func(t *testing.T, helper string) {
			if os.Geteuid() != 0 {
				t.Skip("giving the helper to another user needs root")
			}
			u := identities(t)[1]
			if err := os.Chown(helper, u.uid, u.gid); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := pairDir(t, binary, helperBinary)
			tc.change(t, filepath.Join(filepath.Dir(bin), "sandboxd-helper"))
			forEach(t, func(t *testing.T, e *env) {
				started, seen := watchHelpers(nil)
				r := e.sandboxdOpts(runOpts{bin: bin, started: started}, "run", "-v", "--", "sh", "-c", "sleep 0.3; echo ran")
				r.mustSucceed(t)
				h := seen()
				if !strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "separate=false") || !strings.Contains(r.stderr, tc.why) {
					t.Fatalf("want the run to work through sandboxd itself, saying %q\n%s", tc.why, r)
				}
				if len(h.argv0) == 0 || h.argv0[0] != "sandboxd" || (os.Geteuid() == 0 && !h.sameFile(t, binary)) {
					t.Fatalf("the helper process is %q (%q), not sandboxd itself", h.argv0, h.exes)
				}
				d := e.sandboxdOpts(runOpts{bin: bin}, "doctor")
				if !strings.Contains(d.stdout, "WARN helper") || !strings.Contains(d.stdout, tc.why) {
					t.Fatalf("doctor does not warn of the helper it does not use\n%s", d)
				}
			})
		})
	}
}

// TestUnstampedUsesItself: a sandboxd built without a stamp (go build)
// never runs a separate helper, even a stamped one beside it.
func TestUnstampedUsesItself(t *testing.T) {
	t.Parallel()
	plain := buildOnce(t, "../cmd/sandboxd", "")
	bin := pairDir(t, plain, helperBinary)
	forEach(t, func(t *testing.T, e *env) {
		started, seen := watchHelpers(nil)
		r := e.sandboxdOpts(runOpts{bin: bin, started: started}, "run", "-v", "--", "sh", "-c", "sleep 0.3; echo ran")
		r.mustSucceed(t)
		h := seen()
		if !strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "separate=false") || !strings.Contains(r.stderr, "unstamped build") {
			t.Fatalf("want an unstamped sandboxd to run itself as the helper, saying so\n%s", r)
		}
		if len(h.argv0) == 0 || h.argv0[0] != "sandboxd" || (os.Geteuid() == 0 && !h.sameFile(t, plain)) {
			t.Fatalf("the helper process is %q (%q), not the unstamped sandboxd", h.argv0, h.exes)
		}
		d := e.sandboxdOpts(runOpts{bin: bin}, "doctor")
		if !strings.Contains(d.stdout, "ok   helper") || !strings.Contains(d.stdout, "sandboxd itself") {
			t.Fatalf("doctor does not say sandboxd runs itself\n%s", d)
		}
	})
}
