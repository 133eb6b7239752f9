package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDaemonCacheBackToBack: runs of one workspace back to back through
// one daemon, which sends each report before the run's helper has
// exited and releases the cache layer's lock after it: the next run
// waits for that release instead of finding the layer taken, so it uses
// the layer (its writes are not discarded), sees the run before's write,
// and keeps its own.
func TestDaemonCacheBackToBack(t *testing.T) {
	socket, dlog := startDaemonLog(t)
	vars := []string{"SANDBOXD_SOCKET=" + socket}
	forEach(t, func(t *testing.T, e *env) {
		host := filepath.Join(e.home, ".cache", "pip")
		e.writeFile(filepath.Join(host, "host.txt"), "from host\n", 0o644)
		const runs = 4
		for i := 0; i < runs; i++ {
			script := fmt.Sprintf(`cat "$PIP_CACHE_DIR/host.txt" && echo %d > "$PIP_CACHE_DIR/run-%d.txt"`, i, i)
			want := "from host\n"
			if i > 0 {
				script += fmt.Sprintf(` && cat "$PIP_CACHE_DIR/run-%d.txt"`, i-1)
				want += fmt.Sprintf("%d\n", i-1)
			}
			r := e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "-c", script).mustSucceed(t)
			wantLower(t, r, "pip", host)
			if c := cacheOf(t, r, "pip"); c["writes_discarded"] == true {
				t.Fatalf("run %d found the layer taken (by the run before's pending release): %v\n%s", i, c, r)
			}
			if r.stdout != want {
				t.Fatalf("run %d read %q from the cache, want %q\n%s", i, r.stdout, want, r)
			}
		}
		upper := filepath.Join(e.privateCache(), ".layers", "pip", "upper")
		for i := 0; i < runs; i++ {
			if b, err := os.ReadFile(filepath.Join(upper, fmt.Sprintf("run-%d.txt", i))); err != nil || string(b) != fmt.Sprintf("%d\n", i) {
				t.Errorf("the cache's layer lost run %d's write: %q, %v", i, b, err)
			}
		}
	})
	t.Logf("runs that waited for the run before's release: %d", strings.Count(dlog.String(), "waited for a previous run's release"))
}

// TestDaemonStragglersGoneBeforeTheReport: what a command leaves running
// (in the background, in a session of its own, behind a double fork) is
// dead before the daemon sends the report, though the run's helper may
// still be exiting: a marker each would write after the report never
// appears.
func TestDaemonStragglersGoneBeforeTheReport(t *testing.T) {
	socket, dlog := startDaemonLog(t)
	vars := []string{"SANDBOXD_SOCKET=" + socket}
	forEach(t, func(t *testing.T, e *env) {
		out := e.ws
		script := fmt.Sprintf(`(sleep 0.5; touch %[1]s/bg) &
setsid sh -c 'sleep 0.5; touch %[1]s/sid' </dev/null >/dev/null 2>&1 &
sh -c '(sleep 0.5; touch %[1]s/double) &' &
echo started`, out)
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--no-transaction", "-c", script).mustSucceed(t)
		if r.stdout != "started\n" {
			t.Fatalf("unexpected output\n%s", r)
		}
		time.Sleep(time.Second)
		for _, m := range []string{"bg", "sid", "double"} {
			if _, err := os.Lstat(filepath.Join(out, m)); err == nil {
				t.Fatalf("a process of the command wrote %s after the report\n%s", m, r)
			}
		}
	})
	if !strings.Contains(dlog.String(), "release deferred") {
		t.Logf("no run's release was deferred (no pids cgroup here?)")
	}
}

// TestDaemonStopWithReleasesPending: a daemon told to stop (SIGTERM)
// right after it sent reports whose runs' releases may still be under
// way waits for them: once it has exited, no group it made is left in
// any cgroup hierarchy, no process is left in one, and no process of
// the machine still has a mount of the runs' cache layers.
func TestDaemonStopWithReleasesPending(t *testing.T) {
	d := spawnDaemon(t)
	vars := []string{"SANDBOXD_SOCKET=" + d.socket}
	var layers []string
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.home, ".cache", "pip", "host.txt"), "from host\n", 0o644)
		script := `sleep 1000 & echo x > "$PIP_CACHE_DIR/run.txt"; echo started`
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "-c", script).mustSucceed(t)
		if r.stdout != "started\n" {
			t.Fatalf("unexpected output\n%s", r)
		}
		layers = append(layers, filepath.Join(e.privateCache(), ".layers"))
	})
	d.stop(t)
	if !strings.Contains(d.log.String(), "release deferred") {
		t.Logf("no run's release was deferred (no pids cgroup here?)")
	}
	prefix := fmt.Sprintf("-%d-", d.cmd.Process.Pid)
	for _, root := range []string{"/sys/fs/cgroup"} {
		filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
			if err != nil || !de.IsDir() {
				return nil
			}
			if n := de.Name(); strings.HasPrefix(n, "sandboxd-") && strings.Contains(n, prefix) {
				procs, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				t.Errorf("the stopped daemon left its run's group %s (processes: %q)", p, procs)
			}
			return nil
		})
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, m := range procs {
		b, _ := os.ReadFile(m)
		for _, l := range layers {
			if strings.Contains(string(b), l) {
				t.Errorf("%s still has a mount of %s after the daemon stopped", m, l)
			}
		}
	}
}
