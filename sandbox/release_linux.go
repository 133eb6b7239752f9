package sandbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Releases are the runs of one process (a daemon's) whose kernel
// objects are still being released after Run returned: the helper's exit
// with its namespaces' teardown (the caches' overlays unmounted), the
// cache layers' locks, the cgroup, the granted objects' descriptors, the
// copies. Run hands a run over only once everything its caller can
// observe is final (deferRelease says when); a later run that needs a
// cache layer one of them still holds waits for its release (lockLayer),
// and Close waits for them all.
type Releases struct {
	mu sync.Mutex
	// held are the cache layers' locks the pending releases hold, each
	// with a channel closed once it is released. Guarded by mu.
	held map[fileKey]chan struct{}
	// closed: Close was called; later runs release before they return.
	// Guarded by mu.
	closed  bool
	pending sync.WaitGroup
	// wait bounds how long a run waits for a pending release's lock
	// (maxReleaseWait; a test shortens it).
	wait time.Duration
}

// maxReleaseWait is how long a run waits for a cache layer's lock that
// a pending release holds: a release takes milliseconds, and one that
// stalls (a helper that never exits) must not hang every later run of
// that cache, which then runs on an ephemeral layer, as beside another
// live run.
const maxReleaseWait = 5 * time.Second

// fileKey names a file by its device and inode.
type fileKey struct{ dev, ino uint64 }

// NewReleases returns an empty set.
func NewReleases() *Releases {
	return &Releases{held: map[fileKey]chan struct{}{}, wait: maxReleaseWait}
}

// Close waits for every pending release; the runs that end after it
// release before Run returns.
func (p *Releases) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.pending.Wait()
}

// add takes over the release of a run holding locks, unless p is closed.
func (p *Releases) add(locks []fileKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, k := range locks {
		p.held[k] = make(chan struct{})
	}
	p.pending.Add(1)
	return true
}

// later runs release in the background, unless p is nil or closed.
func (p *Releases) later(release func()) bool {
	if p == nil || !p.add(nil) {
		return false
	}
	go func() {
		defer p.pending.Done()
		release()
	}()
	return true
}

// unlock closes a cache layer's lock descriptor and, when a pending
// release held it, tells the run that waits for it. Under mu, so that a
// run that finds the lock taken and no pending release holding it knows
// another live run holds it (waitLock).
func (p *Releases) unlock(k fileKey, fd int) {
	if p == nil {
		unix.Close(fd)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	unix.Close(fd)
	if c, ok := p.held[k]; ok {
		delete(p.held, k)
		close(c)
	}
}

// lock takes the cache layer's lock open at fd, waiting while a pending
// release holds it (the layer is then this process's to use, not
// another run's); EWOULDBLOCK means another run holds it, or a release
// did not let it go within p.wait. waited says whether it waited for a
// release.
func (p *Releases) lock(fd int, k fileKey) (waited bool, err error) {
	take := func() error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) }
	var deadline <-chan time.Time
	for {
		err := take()
		if p == nil || !errors.Is(err, unix.EWOULDBLOCK) {
			return waited, err
		}
		p.mu.Lock()
		c, ok := p.held[k]
		if !ok {
			// No pending release holds it, and none can let it go
			// meanwhile (unlock takes mu): another run's, unless the
			// last release let it go since the first try.
			err = take()
			p.mu.Unlock()
			return waited, err
		}
		p.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(p.wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-c:
			waited = true
		case <-deadline:
			return true, unix.EWOULDBLOCK
		}
	}
}

// keyOf names the file open at fd.
func keyOf(fd int) (fileKey, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileKey{}, err
	}
	return fileKey{dev: st.Dev, ino: st.Ino}, nil
}

// release runs the undo steps, or hands them to Spec.Releases when the
// run's command is known to be over (deferRelease); either way the
// helper's launch is then marked used, for the pool to refill.
func (r *run) release() {
	if !r.deferRelease() {
		r.cleanup()
	}
	if r.h != nil {
		// The next run of this launch finds a helper ready (started
		// when the pool's owner calls Refill).
		r.spec.Ready.used(r.h.launch)
	}
}

// deferRelease hands the run's undo steps to Spec.Releases, to run after
// Run has returned, when nothing the caller can observe depends on them:
// the run ended normally (finish set ended: the command's status, the
// granted files written back, the denials collected, the memory watch's
// finding read), the helper is killed and runs no code of its own any
// more (helper.stopped: nothing can still write the workspace's layer or
// the caches), the run's pids group then holds no process but the
// helper's (helper.alone: every process of the command is gone, by the
// kernel's account, and none can appear, since only a member forks into
// it, and the helper no longer can), the
// attempt's proxy has stopped (no decision is asked for after Run) and
// the audit detector's share is given back (kernel audit is on only
// while commands run). It reports false, and the caller releases now,
// otherwise.
func (r *run) deferRelease() bool {
	p := r.spec.Releases
	if p == nil || !r.ended || r.h == nil || r.h.group == nil {
		return false
	}
	r.h.kill()
	r.h.stopped()
	// Read once the helper can start nothing more.
	if !r.h.alone() {
		return false
	}
	if r.h.egress != nil {
		r.h.egress.stop()
	}
	if r.det != nil {
		// Kernel audit is on only while commands run: the detector's
		// share goes now (its undo step finds it gone).
		r.det.Stop()
	}
	if !p.add(r.locks) {
		return false
	}
	r.mark("release deferred")
	go func() {
		defer p.pending.Done()
		r.cleanup()
	}()
	return true
}

// stopped waits until the helper, killed, runs none of its own code:
// it has exited, or every thread of it is exiting (the kernel's
// PF_EXITING, set as a thread acts on SIGKILL, after its last system
// call, before it releases its files, its memory and its namespaces,
// which is what its exit waits for).
func (h *helper) stopped() {
	pid := h.cmd.Process.Pid
	for wait := 20 * time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		// Exited first: once it has been waited for, its pid may be
		// another process's.
		select {
		case <-h.exited:
			return
		default:
		}
		if exiting(pid) {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-h.exited:
		case <-t.C:
		}
		t.Stop()
	}
}

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h).
const pfExiting = 0x4

// exiting reports whether every thread of process pid is exiting, or
// the process is gone (read as the helper's parent, which has not yet
// waited for it: the pid is still the helper's).
func exiting(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue // that thread is gone
		}
		flags, ok := statFlags(b)
		if err != nil || !ok || flags&pfExiting == 0 {
			return false
		}
	}
	return true
}

// statFlags is the flags field of a /proc/PID/task/TID/stat line: the
// seventh after the command's name, which ends at the line's last ')'.
func statFlags(b []byte) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f[6]), 10, 64)
	return v, err == nil
}
