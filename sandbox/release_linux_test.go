package sandbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// releaseCallers are the callers a deferred release is tested for: root
// and, when it exists, the unprivileged test user (its own workspace,
// home and state).
func releaseCallers(t *testing.T) map[string]func(t *testing.T) (leakEnv, int) {
	return map[string]func(t *testing.T) (leakEnv, int){
		"root":          func(t *testing.T) (leakEnv, int) { return newLeakEnv(t), 0 },
		"sandboxd-test": otherCaller,
	}
}

// TestStragglersGoneBeforeTheReport: with Spec.Releases, Run returns
// before the helper's exit, and what the command left running (in the
// background, in a session of its own, behind a double fork) is dead by
// then: a marker each would write after Run has returned never appears,
// neither before nor after the release.
func TestStragglersGoneBeforeTheReport(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	const script = `(sleep 0.4; touch bg) &
setsid sh -c 'sleep 0.4; touch sid' </dev/null >/dev/null 2>&1 &
sh -c '(sleep 0.4; touch double) &' &
sleep 1000 &
echo started`
	for who, caller := range releaseCallers(t) {
		t.Run(who, func(t *testing.T) {
			e, uid := caller(t)
			deferred := false
			for try := 0; try < 5 && !deferred; try++ {
				rel := sandbox.NewReleases()
				var logs, stdout bytes.Buffer
				spec := e.spec("sh", "-c", script)
				spec.UID, spec.GID, spec.Releases, spec.Transaction, spec.Stdout = uid, uid, rel, false, &stdout
				res, err := sandbox.Run(context.Background(), spec, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
				if err != nil || res.ExitCode != 0 || stdout.String() != "started\n" {
					t.Fatalf("err %v, exit %d, stdout %q", err, res.ExitCode, stdout.String())
				}
				if !strings.HasPrefix(res.Containment, "pids cgroup") {
					t.Skipf("no pids cgroup here (%s): the release is never deferred", res.Containment)
				}
				deferred = strings.Contains(logs.String(), "release deferred")
				time.Sleep(600 * time.Millisecond)
				checkNoMarkers(t, e.ws, "before the release ended")
				rel.Close()
				checkNoMarkers(t, e.ws, "after the release")
			}
			if !deferred {
				t.Error("five runs released before Run returned")
			}
		})
	}
}

func checkNoMarkers(t *testing.T, ws, when string) {
	t.Helper()
	for _, m := range []string{"bg", "sid", "double"} {
		if _, err := os.Lstat(filepath.Join(ws, m)); err == nil {
			t.Fatalf("a process of the command wrote %s after Run returned (%s)", m, when)
		}
	}
}

// TestCacheLayerBackToBack: two runs of one workspace back to back, the
// first's release still under way when the second starts (as a daemon
// runs them): the second waits for the first's lock on the cache layer
// instead of finding it taken and running without it; it sees what the
// first wrote to the cache, and both runs' writes are kept.
func TestCacheLayerBackToBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups, mounts")
	}
	for who, caller := range releaseCallers(t) {
		t.Run(who, func(t *testing.T) {
			e, uid := caller(t)
			host, dir := e.hostGoCache(t, "host")
			for _, p := range []string{filepath.Join(e.home, ".cache"), host, filepath.Join(host, "host")} {
				os.Lchown(p, uid, uid)
			}
			rel := sandbox.NewReleases()
			defer rel.Close()
			var logs bytes.Buffer
			run := func(round int, script string) string {
				t.Helper()
				var stdout, stderr bytes.Buffer
				spec := e.spec("sh", "-c", script)
				spec.UID, spec.GID, spec.Releases, spec.NoDetect = uid, uid, rel, true
				spec.Stdout, spec.Stderr = &stdout, &stderr
				spec.CacheLayers = []sandbox.CacheLayer{{Name: "go", Dir: dir, Host: host}}
				res, err := sandbox.Run(context.Background(), spec, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
				res.Layer.Close()
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("run %d: err %v, exit %d, stderr %q", round, err, res.ExitCode, stderr.String())
				}
				if len(res.Caches) != 1 || res.Caches[0].Lower != host {
					t.Skipf("no overlay on the cache here: %+v", res.Caches)
				}
				if c := res.Caches[0]; c.Discarded {
					t.Fatalf("run %d did not use the cache's layer: %+v", round, c)
				}
				return stdout.String()
			}
			for round := 0; round < 4; round++ {
				// Each run reads the last one's file and writes its own.
				script := "cat " + dir + "/host; echo " + strconv.Itoa(round) + " > " + dir + "/" + strconv.Itoa(round)
				if round > 0 {
					script += "; cat " + dir + "/" + strconv.Itoa(round-1)
				}
				want := "host\n"
				if round > 0 {
					want += strconv.Itoa(round-1) + "\n"
				}
				if out := run(round, script); out != want {
					t.Fatalf("run %d read %q from the cache, want %q", round, out, want)
				}
			}
			rel.Close()
			t.Logf("runs that waited for the last one's release: %d of 3", strings.Count(logs.String(), "waited for a previous run's release"))
			upper := filepath.Join(e.state, "cache", ".layers", "go", "upper")
			for round := 0; round < 4; round++ {
				if b, err := os.ReadFile(filepath.Join(upper, strconv.Itoa(round))); err != nil || string(b) != strconv.Itoa(round)+"\n" {
					t.Errorf("the cache's layer lost run %d's write: %q, %v", round, b, err)
				}
			}
		})
	}
}
