package sandbox

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// What the command ran into. The supervisor names each limit the
// command reached (which one, its value, the policy key that raises it),
// and the command, never sandboxd, is what a limit stops:
//
//   - memory: the kernel's killer picks the largest process, which was
//     often sandboxd's helper (a layer's or a tmpfs's pages count for the
//     group, not for any process): the command starts with the highest
//     OOM score (the helper's stays as it was), so the killer picks one
//     of the command's processes; on v1 the helper's thread that forked
//     the command leaves the memory group right after, so that a
//     layer filled to the limit leaves the helper room to end the run
//     (its last steps allocate: the end-of-audit probe opens a file). On cgroup v1 the supervisor
//     hears each kill (memory.oom_control's event) and notes the files
//     the command's processes hold open for writing, and those whose
//     writers, seen as the usage crossed half the limit, are all gone
//     by then (the victim, on a busy machine); on v2 the whole
//     group is killed (memory.oom.group) and memory.events says so.
//   - pids: pids.events counts the forks refused at pids.max.
//   - the private tmpfs (/tmp, /var/tmp, /dev/shm) and the layer: full
//     when the command ended (no block or inode left).
//   - file_size: a process killed by SIGXFSZ, as the helper saw it.

// limitWatch is the memory watch of one run.
type limitWatch struct {
	stop []func()
	mu   sync.Mutex
	hit  bool     // the kernel's killer ran at the memory limit
	open []string // files open for writing then
	// near are the files open for writing, and by which processes,
	// whenever the usage crossed a mark on its way to the limit: the
	// killer's victim is gone, its files closed, by the time the watch
	// hears of the kill on a busy machine; a file whose every writer
	// seen near the limit is gone then was being written when it hit.
	near map[string]map[int]bool
	// marked is closed once the usage mark is set, or could not be.
	// mu guards stop and near.
	marked chan struct{}
	// heard is signalled each time the watch has noted a kill.
	heard chan struct{}
}

// watchMemory starts the memory watch (cgroup v1 with a memory limit).
func (r *run) watchMemory() {
	if r.cg == nil || !r.cg.memory || r.cg.v2 {
		return
	}
	w := &limitWatch{near: map[string]map[int]bool{}, heard: make(chan struct{}, 1)}
	stop, err := r.cg.watchOOM(func() {
		open := openForWriting(r.cg.procs())
		w.mu.Lock()
		for p, pids := range w.near {
			if !slices.Contains(open, p) && allGone(pids) {
				open = append(open, p)
			}
		}
		sort.Strings(open)
		w.hit = true
		w.open = mergeSorted(w.open, open)
		w.mu.Unlock()
		select {
		case w.heard <- struct{}{}:
		default:
		}
		r.log.Debug("memory limit reached", "writing", open)
	})
	if err != nil {
		r.log.Debug("no memory watch", "err", err)
		return
	}
	w.stop = append(w.stop, stop)
	// A mark at half the limit, set from a goroutine: the kernel waits
	// for an RCU grace period to register it (~10 ms), which the launch
	// must not.
	w.marked = make(chan struct{})
	if r.spec.Limits.Memory > 0 {
		go w.watchMark(r.cg, r.spec.Limits.Memory/2)
	} else {
		close(w.marked)
	}
	r.mem = w
	r.undo = append(r.undo, w.stopAll)
}

// leaveFD is the descriptor the helper's forking thread leaves the v1
// memory group by once the command is forked (-1: no memory watch, or
// it could not be opened, and the helper stays in the group).
func (r *run) leaveFD() int {
	if r.mem == nil {
		return -1
	}
	fd, err := r.cg.openLeave()
	if err != nil {
		r.log.Debug("helper stays in the memory group", "err", err)
		return -1
	}
	return fd
}

// memoryHit reports whether the memory limit was reached, with the
// files open for writing then. The group's kill count is the kernel's
// word on a kill, and when it counts one the watch is given up to a
// second to have noted what was open (its event may still be on its
// way); the watch runs on until cleanup stops it, so the denials are
// collected while the mark's registration may still be under way.
func (r *run) memoryHit() (bool, []string) {
	hit := r.cg != nil && r.cg.memoryKilled()
	if r.mem == nil {
		return hit, nil
	}
	if hit {
		r.mem.awaitHeard(time.Second)
	}
	r.mem.mu.Lock()
	defer r.mem.mu.Unlock()
	return hit || r.mem.hit, slices.Clone(r.mem.open)
}

// awaitHeard waits, at most wait, until the watch has noted a kill.
func (w *limitWatch) awaitHeard(wait time.Duration) {
	w.mu.Lock()
	noted := w.hit
	w.mu.Unlock()
	if noted {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.heard:
	case <-t.C:
	}
}

// watchMark listens to the usage crossing mark, noting the writers
// then, until the watch stops. The kernel signals a crossing only, and
// registers the mark an RCU grace period after it is asked to: a command
// that passed the mark meanwhile (a fast writer, a busy machine) has its
// writers noted as soon as the mark is set.
func (w *limitWatch) watchMark(cg *cgroup, mark int64) {
	defer close(w.marked)
	note := func() {
		by := writersOf(cg.procs())
		w.mu.Lock()
		defer w.mu.Unlock()
		for p, pids := range by {
			if w.near[p] == nil {
				w.near[p] = map[int]bool{}
			}
			maps.Copy(w.near[p], pids)
		}
	}
	stop, err := cg.watchUsage(mark, note)
	if err != nil {
		return
	}
	if u, err := cg.usage(); err == nil && u >= mark {
		note()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop = append(w.stop, stop)
}

// stopAll stops every event the watch listens to, once the mark is set
// (or failed), closing them together: each close, too, waits for a
// grace period.
func (w *limitWatch) stopAll() {
	<-w.marked
	w.mu.Lock()
	stops := w.stop
	w.stop = nil
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range stops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s()
		}()
	}
	wg.Wait()
}

// allGone reports whether none of pids is alive.
func allGone(pids map[int]bool) bool {
	for pid := range pids {
		if unix.Kill(pid, 0) != unix.ESRCH {
			return false
		}
	}
	return true
}

// mergeSorted merges two sorted lists without repeats.
func mergeSorted(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range [][]string{a, b} {
		for _, p := range l {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// openForWriting lists the regular files the processes pids hold open
// for writing, by the paths their descriptors name, sorted and unique.
func openForWriting(pids []int) []string {
	by := writersOf(pids)
	out := make([]string, 0, len(by))
	for p := range by {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// writersOf maps each regular file the processes pids hold open for
// writing, by the path its descriptor names, to the processes that do.
func writersOf(pids []int) map[string]map[int]bool {
	seen := map[string]map[int]bool{}
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(dir, e.Name()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			if !writableFD(pid, e.Name()) {
				continue
			}
			if p, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(p, "/") {
				p = strings.TrimSuffix(p, " (deleted)")
				if seen[p] == nil {
					seen[p] = map[int]bool{}
				}
				seen[p][pid] = true
			}
		}
	}
	return seen
}

// writableFD reports whether descriptor fd of pid was opened for writing.
func writableFD(pid int, fd string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			fl, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && fl&unix.O_ACCMODE != unix.O_RDONLY
		}
	}
	return false
}

// fsFull reports whether the file system of fd has no block or no inode
// left.
func fsFull(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && (st.Bavail == 0 || (st.Files > 0 && st.Ffree == 0))
}

// sizeKey is the key that raises a tmpfs's size: its own key, or
// limits.memory when the memory limit made it smaller than asked (see
// sizeTmpfs).
func sizeKey(size, asked int64, key string) string {
	if size < asked {
		return "limits.memory"
	}
	return key
}

// sizeTmpfs decides the private tmpfs sizes. With a memory cgroup their
// pages count for the run's group, and each keeps its own limit. Without
// one (an unprivileged caller on cgroup v1), RLIMIT_DATA bounds each
// process and nothing counts the tmpfs: then /tmp, /dev/shm and the layer
// together are held within limits.memory (the layer up to half of it,
// /tmp and /dev/shm a quarter each at most), and the run's report says
// what bounds what.
func (r *run) sizeTmpfs() {
	lim := r.spec.Limits
	r.tmpSize, r.layerSize = lim.TmpSize, r.spec.LayerSize
	if r.cg != nil && r.cg.memory || lim.Memory <= 0 {
		return
	}
	layer := int64(0)
	if r.spec.Transaction {
		layer = r.layerSize
	}
	if 2*r.tmpSize+layer <= lim.Memory {
		r.res.Degraded = append(r.res.Degraded, fmt.Sprintf("no memory cgroup: each process is bounded by RLIMIT_DATA (limits.memory, %d bytes), and /tmp, /dev/shm and the layer by their own sizes, which fit in it together; the processes together are not bounded", lim.Memory))
		return
	}
	if layer > 0 {
		r.layerSize = min(r.layerSize, lim.Memory/2)
		layer = r.layerSize
	}
	r.tmpSize = min(r.tmpSize, (lim.Memory-layer)/2)
	r.res.Degraded = append(r.res.Degraded, fmt.Sprintf("no memory cgroup: each process is bounded by RLIMIT_DATA (limits.memory, %d bytes), and /tmp, /dev/shm (%d bytes each) and the layer (%d bytes) together by limits.memory; the processes together are not bounded", lim.Memory, r.tmpSize, r.layerSize))
}

// limitsHit turns what was seen into the run's limits, in a fixed order.
func (r *run) limitsHit(memory bool, writing []string, fromHelper []string, layerFull bool) []LimitHit {
	lim := r.spec.Limits
	var out []LimitHit
	if memory {
		out = append(out, LimitHit{Limit: "memory", Value: lim.Memory, Key: "limits.memory", Writing: writing})
	}
	if r.cg != nil && r.cg.pidsHit() {
		out = append(out, LimitHit{Limit: "pids", Value: lim.Pids, Key: "limits.pids"})
	}
	tmp := false
	for _, l := range fromHelper {
		switch l {
		case "tmp", "shm":
			tmp = true
		case "file_size":
			out = append(out, LimitHit{Limit: "file_size", Value: lim.FileSize, Key: "limits.file_size"})
		}
	}
	if tmp {
		out = append(out, LimitHit{Limit: "tmp", Value: r.tmpSize, Key: sizeKey(r.tmpSize, lim.TmpSize, "limits.tmp_size")})
	}
	if layerFull {
		out = append(out, LimitHit{Limit: "layer", Value: r.layerSize, Key: sizeKey(r.layerSize, r.spec.LayerSize, "limits.layer_size")})
	}
	return out
}
