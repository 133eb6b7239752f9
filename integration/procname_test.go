package integration

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessNames: the front executes sandboxd-run and the core through
// a descriptor of each (/proc/self/fd/N), which the kernel names the
// process after ("6"); each takes its argv[0]'s name back, so ps, top
// and pgrep show sandboxd: an embedded run once its helper is started,
// as root and as the user, and a daemon once it listens.
func TestProcessNames(t *testing.T) {
	want := filepath.Base(frontBinary)
	if len(want) > 15 {
		want = want[:15]
	}
	forEach(t, func(t *testing.T, e *env) {
		seen := make(chan string, 1)
		e.sandboxdOpts(runOpts{started: func(p *os.Process) { seen <- nameOnceHelping(p.Pid) }}, "run", "--", "sleep", "1")
		if got := <-seen; got != want {
			t.Fatalf("an embedded run's process is named %q, want %q", got, want)
		}
	})
	t.Run("daemon", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("sandboxd serve runs as root")
		}
		// Not in /tmp: the daemon trusts no directory another user may
		// write.
		dir, err := os.MkdirTemp(baseDir, "daemon-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		t.Cleanup(func() { removeAll(dir) })
		socket := filepath.Join(dir, "s.sock")
		cmd := exec.Command(frontBinary, "serve", "--socket", socket, "--audit-dir", filepath.Join(dir, "audit"), "--audit-key", filepath.Join(dir, "audit.key"))
		cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("unix", socket); err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the daemon never listened\n%s", stderr.String())
			}
		}
		if got := procComm(cmd.Process.Pid); got != want {
			t.Fatalf("the daemon is named %q, want %q", got, want)
		}
	})
}

// nameOnceHelping waits until process pid runs sandboxd-run and has a
// child (its helper: the name is taken before the helper starts), and
// returns its name then ("" if that never came within 10 s).
func nameOnceHelping(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		exe, _ := os.Readlink(dir + "/exe")
		if filepath.Base(exe) == filepath.Base(runBinary) && hasChild(pid) {
			return procComm(pid)
		}
	}
	return ""
}

// hasChild says whether process pid has started a child, from any of
// its threads.
func hasChild(pid int) bool {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if len(strings.TrimSpace(string(b))) > 0 {
			return true
		}
	}
	return false
}

// procComm is process pid's name.
func procComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}
