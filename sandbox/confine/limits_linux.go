package confine

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// setRlimits bounds what the command may use where no cgroup does, and
// takes away core dumps.
func setRlimits(s *wire.SetupMsg) error {
	set := func(res int, v uint64, what string) error {
		lim := unix.Rlimit{Cur: v, Max: v}
		var old unix.Rlimit
		if err := unix.Getrlimit(res, &old); err == nil && old.Max < v {
			lim = unix.Rlimit{Cur: old.Max, Max: old.Max}
		}
		if err := unix.Setrlimit(res, &lim); err != nil {
			return fmt.Errorf("rlimit %s: %w", what, err)
		}
		return nil
	}
	if err := set(unix.RLIMIT_CORE, 0, "core"); err != nil {
		return err
	}
	if s.Limits.FileSize > 0 {
		if err := set(unix.RLIMIT_FSIZE, uint64(s.Limits.FileSize), "fsize"); err != nil {
			return err
		}
	}
	// A pid namespace's processes all count against one uid in a fresh
	// user namespace, so RLIMIT_NPROC is a second bound even with a pids
	// cgroup; without one it is the only bound (uid 0 in the initial user
	// namespace ignores it, but the command never runs as that).
	if s.Limits.Pids > 0 {
		n := helperThreads
		if s.LimitData && s.Limits.Memory > 0 {
			// Each thread's stack counts against RLIMIT_DATA, which
			// applies to the helper too: never spend the heap's room.
			n = min(n, threadsWithin(uint64(s.Limits.Memory)))
		}
		reserveThreads(n)
		// With a pids cgroup the cgroup refuses a fork at the limit (and
		// counts it in pids.events, which names the limit); the rlimit,
		// checked first by the kernel, is then twice as loose, a bound
		// should the cgroup fail.
		nproc := uint64(s.Limits.Pids)
		if s.PidsCgroup {
			nproc *= 2
		}
		if err := set(unix.RLIMIT_NPROC, nproc, "nproc"); err != nil {
			return err
		}
	}
	if s.LimitData && s.Limits.Memory > 0 {
		if err := set(unix.RLIMIT_DATA, uint64(s.Limits.Memory), "data"); err != nil {
			return err
		}
	}
	return nil
}

// helperThreads is how many OS threads the helper keeps for itself
// before the process limit applies: it runs with about 9 (the locked
// main thread in wait4, the control socket, signals, the runtime's own).
const helperThreads = 16

// threadsWithin is how many more threads fit in half of what a data
// limit of limit bytes leaves the helper (its VmData now, each new
// thread's stack as large as RLIMIT_STACK says, glibc's default): none
// when that cannot be read.
func threadsWithin(limit uint64) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	var used uint64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmData:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			used = kb << 10
		}
	}
	var st unix.Rlimit
	stack := uint64(8 << 20)
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &st); err == nil && st.Cur != unix.RLIM_INFINITY && st.Cur > 0 {
		stack = st.Cur
	}
	if used == 0 || used >= limit {
		return 0
	}
	return int((limit - used) / 2 / (stack + 1<<20))
}

// reserveThreads makes the Go runtime hold at least n OS threads, idle
// and reused, before RLIMIT_NPROC applies. The limit counts the helper's
// threads with the command's processes (one uid), so once a fork bomb
// has taken the rest the helper could not create a thread, and the
// runtime aborts when pthread_create fails (seen in CI: exit 125 under a
// bash fork bomb, as the unprivileged user without a pids cgroup). A
// goroutine locked to its thread makes the runtime start one for it;
// unlocked before it ends, the thread goes back to the idle list, which
// the runtime never shrinks.
func reserveThreads(n int) {
	var ready, release sync.WaitGroup
	release.Add(1)
	for range n {
		ready.Add(1)
		go func() {
			runtime.LockOSThread()
			ready.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	ready.Wait()
	release.Done()
}

// limitsSeen names the limits the command ran into, as far as the helper
// can tell once it has ended: a private tmpfs with no block or inode
// left (its writes failed with ENOSPC), and a process killed by SIGXFSZ
// (the command itself, by its status, or one the helper reaped; a
// shell's child shows as the shell's status 128+SIGXFSZ).
func limitsSeen(s *wire.SetupMsg, status unix.WaitStatus, xfsz bool) []string {
	var out []string
	if s.Namespaces {
		for _, m := range []struct{ path, name string }{{"/tmp", "tmp"}, {"/dev/shm", "shm"}} {
			var st unix.Statfs_t
			if unix.Statfs(m.path, &st) == nil && (st.Bavail == 0 || (st.Files > 0 && st.Ffree == 0)) {
				out = append(out, m.name)
			}
		}
	}
	if s.Limits.FileSize > 0 && (xfsz || (status.Signaled() && status.Signal() == unix.SIGXFSZ) ||
		(status.Exited() && status.ExitStatus() == 128+int(unix.SIGXFSZ))) {
		out = append(out, "file_size")
	}
	return out
}

// openOOMScore opens this process's oom_score_adj for writing (-1 when
// it cannot).
func openOOMScore() int {
	fd, err := unix.Open("/proc/self/oom_score_adj", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// setOOMScore writes v to the oom_score_adj open as fd (best effort).
func setOOMScore(fd, v int) {
	if fd >= 0 {
		unix.Pwrite(fd, []byte(strconv.Itoa(v)), 0)
	}
}
