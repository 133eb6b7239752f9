package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/envlist"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// sendSetup sends the helper what it needs to build its mount namespace:
// the setup message, the cgroup files to join and the trees to attach.
// The helper can build its mount namespace while the ruleset, the filter
// and the persistence plan are finished here.
func (r *run) sendSetup() error {
	spec := &r.spec
	// The helper joins the run's cgroup itself, through descriptors opened
	// here: writing "0" to a v1 "tasks" file moves only the calling thread
	// and skips the global lock that makes moving a whole process wait
	// for an RCU grace period (up to ~10 ms here). The command is forked
	// from that thread, so it and all its descendants are in the group.
	var trees []int
	cgFDs, leave, err := r.cgroupFDs()
	defer func() { closeAll(cgFDs); closeAll(trees) }()
	if err != nil {
		return err
	}
	setup := &wire.SetupMsg{
		Stamp: wire.Stamp(),
		Argv:  spec.Argv, Env: spec.Env, Dir: spec.Dir,
		LandlockFlags: map[bool]uint32{true: detect.LandlockLogFlags}[r.det != nil],
		Namespaces:    r.wantNS,
		Workspace:     spec.Workspace,
		TmpSize:       r.tmpSize,
		Limits:        wire.Limits(spec.Limits),
		LimitNproc:    true,
		LimitData:     r.cg == nil || !r.cg.memory,
		PidsCgroup:    r.cg != nil && r.cg.pids,
		LandlockABI:   r.sup.ABI,
		LandlockFS:    uint64(r.sup.FS),
		LeaveMemory:   leave,
	}
	r.setup = setup
	setup.Env = r.h.gitEnv(setup.Env)
	if e := spec.Egress; e != nil && r.wantNS {
		setup.ProxyPort = e.Port
		if e.captures() {
			// The helper listens at a port of its own choosing, made
			// before the setup (a ready helper's while it waited).
			setup.Capture = true
			setup.Shown = nameFiles()
		}
		setup.SOCKS = e.SOCKS != nil
		for _, kv := range e.Env {
			if k, v, ok := strings.Cut(kv, "="); ok {
				setup.Env = envlist.Set(setup.Env, k, v)
			}
		}
	}
	if r.txn {
		setup.Layer, setup.NotBefore = r.layerSize, r.started.Nano()
		setup.Env = addGitConfig(setup.Env, layerGitConfig(spec.Workspace))
	}
	switch {
	case r.wantNS && r.root:
		trees, err = r.mapTrees(setup)
	case r.wantNS:
		r.cloneTrees(setup)
	default:
		err = fsid.Do(r.spec.caller(), func() error { return r.privateTmp(setup) })
	}
	if err != nil {
		return err
	}
	r.mark("trees")
	// The caches' layers are laid out as the caller: its own files.
	fsid.Do(r.spec.caller(), func() error { r.planCaches(setup); return nil })
	r.mark("caches planned")
	setup.Cgroups, setup.Pipes, setup.Stdio = len(cgFDs), len(spec.Pipes), true
	fds := append(append([]int(nil), cgFDs...), trees...)
	fds = append(fds, r.h.stdioFDs()...)
	for _, p := range spec.Pipes {
		fds = append(fds, int(p.Fd()))
	}
	// The helper holds its own copies once this is sent.
	err = wire.Send(r.h.sock, wire.Message{Kind: wire.Setup, Setup: setup}, fds...)
	r.h.sentStdio()
	return err
}

// cgroupFDs opens the cgroup files the helper joins the run's groups
// by, and the one its forking thread leaves the memory group by, last
// (leave).
func (r *run) cgroupFDs() (fds []int, leave bool, err error) {
	if r.cg == nil {
		return nil, false, nil
	}
	if fds, err = r.cg.openJoin(); err != nil {
		return nil, false, err
	}
	if fd := r.leaveFD(); fd >= 0 {
		fds, leave = append(fds, fd), true
	}
	return fds, leave, nil
}

// writableRoots are the workspace, the further writable roots and the
// caches, in mount order.
func (r *run) writableRoots() []string {
	roots := append([]string{r.spec.Workspace}, r.spec.Writable...)
	return append(roots, r.spec.Caches...)
}

// mapTrees makes id-mapped trees for a root caller: the command's host
// uid owns what root owns. It returns their descriptors, one per
// setup.Attach entry.
func (r *run) mapTrees(setup *wire.SetupMsg) ([]int, error) {
	spec := &r.spec
	setup.Mask = maskedDirs(spec.RuntimeDir)
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", r.h.cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	defer unix.Close(userns)
	type tree struct {
		path     string
		readOnly bool
	}
	var want []tree
	switch {
	case spec.Home == "" || !r.h.homeMapped:
	case wire.InOwnTmpfs(spec.Home):
		// Below the private /tmp, whose rule grants every right to
		// all beneath it, the carve-out could not hold: the
		// home is not mapped at all.
		r.res.Degraded = append(r.res.Degraded, "home directory is below /tmp and is not visible inside")
	default:
		want = append(want, tree{spec.Home, true})
	}
	for _, p := range r.writableRoots() {
		want = append(want, tree{p, false})
	}
	var trees []int
	for _, t := range want {
		fd, err := idmappedTree(t.path, userns, t.readOnly)
		if err != nil && t.readOnly {
			// The home is a convenience (reading ~/.gitconfig,
			// module caches); without it the command reads only
			// what other users may read there.
			r.log.Warn("home directory not mapped", "err", err)
			r.res.Degraded = append(r.res.Degraded, "home directory not mapped for reading ("+publicerr.Reason(err)+")")
			continue
		}
		if err != nil {
			return trees, err
		}
		trees = append(trees, fd)
		setup.Attach = append(setup.Attach, t.path)
	}
	setup.Skeleton = skeletonDirs(setup.Attach, spec.HostUID, spec.HostGID)
	for _, o := range r.opened {
		fd, err := wire.GrantTree(o.fd, o.Path, string(o.Operation), userns)
		if err != nil {
			return trees, err
		}
		trees = append(trees, fd)
		setup.Attach = append(setup.Attach, o.Path)
	}
	return trees, nil
}

// cloneTrees leaves the writable roots and granted files to the helper,
// whose command runs as the caller's own uid.
func (r *run) cloneTrees(setup *wire.SetupMsg) {
	setup.Mask = maskedDirs(r.spec.RuntimeDir)
	setup.Clone = r.writableRoots()
	for _, o := range r.opened {
		setup.ExceptionBinds = append(setup.ExceptionBinds, wire.ExceptionBind{Operation: string(o.Operation), Path: o.Path, Dev: o.Dev, Ino: o.Ino, Source: o.source})
	}
}

// privateTmp makes the private TMPDIR of a run without a mount namespace.
func (r *run) privateTmp(setup *wire.SetupMsg) error {
	tmp := filepath.Join(r.spec.StateDir, "tmp", r.runID)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("sandbox: private TMPDIR: %w", err)
	}
	r.undo = append(r.undo, func() { r.removeAsCaller(tmp) })
	setup.TmpDir = tmp
	setup.Env = envlist.Set(setup.Env, "TMPDIR", tmp)
	r.res.Degraded = append(r.res.Degraded, "TMPDIR is a private directory without a size limit (no tmpfs without a mount namespace)")
	return nil
}

// sendConfine waits for the preparation and sends the helper the
// ruleset, the filter and the persistence binds.
func (r *run) sendConfine() error {
	p := r.prepared()
	r.mark("prepared")
	if p.err != nil {
		r.dropPrepared()
		r.h.kill()
		return p.err
	}
	confine := &wire.ConfineMsg{Seccomp: p.bpf, SeccompNoUDP: p.bpfNoUDP}
	if p.plan != nil && r.wantNS && !r.txn {
		confine.Pins, confine.ReadOnly = p.plan.Pins(), p.plan.ReadOnly()
	}
	if err := wire.Send(r.h.sock, wire.Message{Kind: wire.Confine, Confine: confine}, p.rs.FD()); err != nil {
		r.h.kill()
		return err
	}
	p.rs.Close()
	r.mark("setup sent")
	return nil
}

func idmappedTree(path string, userns int, readOnly bool) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("sandbox: clone %s: %w", path, err)
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns),
	}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sandbox: id-map %s: %w", path, err)
	}
	return fd, nil
}

// skeletonDirs returns, for mount targets below a directory the command's
// host uid cannot search (a root caller's workspace under /root, say), the
// highest such directory. The helper, which runs as that uid, could not
// reach the target; it mounts an empty tmpfs there instead and creates
// just the path to each target. Nothing is hidden that the command could
// have read: it had no search permission. A directory inside another
// (id-mapped, so searchable) target does not count.
func skeletonDirs(targets []string, uid, gid int) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range targets {
		for _, a := range ancestors(t) {
			if underAny(a, targets, t) {
				break
			}
			var st unix.Stat_t
			if unix.Stat(a, &st) != nil {
				break
			}
			if searchable(&st, uid, gid) {
				continue
			}
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
			break
		}
	}
	return out
}

// ancestors lists the proper ancestors of p below "/", outermost first.
func ancestors(p string) []string {
	var out []string
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

// underAny reports whether dir is at or below a target other than self.
func underAny(dir string, targets []string, self string) bool {
	for _, t := range targets {
		if t != self && pathtree.Within(t, dir) {
			return true
		}
	}
	return false
}

func searchable(st *unix.Stat_t, uid, gid int) bool {
	switch {
	case int(st.Uid) == uid:
		return st.Mode&0o100 != 0
	case int(st.Gid) == gid:
		return st.Mode&0o010 != 0
	default:
		return st.Mode&0o001 != 0
	}
}

// maskedDirs are host runtime directories replaced by an empty tmpfs.
func maskedDirs(runtimeDir string) []string {
	dirs := []string{"/run", "/var/run"}
	if x := runtimeDir; filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Clean(x))
	}
	return dirs
}
