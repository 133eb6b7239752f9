package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/internal/proctree"
	"github.com/sandboxd/sandboxd/session"
)

// daemonHolds is what a daemon holds at one moment: what must come back
// to where it was once its work is done.
type daemonHolds struct {
	goroutines, execs, held int
	fds, children           int
	cgroups                 int // groups below the daemon's own
	mounts, hostMounts      int
}

func (h daemonHolds) String() string {
	return fmt.Sprintf("goroutines %d, execs %d, held retries %d, fds %d, child processes %d, cgroups %d, mounts %d (host %d)",
		h.goroutines, h.execs, h.held, h.fds, h.children, h.cgroups, h.mounts, h.hostMounts)
}

// holdsOf reads what the daemon pid holds: its own counts from the health
// endpoint (root is told them), the rest from the kernel.
func holdsOf(t *testing.T, c *daemon.Client, pid int, group string) daemonHolds {
	t.Helper()
	var h struct {
		Goroutines int `json:"goroutines"`
		Execs      int `json:"execs"`
		Held       int `json:"held_retries"`
	}
	if err := c.Do(context.Background(), "GET", "/v1/health", nil, &h); err != nil {
		t.Fatalf("health: %v", err)
	}
	out := daemonHolds{goroutines: h.Goroutines, execs: h.Execs, held: h.Held}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	out.fds = len(fds)
	out.children = len(proctree.Descendants(pid))
	if group != "" {
		filepath.WalkDir(group, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && p != group {
				out.cgroups++
			}
			return nil
		})
	}
	mi, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	out.mounts = strings.Count(string(mi), "\n")
	hi, _ := os.ReadFile("/proc/self/mountinfo")
	out.hostMounts = strings.Count(string(hi), "\n")
	return out
}

// ownPidsGroup moves pid into a pids cgroup of the test's own (cgroup v1),
// so the groups its runs make are counted apart from other tests'; ""
// when there is no such hierarchy here.
func ownPidsGroup(t *testing.T, pid int) string {
	t.Helper()
	base := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
		t.Logf("no cgroup v1 pids hierarchy at %s: cgroups are not counted", base)
		return ""
	}
	dir, err := os.MkdirTemp(base, "sandboxd-it-load-")
	if err != nil {
		t.Logf("cannot make a pids group (%v): cgroups are not counted", err)
		return ""
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		os.Remove(dir)
		t.Logf("cannot move the daemon into %s (%v): cgroups are not counted", dir, err)
		return ""
	}
	t.Cleanup(func() {
		// The daemon has exited by now (cleanups run last-in first-out).
		for deadline := time.Now().Add(5 * time.Second); os.Remove(dir) != nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	})
	return dir
}

// After 200 commands at once and 1000 reviews through the API, the daemon
// holds what it held before: no goroutine, descriptor, process, cgroup or
// mount of that work is left.
func TestDaemonLeaksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 200 sandboxes at once")
	}
	// One helper started in advance at most: the pool is then full (one
	// helper waiting) both before and after the work, and anything more
	// is a leak; with the default, how full the bounded pool is after a
	// burst depends on timing.
	td := spawnDaemon(t, "--max-execs", "256", "--ready-helpers", "1")
	t.Cleanup(func() {
		td.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-td.exited:
		case <-time.After(15 * time.Second):
			td.cmd.Process.Kill()
		}
	})
	group := ownPidsGroup(t, td.cmd.Process.Pid)
	e := newEnv(t, identities(t)[0])
	ctx := context.Background()
	c, err := daemon.Connect(ctx, td.socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	dctx := daemon.Context{Env: []string{"HOME=" + e.home, "PATH=/usr/bin:/bin"}, Cwd: e.ws, Umask: 0o22, Session: "load"}
	exec := func(i int) error {
		var rep string
		err := c.Exec(ctx, daemon.ExecRequest{Argv: []string{"bash", "-c", fmt.Sprintf("echo %d > f%d; cat f%d; cat ~/.ssh/id_rsa 2>/dev/null; true", i, i, i)},
			Context: dctx, Retries: 1}, nil, func(l daemon.ExecLine) {
			var r *session.Report
			json.Unmarshal(l.Report, &r)
			if l.Type == "report" && r != nil {
				// Under load each run still sees its one boundary, the
				// secret it read, and loses no denial.
				rep = fmt.Sprintf("exit %d error %q boundaries %d", r.ExitCode, l.Error, len(r.Boundaries))
				if len(r.Boundaries) == 1 {
					rep += " " + string(r.Boundaries[0].Source)
				}
				if r.Detection != nil && r.Detection.Lost != 0 {
					rep += fmt.Sprintf(" lost %d (%s)", r.Detection.Lost, r.Detection.Why)
				}
			}
		})
		if err != nil || rep != `exit 0 error "" boundaries 1 hard-deny` {
			return fmt.Errorf("exec %d: %v %s", i, err, rep)
		}
		return nil
	}
	review := func(i int) error {
		q := []daemon.ReviewRequest{
			{Surface: "filesystem", Operation: "read_file", Path: filepath.Join(e.home, ".ssh", "id_rsa")},
			{Surface: "filesystem", Operation: "make_reg", Path: filepath.Join(e.dir, fmt.Sprintf("out%d", i)), Command: "touch x"},
			{Surface: "network", Operation: "connect", Destination: "example.org:443", Command: "curl https://example.org"},
			{Surface: "command", Operation: "run", Command: "ls"},
		}[i%4]
		q.Context = dctx
		var out daemon.ReviewAnswer
		return c.Do(ctx, "POST", "/v1/review", q, &out)
	}
	// One of each first: what a daemon starts once (its audit reader,
	// the client's connection) is not a leak.
	if err := exec(-1); err != nil {
		t.Fatal(err)
	}
	if err := review(0); err != nil {
		t.Fatal(err)
	}
	c.CloseIdle()
	time.Sleep(200 * time.Millisecond)
	before := holdsOf(t, c, td.cmd.Process.Pid, group)
	c.CloseIdle()

	var failures atomic.Int32
	var wg sync.WaitGroup
	var peak int
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		// How many processes ran below the daemon at once, seen from
		// outside.
		defer close(sampled)
		for {
			peak = max(peak, len(proctree.Descendants(td.cmd.Process.Pid)))
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := exec(i); err != nil && failures.Add(1) <= 3 {
				t.Error(err)
			}
		}()
	}
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := review(i); err != nil && failures.Add(1) <= 3 {
					t.Error(err)
				}
			}
		}()
	}
	for i := range 1000 {
		work <- i
	}
	close(work)
	wg.Wait()
	close(done)
	<-sampled
	if failures.Load() > 0 {
		t.Fatalf("%d requests failed", failures.Load())
	}
	c.CloseIdle()
	var after daemonHolds
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after = holdsOf(t, c, td.cmd.Process.Pid, group)
		c.CloseIdle()
		if after == before || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("before: %v\nafter:  %v\n(up to %d processes below the daemon at once)", before, after, peak)
	if after != before {
		t.Fatalf("the daemon holds more after the work than before\nbefore: %v\nafter:  %v\n%s", before, after, tail(td.log.String(), 4000))
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }
