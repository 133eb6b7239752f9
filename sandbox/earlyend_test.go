package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
	"golang.org/x/sys/unix"
)

// TestCacheLayerLockOutlivesItsOverlay: a cache layer's lock keeps its
// upper and work directories to one overlay at a time (the next helper
// even clears the volatile mark in the work directory, trusting it). A
// run may end before its helper has exited (the run's group holds the
// helper alone), and the lock must still be held until the helper's
// overlay is gone: the moment the lock is released, an overlay of the
// same directories with index=on, which the kernel refuses (EBUSY) while
// another overlay uses them, must mount.
func TestCacheLayerLockOutlivesItsOverlay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups, mounts")
	}
	e := newLeakEnv(t)
	host, dir := e.hostGoCache(t, "f")
	layer := filepath.Join(e.state, "cache", ".layers", "go")
	probe := [3]string{host, filepath.Join(layer, "upper"), filepath.Join(layer, "work")}
	// Every other round as a daemon runs it: the lock released after
	// Run has returned (Spec.Releases; Close waits for it).
	var rel *sandbox.Releases
	run := func(argv ...string) sandbox.Result {
		spec := e.spec(argv...)
		spec.Transaction = false
		spec.NoDetect = true
		spec.Releases = rel
		spec.CacheLayers = []sandbox.CacheLayer{{Name: "go", Dir: dir, Host: host}}
		res, err := sandbox.Run(context.Background(), spec, slog.New(slog.DiscardHandler))
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("err %v, exit %d", err, res.ExitCode)
		}
		if len(res.Caches) != 1 || res.Caches[0].Lower != host || res.Caches[0].Discarded {
			t.Skipf("no overlay on the cache here: %+v", res.Caches)
		}
		return res
	}
	run("true") // lays the layer out: its lock file exists from now on
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(layer, "lock"), &st); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 6; round++ {
		rel = nil
		if round%2 == 1 {
			rel = sandbox.NewReleases()
		}
		stop, released := make(chan struct{}), make(chan error, 1)
		go func() { released <- atRelease(st.Ino, stop, probe) }()
		run("true")
		rel.Close()
		close(stop)
		err := <-released
		if err := probeOverlay(probe); err != nil {
			t.Fatalf("round %d: the layer's overlay cannot be mounted after the run either: %v", round, err)
		}
		if errors.Is(err, unix.EBUSY) {
			t.Fatalf("round %d: the layer's lock was released while the run's overlay still used it: %v", round, err)
		}
	}
}

// atRelease waits for a lock on inode ino to be taken and released, and
// then mounts the probe overlay (probeOverlay); nil when stop comes
// first.
func atRelease(ino uint64, stop <-chan struct{}, probe [3]string) error {
	held := false
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		now := lockHeld(ino)
		if held && !now {
			return probeOverlay(probe)
		}
		held = held || now
	}
}

// lockHeld reports whether /proc/locks lists a lock on inode ino.
func lockHeld(ino uint64) bool {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	suffix := fmt.Sprintf(":%d", ino)
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasSuffix(f, suffix) && strings.Count(f, ":") == 2 {
				return true
			}
		}
	}
	return false
}

// probeOverlay makes (detached) and drops an overlay of d (lower,
// upper, work) with index=on, which the kernel refuses with EBUSY while
// another overlay uses the upper or the work directory.
func probeOverlay(d [3]string) error {
	// The mark a volatile overlay leaves, cleared as the next run's
	// helper clears it.
	os.Remove(filepath.Join(d[2], "work", "incompat", "volatile", "dirty"))
	os.Remove(filepath.Join(d[2], "work", "incompat", "volatile"))
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"lowerdir", d[0]}, {"upperdir", d[1]}, {"workdir", d[2]},
		{"index", "on"}, {"redirect_dir", "nofollow"}, {"metacopy", "off"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return fmt.Errorf("overlay %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	return unix.Close(m)
}

// TestNothingWritesAfterTheRun: whatever the command leaves running
// (ignoring every catchable signal, in a session of its own, in a nested
// user and pid namespace, a thread that outlives its process's main
// thread) writes nothing to the workspace once Run has returned, now
// that a run may end before its helper has exited.
func TestNothingWritesAfterTheRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	const started = `
i=0; while [ ! -s out ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; [ -s out ]`
	for _, tc := range []struct{ name, script string }{
		{"ignores signals", `(trap '' TERM HUP INT QUIT USR1 USR2; while :; do echo x >> out; done) &` + started},
		{"own session", `setsid sh -c '(while :; do echo x >> out; done) &' < /dev/null` + started},
		{"nested namespaces", "unshare -Urpf true || exit 3\n" + `unshare -Urpf sh -c 'while :; do echo x >> out; done' &` + started},
		{"thread outlives main", `python3 -c 'import threading, ctypes
def w():
    while True:
        with open("out", "a") as f: f.write("x\n")
threading.Thread(target=w).start()
ctypes.CDLL(None).syscall(60, 0)' &` + started},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nothingWritesAfter(t, tc.script, nil)
		})
		// As a daemon runs it: released after Run has returned.
		t.Run(tc.name+", released after Run", func(t *testing.T) {
			rel := sandbox.NewReleases()
			defer rel.Close()
			nothingWritesAfter(t, tc.script, rel)
		})
	}
}

// nothingWritesAfter runs script, which starts a writer to the file out
// that outlives it, and checks that out no longer grows once Run has
// returned.
func nothingWritesAfter(t *testing.T, script string, rel *sandbox.Releases) {
	e := newLeakEnv(t)
	spec := e.spec("sh", "-c", script)
	spec.Releases = rel
	spec.Transaction = false
	var stderr strings.Builder
	spec.Stderr = &stderr
	var logs strings.Builder
	res, err := sandbox.Run(context.Background(), spec, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Skipf("the writer did not start here (exit %d): %s", res.ExitCode, stderr.String())
	}
	t.Logf("%s; ended before the helper: %v", res.Containment, strings.Contains(logs.String(), "the helper is exiting"))
	out := filepath.Join(e.ws, "out")
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if after, _ := os.ReadFile(out); len(after) != len(before) {
		t.Errorf("the workspace was written after Run returned: %d bytes, then %d", len(before), len(after))
	}
}

// TestEveryByteDelivered: a run that ends before its helper has exited
// still delivers everything the command and its children wrote to
// stdout and stderr, and takes its stdin from a socket whose peer never
// closes it (the copy is cut short once the command has ended).
func TestEveryByteDelivered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	e := newLeakEnv(t)
	for i := 0; i < 10; i++ {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		peer, in := os.NewFile(uintptr(pair[0]), "peer"), os.NewFile(uintptr(pair[1]), "stdin")
		peer.Write([]byte("hello\n"))
		spec := e.spec("sh", "-c", `head -n1; head -c 3000000 /dev/zero; (head -c 2000000 /dev/zero >&2; head -c 1000000 /dev/zero) & wait`)
		spec.Transaction = false
		var stdout, stderr strings.Builder
		spec.Stdin, spec.Stdout, spec.Stderr = in, &stdout, &stderr
		done := make(chan struct{})
		var res sandbox.Result
		go func() {
			defer close(done)
			res, err = sandbox.Run(context.Background(), spec, slog.New(slog.DiscardHandler))
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return: the stdin socket's copy was never cut short")
		}
		peer.Close()
		in.Close()
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("err %v, exit %d", err, res.ExitCode)
		}
		if !strings.HasPrefix(stdout.String(), "hello\n") || stdout.Len() != 6+4000000 || stderr.Len() != 2000000 {
			t.Fatalf("run %d: stdout %d bytes (%q...), stderr %d bytes", i, stdout.Len(), stdout.String()[:min(6, stdout.Len())], stderr.Len())
		}
	}
}
