package confine

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// setRlimits bounds what the command may use where no cgroup does, and
// takes away core dumps.
func setRlimits(s *wire.SetupMsg) error {
	if err := set(unix.RLIMIT_CORE, 0, "core"); err != nil {
		return err
	}
	limitData := s.LimitData && s.Limits.Memory > 0
	if limitData {
		// The data limit binds the helper as well as the command, and
		// the helper (the Go runtime in a large binary: over 130 MiB of
		// VmData) is past a small one before it is set: the limit only
		// stops growth, so the helper takes the heap and the threads it
		// will need first. The command's room is its own (a process's
		// limit is on its own data).
		reserveHeap(helperHeap)
	}
	if s.Limits.Pids > 0 || limitData {
		reserveThreads(helperThreads)
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
	return nil
}

// setDataLimit bounds the command's data (RLIMIT_DATA) where no memory
// cgroup does. It binds the helper as well, so it is set last, just
// before the command starts, once the helper has taken what it needs
// (setRlimits).
func setDataLimit(s *wire.SetupMsg) error {
	if !s.LimitData || s.Limits.Memory <= 0 {
		return nil
	}
	return set(unix.RLIMIT_DATA, uint64(s.Limits.Memory), "data")
}

// set lowers a limit to v (or to its hard limit, when that is lower).
func set(res int, v uint64, what string) error {
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

// helperHeap is the heap the helper maps for itself before the data
// limit applies to it as well as to the command.
const helperHeap = 16 << 20

// reserveHeap grows the helper's heap by n bytes and frees them again.
// Under RLIMIT_DATA the runtime can take no new memory from the kernel
// (a heap that grows maps more, and a helper near a small limit died
// with "out of memory allocating heap arena metadata"); memory it has
// freed stays mapped, and the helper's later allocations reuse it. The
// pages are never touched here, so this costs no more than the mapping.
func reserveHeap(n int) {
	b := make([]byte, n)
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
}

// helperThreads is how many OS threads the helper keeps for itself
// before the process limit applies: it runs with about 9 (the locked
// main thread in wait4, the control socket, signals, the runtime's own).
const helperThreads = 16

// reserveThreads makes the Go runtime hold at least n OS threads, idle
// and reused, before RLIMIT_NPROC and RLIMIT_DATA apply (a thread's
// stack is data too). The limit counts the helper's
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
