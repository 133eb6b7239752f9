package sandbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// stragglerScript leaves behind, each writing into the workspace and
// the cache for as long as it lives: a process whose main thread has
// exited while another thread lives on (listed in the group by its
// zombie leader only), a stopped process that a sibling continues
// later, a traced one, and writers through a shared mapping and through
// a descriptor open for appending.
const stragglerScript = `ws=$PWD
thread='import threading, time, ctypes
def w():
    time.sleep(0.4); open("thread", "w").write("x")
threading.Thread(target=w).start()
open("started-thread", "w").close()
ctypes.CDLL(None).pthread_exit(None)'
mapper='import mmap, os, sys, time
f = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); os.ftruncate(f, 4096)
m = mmap.mmap(f, 4096); i = 0
while True:
    i += 1; m[0:16] = b"%016d" % i; time.sleep(0.002)'
python3 -c "$thread" &
sh -c 'kill -STOP $$; touch stopped' &
s=$!
(sleep 0.3; kill -CONT $s) &
strace -f -o /dev/null sh -c 'sleep 0.4; touch traced' >/dev/null 2>&1 &
for d in "$ws" "$CACHE"; do
	python3 -c "$mapper" "$d/mapped" &
	(exec 3>>"$d/appended"; while :; do echo x >&3; sleep 0.005; done) &
done
# Every writer has begun (python starts slowly on a loaded machine).
for f in "$ws/started-thread" "$ws/mapped" "$ws/appended" "$CACHE/mapped" "$CACHE/appended"; do
	until [ -e "$f" ]; do sleep 0.01; done
done
echo started`

// TestStragglersOfEveryKindStopWriting: with Spec.Releases, what the
// command leaves running (a thread outliving its process's main thread,
// a stopped or traced process, a writer through a shared mapping or an
// open descriptor, in the workspace and in a cache) writes nothing after
// Run has returned: the files are as Run left them, before the release
// and after it, and no marker appears.
func TestStragglersOfEveryKindStopWriting(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	for who, caller := range releaseCallers(t) {
		t.Run(who, func(t *testing.T) {
			e, uid := caller(t)
			cache := filepath.Join(e.state, "cache")
			os.MkdirAll(cache, 0o755)
			os.Lchown(cache, uid, uid)
			deferred := false
			for try := 0; try < 5 && !deferred; try++ {
				rel := sandbox.NewReleases()
				var logs, stdout, stderr bytes.Buffer
				spec := e.spec("sh", "-c", stragglerScript)
				spec.Env = append(spec.Env, "CACHE="+cache)
				spec.UID, spec.GID, spec.Releases, spec.Transaction = uid, uid, rel, false
				spec.Stdout, spec.Stderr = &stdout, &stderr
				res, err := sandbox.Run(context.Background(), spec, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
				if err != nil || res.ExitCode != 0 || stdout.String() != "started\n" {
					t.Fatalf("err %v, exit %d, stdout %q, stderr %q", err, res.ExitCode, stdout.String(), stderr.String())
				}
				if !strings.HasPrefix(res.Containment, "pids cgroup") {
					t.Skipf("no pids cgroup here (%s): the release is never deferred", res.Containment)
				}
				deferred = strings.Contains(logs.String(), "release deferred")
				at := snapshot(t, e.ws, cache)
				time.Sleep(600 * time.Millisecond)
				checkStill(t, at, e.ws, cache, "before the release ended")
				rel.Close()
				checkStill(t, at, e.ws, cache, "after the release")
				for _, d := range []string{e.ws, cache} {
					os.Remove(filepath.Join(d, "mapped"))
					os.Remove(filepath.Join(d, "appended"))
				}
				os.Remove(filepath.Join(e.ws, "started-thread"))
			}
			if !deferred {
				t.Error("five runs released before Run returned")
			}
		})
	}
}

// snapshot reads the writers' files as Run left them.
func snapshot(t *testing.T, ws, cache string) map[string]string {
	t.Helper()
	at := map[string]string{}
	for _, d := range []string{ws, cache} {
		for _, f := range []string{"mapped", "appended"} {
			b, err := os.ReadFile(filepath.Join(d, f))
			if err != nil {
				t.Fatalf("the command's writer left no %s: %v", f, err)
			}
			at[filepath.Join(d, f)] = string(b)
		}
	}
	return at
}

func checkStill(t *testing.T, at map[string]string, ws, cache, when string) {
	t.Helper()
	for p, was := range at {
		if b, _ := os.ReadFile(p); string(b) != was {
			t.Errorf("a process of the command wrote %s after Run returned (%s)", p, when)
		}
	}
	for _, m := range []string{"thread", "stopped", "traced"} {
		if _, err := os.Lstat(filepath.Join(ws, m)); err == nil {
			t.Errorf("a process of the command wrote %s after Run returned (%s)", m, when)
		}
	}
}
