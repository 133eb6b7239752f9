package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// cgroup is a per-run control group bounding the number of tasks (and,
// where the memory controller is available, memory). On cgroup v1 each
// controller has its own directory; on v2 there is one.
type cgroup struct {
	dirs   []string // created directories, one per controller (v1) or one (v2)
	pids   bool
	memory bool
	v2     bool
	// pidsDir and memDir are the groups holding each controller's files
	// (the same on v2; memDir empty without a memory limit); memParent
	// is the v1 memory group it was made in (this process's).
	pidsDir, memDir, memParent string
}

// cgroupInfo describes the hierarchy this process sits in.
type cgroupInfo struct {
	V2        bool
	PidsDir   string // parent directory for a new pids (v1) or unified (v2) group
	MemoryDir string // v1 memory parent
	Reason    string // why no pids group can be made, when PidsDir is empty
}

// probeCgroups finds where a child group for this process could go.
func probeCgroups() cgroupInfo {
	own := map[string]string{} // controller -> path relative to its mount
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return cgroupInfo{Reason: "no /proc/self/cgroup"}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	f.Close()
	mounts := cgroupMounts()
	info := cgroupInfo{}
	if p, ok := own["pids"]; ok && mounts["pids"] != "" {
		info.PidsDir = filepath.Join(mounts["pids"], p)
		if p, ok := own["memory"]; ok && mounts["memory"] != "" {
			info.MemoryDir = filepath.Join(mounts["memory"], p)
		}
	} else if p, ok := own[""]; ok && mounts[""] != "" {
		dir := filepath.Join(mounts[""], p)
		ctrls, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if !strings.Contains(" "+string(ctrls)+" ", " pids ") && !strings.Contains(string(ctrls), "pids") {
			info.Reason = "the pids controller is not enabled for " + dir
			return info
		}
		info.V2 = true
		info.PidsDir = dir
	} else {
		info.Reason = "no pids controller is mounted"
		return info
	}
	if err := writable(info.PidsDir); err != nil {
		info.Reason = fmt.Sprintf("cannot create a group under %s (%s)", info.PidsDir, publicerr.Reason(err))
		info.PidsDir = ""
	}
	if info.MemoryDir != "" && writable(info.MemoryDir) != nil {
		info.MemoryDir = ""
	}
	return info
}

func writable(dir string) error {
	// access(2) with W_OK answers for the real uid, which is what mkdir checks.
	f, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !f.IsDir() {
		return errors.New("not a directory")
	}
	return syscallAccess(dir)
}

// cgroupMounts maps each v1 controller (and "" for v2) to its mount point.
func cgroupMounts() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 || len(fields) < 5 {
			continue
		}
		fstype, opts := fields[sep+1], fields[sep+3]
		mp := fields[4]
		switch fstype {
		case "cgroup2":
			if _, ok := out[""]; !ok {
				out[""] = mp
			}
		case "cgroup":
			for _, o := range strings.Split(opts, ",") {
				if o == "pids" || o == "memory" {
					out[o] = mp
				}
			}
		}
	}
	return out
}

// newCgroup creates the run's group(s) and sets the limits.
func newCgroup(info cgroupInfo, name string, lim Limits) (*cgroup, error) {
	if info.PidsDir == "" {
		return nil, publicerr.New(info.Reason)
	}
	c := &cgroup{v2: info.V2}
	mk := func(parent string) (string, error) {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		c.dirs = append(c.dirs, dir)
		return dir, nil
	}
	dir, err := mk(info.PidsDir)
	if err != nil {
		return nil, publicerr.Errorf(fmt.Errorf("cgroup: %w", err), "cannot create the run's group under %s (%s)", info.PidsDir, publicerr.Reason(err))
	}
	c.pidsDir = dir
	if lim.Pids > 0 {
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(lim.Pids, 10)), 0); err != nil {
			c.remove()
			return nil, publicerr.Errorf(fmt.Errorf("cgroup: pids.max: %w", err), "cannot set the run's group's pids.max (%s)", publicerr.Reason(err))
		}
		c.pids = true
	}
	memFile := "memory.limit_in_bytes"
	memDir := ""
	if info.V2 {
		memFile, memDir = "memory.max", dir
	} else if info.MemoryDir != "" {
		if d, err := mk(info.MemoryDir); err == nil {
			memDir, c.memParent = d, info.MemoryDir
		}
	}
	if memDir != "" && lim.Memory > 0 {
		if os.WriteFile(filepath.Join(memDir, memFile), []byte(strconv.FormatInt(lim.Memory, 10)), 0) == nil {
			c.memory, c.memDir = true, memDir
			if !info.V2 {
				// Bound swap too where the kernel accounts it.
				os.WriteFile(filepath.Join(memDir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(lim.Memory, 10)), 0)
			} else {
				os.WriteFile(filepath.Join(memDir, "memory.swap.max"), []byte("0"), 0)
				// The kernel's killer picks one task, which may be the
				// helper (tmpfs pages count for the group, not for any
				// process): the whole group goes instead.
				os.WriteFile(filepath.Join(memDir, "memory.oom.group"), []byte("1"), 0)
			}
		}
	}
	return c, nil
}

// openJoin opens each group's "tasks" file (v1) or "cgroup.threads"
// (v2) for writing, for the helper to join with its forking thread.
func (c *cgroup) openJoin() ([]int, error) {
	name := "tasks"
	if c.v2 {
		// v2 moves whole processes only; "0" in cgroup.procs is the
		// caller's process.
		name = "cgroup.procs"
	}
	var fds []int
	for _, d := range c.dirs {
		fd, err := unix.Open(filepath.Join(d, name), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range fds {
				unix.Close(f)
			}
			return nil, fmt.Errorf("cgroup: open %s: %w", d, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// removeStale removes the groups that runs killed before they could
// remove their own (sandboxd SIGKILLed, say) left beside dir: named as
// runs name theirs, empty, and either made by a process of this pid
// namespace that is gone (groupName) or older than staleAfter, so that
// a group another run has just made and not yet joined stays.
func removeStale(dir string) {
	removeStaleIn(filepath.Dir(dir), dir, 1)
}

// removeStaleIn is removeStale for the groups in parent but keep; a
// killed run's group it tries tries times to remove (a run that ends
// does not wait for another's tasks to die: the next one tries again).
func removeStaleIn(parent, keep string, tries int) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	ns := ownPidNS()
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "sandboxd-") || filepath.Join(parent, name) == keep {
			continue
		}
		p := filepath.Join(parent, name)
		if makerGone(name, ns) {
			// What is left of a run whose sandboxd is gone: its tasks
			// (dying already: the helper's parent-death signal ended
			// the pid namespace) are killed, as its sandboxd would have.
			killAndRemove(p, tries)
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleAfter {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err != nil || len(strings.TrimSpace(string(b))) > 0 {
			continue
		}
		os.Remove(p) // EBUSY if a task joined meanwhile: it stays
	}
}

// killAndRemove kills every task left in the group dir and removes it,
// trying tries times, 2 ms apart.
func killAndRemove(dir string, tries int) {
	for i := 0; i < tries; i++ {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		// cgroup.kill (v2, Linux 5.14) kills the whole group at once.
		if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) != nil {
			if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						killPid(pid)
					}
				}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// RemoveStaleGroups removes, where this process's runs make their
// groups, the empty groups runs left when their sandboxd was killed
// (removeStale): a daemon calls it when it starts, since the runs a
// killed daemon had could not remove theirs.
func RemoveStaleGroups() {
	info := probeCgroups()
	for _, parent := range []string{info.PidsDir, info.MemoryDir} {
		if parent != "" {
			removeStaleIn(parent, "", 100)
		}
	}
}

// groupName names a run's group after the process that makes it, its
// pid namespace and pid, so that a group whose maker is gone can be
// told at once from one a live run has made and not joined yet.
func groupName(runID string) string {
	return fmt.Sprintf("sandboxd-%s-%d-%s", ownPidNS(), os.Getpid(), runID)
}

// ownPidNS is this process's pid namespace's inode number ("0": not
// known, and no group's maker is then known to be gone).
func ownPidNS() string {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) != nil {
		return "0"
	}
	return strconv.FormatUint(st.Ino, 10)
}

// makerGone reports whether the group name says it was made by a
// process of pid namespace ns that has exited. A pid reused since is
// taken for the maker (the group then waits for staleAfter), as is a
// maker in another pid namespace, whose pids mean nothing here.
func makerGone(name, ns string) bool {
	parts := strings.SplitN(strings.TrimPrefix(name, "sandboxd-"), "-", 3)
	if len(parts) != 3 || ns == "0" || parts[0] != ns {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// staleAfter is how old an empty group of another run must be before a
// run removes it.
const staleAfter = 10 * time.Minute

// remove kills every task left in the groups (there should be none once
// the pid namespace is gone) and removes them, and the groups left by
// runs that could not remove theirs.
func (c *cgroup) remove() {
	defer func() {
		for _, d := range c.dirs {
			removeStale(d)
		}
	}()
	for _, d := range c.dirs {
		killAndRemove(d, 100)
	}
}

func syscallAccess(dir string) error { return unix.Access(dir, unix.W_OK|unix.X_OK) }

func killPid(pid int) { unix.Kill(pid, unix.SIGKILL) }

// watchOOM calls onOOM (on its own goroutine) each time the v1 memory
// group reaches its limit and the kernel's killer runs there, so the
// supervisor can see what the command was writing; stop ends the watch.
// Not on v2 (memory.events says it after the run).
func (c *cgroup) watchOOM(onOOM func()) (stop func(), err error) {
	return c.watchEvent("memory.oom_control", "", onOOM)
}

// watchUsage calls f each time the v1 memory group's usage crosses
// bytes, up or down, until stop is called.
func (c *cgroup) watchUsage(bytes int64, f func()) (stop func(), err error) {
	return c.watchEvent("memory.usage_in_bytes", strconv.FormatInt(bytes, 10), f)
}

// watchEvent calls f on each event of the v1 memory group's file (with
// arg, cgroup.event_control's third field) until stop is called.
func (c *cgroup) watchEvent(file, arg string, f func()) (stop func(), err error) {
	if c.v2 || c.memDir == "" {
		return nil, errors.New("cgroup: no v1 memory group")
	}
	ctl, err := os.Open(filepath.Join(c.memDir, file))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	defer ctl.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("cgroup: eventfd: %w", err)
	}
	ev := os.NewFile(uintptr(efd), "oom-eventfd")
	reg := strings.TrimSpace(fmt.Sprintf("%d %d %s", efd, ctl.Fd(), arg))
	if err := os.WriteFile(filepath.Join(c.memDir, "cgroup.event_control"), []byte(reg), 0); err != nil {
		ev.Close()
		return nil, fmt.Errorf("cgroup: event_control: %w", err)
	}
	go func() {
		var b [8]byte
		for {
			if _, err := ev.Read(b[:]); err != nil {
				return // stopped
			}
			f()
		}
	}()
	return func() { ev.Close() }, nil
}

// openLeave opens the v1 memory parent's "tasks" file for writing, for
// the helper's forking thread to leave the run's memory group with.
func (c *cgroup) openLeave() (int, error) {
	if c.v2 || c.memParent == "" {
		return -1, errors.New("cgroup: no v1 memory group")
	}
	fd, err := unix.Open(filepath.Join(c.memParent, "tasks"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("cgroup: open %s: %w", c.memParent, err)
	}
	return fd, nil
}

// usage is the v1 memory group's usage in bytes now.
func (c *cgroup) usage() (int64, error) {
	if c.v2 || c.memDir == "" {
		return 0, errors.New("cgroup: no v1 memory group")
	}
	b, err := os.ReadFile(filepath.Join(c.memDir, "memory.usage_in_bytes"))
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup: memory.usage_in_bytes: %w", err)
	}
	return n, nil
}

// memoryKilled reports whether the kernel's killer ran in the group at
// its memory limit.
func (c *cgroup) memoryKilled() bool {
	if c.memDir == "" {
		return false
	}
	if c.v2 {
		return cgroupCount(filepath.Join(c.memDir, "memory.events"), "oom_kill") > 0
	}
	return cgroupCount(filepath.Join(c.memDir, "memory.oom_control"), "oom_kill") > 0
}

// procs lists the processes in the run's group (none when it cannot be
// read).
func (c *cgroup) procs() []int {
	pids, _ := c.list()
	return pids
}

// list lists the processes in the run's group, or says why it cannot.
func (c *cgroup) list() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.pidsDir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup: cgroup.procs: %w", err)
		}
		out = append(out, pid)
	}
	return out, nil
}

// pidsHit reports whether a fork failed at pids.max.
func (c *cgroup) pidsHit() bool {
	return c.pids && cgroupCount(filepath.Join(c.pidsDir, "pids.events"), "max") > 0
}

// cgroupCount reads the value of key from a flat-keyed cgroup file ("key
// value" lines); 0 when it is missing.
func cgroupCount(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
