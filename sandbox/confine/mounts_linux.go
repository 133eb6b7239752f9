package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// setupMounts builds the helper's mount namespace:
//
//  1. nothing propagates back to the host;
//  2. writable roots and device nodes are cloned while still writable;
//  3. the whole inherited tree becomes read-only, nosuid, nodev;
//  4. a fresh /proc for the pid namespace, a minimal /dev with a private
//     devpts and /dev/shm, a private size-limited /tmp (also /var/tmp);
//  5. host runtime directories are hidden behind empty read-only tmpfs;
//  6. writable roots (and, for root callers, the id-mapped read-only home)
//     are attached;
//
// Persistence paths are pinned afterwards, by protectWorkspace, once the
// supervisor has planned them.
//
// trees are the supervisor's detached (id-mapped) trees, one per m.Attach.
//
// With m.Layer set, the workspace is covered by a copy-on-write layer as
// soon as it is attached (before deeper roots land on it); the returned
// descriptor is the layer's file system, for the supervisor, or -1.
func setupMounts(m *wire.SetupMsg, trees []int) (layerFD int, err error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return -1, fmt.Errorf("make / private: %w", err)
	}
	attach := append([]string(nil), m.Attach...)
	clones, err := cloneWritable(m.Clone)
	if err != nil {
		return -1, err
	}
	trees = append(trees, clones...)
	attach = append(attach, m.Clone...)
	devs := make([]int, 0, len(wire.DevNodes()))
	for _, name := range wire.DevNodes() {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return -1, fmt.Errorf("clone /dev/%s: %w", name, err)
		}
		devs = append(devs, fd)
	}

	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &ro); err != nil {
		return -1, fmt.Errorf("make the tree read-only: %w", err)
	}

	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return -1, fmt.Errorf("mount /proc: %w", err)
	}
	if err := setupDev(devs, m.TmpSize); err != nil {
		return -1, err
	}
	if err := setupTmp(m); err != nil {
		return -1, err
	}
	return attachTrees(m, attach, trees)
}

// cloneWritable clones the writable roots the helper attaches itself,
// while the tree is still writable.
func cloneWritable(roots []string) ([]int, error) {
	var trees []int
	for _, p := range roots {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return trees, fmt.Errorf("clone writable root %s: %w", p, err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return trees, fmt.Errorf("writable root %s: %w", p, err)
		}
		trees = append(trees, fd)
	}
	return trees, nil
}

// setupTmp mounts the private /tmp (also /var/tmp), hides the host's
// runtime directories and lays the skeletons.
func setupTmp(m *wire.SetupMsg) error {
	tmpOpts := fmt.Sprintf("mode=1777,size=%d", m.TmpSize)
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOpts); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	if isRealDir("/var/tmp") {
		if err := unix.Mount("/tmp", "/var/tmp", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /var/tmp: %w", err)
		}
	}
	for _, p := range m.Mask {
		if !isRealDir(p) {
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0755"); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	for _, p := range m.Skeleton {
		if wire.InOwnTmpfs(p) {
			continue // a fresh tmpfs here already: ensureMountpoint makes the path
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
			return fmt.Errorf("skeleton %s: %w", p, err)
		}
	}
	return nil
}

// attachTrees attaches each tree at its target, shallow paths first so
// deeper roots land on top of them, and covers the workspace with its
// layer as soon as it is attached.
func attachTrees(m *wire.SetupMsg, attach []string, trees []int) (layerFD int, err error) {
	layerFD = -1
	defer func() {
		if err != nil && layerFD >= 0 {
			unix.Close(layerFD)
			layerFD = -1
		}
	}()
	order := make([]int, len(attach))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return strings.Count(attach[order[a]], "/") < strings.Count(attach[order[b]], "/")
	})
	for _, i := range order {
		target := attach[i]
		if err := ensureMountpoint(target, m.Skeleton); err != nil {
			return layerFD, err
		}
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return layerFD, fmt.Errorf("attach %s: %w", target, err)
		}
		unix.Close(trees[i])
		if target == m.Workspace && m.Layer > 0 {
			if layerFD, err = mountLayer(target, m.Layer); err != nil {
				return layerFD, err
			}
		}
	}
	return layerFD, nil
}

// mountLayer covers dir with an overlay whose upper layer lives in a
// fresh tmpfs of at most size bytes (a write beyond it fails with ENOSPC
// inside, never filling the host's disk). The tmpfs is never attached
// anywhere the command could reach; its descriptor goes to the
// supervisor, which commits or discards the layer after the command.
// userxattr: the overlay belongs to the sandbox's user namespace, which
// also rules out redirect_dir (renaming a directory that exists in the
// workspace fails with EXDEV; mv falls back to copying).
func mountLayer(dir string, size int64) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return -1, fmt.Errorf("layer: %w", err)
	}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("layer: tmpfs: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"size", fmt.Sprint(size)}, {"mode", "0700"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("layer: tmpfs %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("layer: tmpfs: %w", err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("layer: tmpfs: %w", err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(mfd)
		return -1, fmt.Errorf("layer: %s: %w", what, err)
	}
	for _, d := range []string{"upper", "work"} {
		if err := unix.Mkdirat(mfd, d, 0o700); err != nil {
			return fail(d, err)
		}
	}
	// The layer's root directory stands for the workspace's.
	if err := unix.Fchmodat(mfd, "upper", st.Mode&0o7777, 0); err != nil {
		return fail("upper", err)
	}
	ov, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fail("overlay", err)
	}
	defer unix.Close(ov)
	self := fmt.Sprintf("/proc/self/fd/%d/", mfd)
	for _, kv := range [][2]string{{"lowerdir+", dir}, {"upperdir", self + "upper"}, {"workdir", self + "work"},
		{"redirect_dir", "nofollow"}, {"metacopy", "off"}, {"index", "off"}} {
		if err := unix.FsconfigSetString(ov, kv[0], kv[1]); err != nil {
			return fail("overlay "+kv[0], err)
		}
	}
	if err := unix.FsconfigSetFlag(ov, "userxattr"); err != nil {
		return fail("overlay userxattr", err)
	}
	if err := unix.FsconfigCreate(ov); err != nil {
		return fail("overlay", err)
	}
	om, err := unix.Fsmount(ov, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fail("overlay", err)
	}
	defer unix.Close(om)
	if err := unix.MoveMount(om, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fail("attach overlay", err)
	}
	return mfd, nil
}

func setupDev(devs []int, shmSize int64) error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for i, name := range wire.DevNodes() {
		p := "/dev/" + name
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		if err := unix.MoveMount(devs[i], "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach %s: %w", p, err)
		}
		unix.Close(devs[i])
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=1777,size=%d", shmSize)); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	links := [][2]string{{"pts/ptmx", "/dev/ptmx"}, {"/proc/self/fd", "/dev/fd"},
		{"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"},
		{"/proc/self/fd/2", "/dev/stderr"}}
	for _, l := range links {
		if err := os.Symlink(l[0], l[1]); err != nil {
			return fmt.Errorf("symlink %s: %w", l[1], err)
		}
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/dev", 0, &ro); err != nil {
		return fmt.Errorf("make /dev read-only: %w", err)
	}
	return nil
}

// ensureMountpoint creates target's missing directories inside tmpfs
// mounts the helper made (a workspace under /tmp, or below a skeleton).
// Elsewhere the tree is read-only and a missing target is an error.
func ensureMountpoint(target string, skeleton []string) error {
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	ours := wire.InOwnTmpfs(target)
	for _, s := range skeleton {
		_, below := pathtree.Below(s, target)
		ours = ours || below
	}
	if !ours {
		return fmt.Errorf("mount target %s does not exist or cannot be reached", target)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("mount target %s: %w", target, err)
	}
	return nil
}

func isRealDir(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.IsDir()
}

// protectWorkspace pins directories and binds persistence paths
// read-only. Every path is opened beneath the workspace with no symlink
// allowed anywhere, so a planted symlink cannot redirect a mount.
func protectWorkspace(workspace string, c *wire.ConfineMsg) error {
	if len(c.Pins) == 0 && len(c.ReadOnly) == 0 {
		return nil
	}
	root, err := unix.Open(workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer unix.Close(root)
	bind := func(rel string, readOnly bool) error {
		how := unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		fd, err := unix.Openat2(root, rel, &how)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil // removed on the host since the plan was made
			}
			return fmt.Errorf("protect %s: %w", filepath.Join(workspace, rel), err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("protect %s: %w", rel, err)
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFDIR && t != unix.S_IFREG {
			return nil // symlinks and specials are watched, not bound
		}
		tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		if err != nil {
			return fmt.Errorf("protect %s: %w", rel, err)
		}
		defer unix.Close(tree)
		if readOnly {
			attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
			if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
				return fmt.Errorf("protect %s: %w", rel, err)
			}
		}
		if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
			return fmt.Errorf("protect %s: %w", rel, err)
		}
		return nil
	}
	for _, p := range c.Pins {
		if err := bind(p, false); err != nil {
			return err
		}
	}
	for _, p := range c.ReadOnly {
		if err := bind(p, true); err != nil {
			return err
		}
	}
	return nil
}

// loopbackUp brings lo up in the new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// bindExceptions is the unprivileged path: the helper cannot get
// id-mapped trees from the supervisor, so it clones each granted file
// itself, by its resolved path with no symlink allowed, after checking
// the inode is the granted one.
func bindExceptions(es []wire.ExceptionBind) error {
	for _, e := range es {
		if err := bindException(e); err != nil {
			return err
		}
	}
	return nil
}

// bindException binds one granted object (or the copy shown in its
// place) onto its path, checking it is the object the supervisor named.
func bindException(e wire.ExceptionBind) error {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	src := e.Path
	if e.Source != "" {
		src = e.Source
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, src, &how)
	if err != nil {
		return fmt.Errorf("grant for %s: %w", e.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != e.Ino || st.Dev != e.Dev {
		return fmt.Errorf("grant for %s: the path now names another object", e.Path)
	}
	target := fd
	if e.Source != "" {
		if target, err = unix.Openat2(unix.AT_FDCWD, e.Path, &how); err != nil {
			return fmt.Errorf("copy for %s: %w", e.Path, err)
		}
		defer unix.Close(target)
	}
	tree, err := wire.GrantTree(fd, e.Path, e.Operation, -1)
	if err != nil {
		return err
	}
	err = unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	unix.Close(tree)
	if err != nil {
		return fmt.Errorf("grant for %s: attach: %w", e.Path, err)
	}
	return nil
}
