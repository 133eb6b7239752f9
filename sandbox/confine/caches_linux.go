package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// mountCaches mounts each private tool cache once the trees are
// attached: an overlay whose read-only lower layer is the host cache and
// whose upper layer is the private one, with the secrets below the host
// cache hidden inside it; or, without a lower layer, the private layer
// alone. When the kernel refuses the overlay, the private layer alone is
// used. The layers' directory is then hidden, and the supervisor learns
// what became of each cache. It fails only when a secret could not be
// hidden and the overlay could not be taken away again.
func mountCaches(s *wire.SetupMsg, sock int) error {
	out := make([]wire.CacheOutcome, len(s.Caches))
	for i := range s.Caches {
		o, err := mountCache(&s.Caches[i], s.TmpSize)
		if err != nil {
			return err
		}
		s.Caches[i].Mounted, out[i] = o.Mounted, o
	}
	if err := hideLayers(s.CacheRoots); err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	return wire.Send(sock, wire.Message{Kind: wire.Caches, Caches: out})
}

// mountCache mounts one cache on its directory.
func mountCache(m *wire.CacheMount, tmpSize int64) (wire.CacheOutcome, error) {
	rootFD, err := unix.Open(m.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return refused("the private cache's root cannot be opened", err), nil
	}
	defer unix.Close(rootFD)
	dirFD, err := openIn(rootFD, m.Dir, unix.O_PATH|unix.O_DIRECTORY, true)
	if err != nil {
		return refused("the private cache cannot be opened", err), nil
	}
	defer unix.Close(dirFD)
	l, err := openLayer(rootFD, m, tmpSize)
	if err != nil {
		return refused("the private layer cannot be opened", err), nil
	}
	defer l.close()
	var o wire.CacheOutcome
	if m.Lower != "" {
		if o, err = overlayCache(m, dirFD, l); err != nil || o.Why == "" {
			return wire.CacheOutcome{Mounted: "overlay"}, err
		}
		o.Why = "the kernel refused the overlay: " + o.Why
	}
	if m.Ephemeral {
		return o, nil
	}
	if err := bindUpper(l.upper, dirFD); err != nil {
		b := refused("the private layer cannot be bound on the cache", err)
		if o.Why != "" {
			b.Why, b.Cause = o.Why+"; "+b.Why, o.Cause+"; "+b.Cause
		}
		return b, nil
	}
	o.Mounted = "bind"
	return o, nil
}

// refused is a cache's outcome when what failed for err: what, in
// sandboxd's words, with the OS's reason; err's text is the cause, for
// the supervisor's log. The report shows Why, and never names the
// private cache's directories, which are sandboxd's state.
func refused(what string, err error) wire.CacheOutcome {
	return wire.CacheOutcome{Why: what + " (" + publicerr.Reason(err) + ")", Cause: err.Error()}
}

// layerDirs are a cache's upper and work directories, open.
type layerDirs struct {
	upper, work int
	fs          int // the ephemeral tmpfs holding them, or -1
}

func (l *layerDirs) close() {
	for _, fd := range []int{l.upper, l.work, l.fs} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// openLayer opens the private layer beneath the cache root, or makes a
// fresh tmpfs for an ephemeral one.
func openLayer(rootFD int, m *wire.CacheMount, tmpSize int64) (*layerDirs, error) {
	l := &layerDirs{upper: -1, work: -1, fs: -1}
	base := rootFD
	if m.Ephemeral {
		fs, err := ephemeralFS(tmpSize)
		if err != nil {
			return nil, err
		}
		l.fs, base = fs, fs
	} else {
		fd, err := openIn(rootFD, m.Layer, unix.O_PATH|unix.O_DIRECTORY, true)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		base = fd
		if err := clearVolatile(fd); err != nil {
			return nil, err
		}
	}
	var err error
	if l.upper, err = openIn(base, "upper", unix.O_PATH|unix.O_DIRECTORY, true); err == nil {
		l.work, err = openIn(base, "work", unix.O_PATH|unix.O_DIRECTORY, true)
	}
	if err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// clearVolatile removes the mark a volatile overlay leaves in its work
// directory, which would refuse the next mount: it says the upper layer
// may be torn by a crash, which for a cache the tools already tolerate
// (their own host caches are written the same way), and the supervisor
// holds the layer's lock, so no other overlay uses it.
func clearVolatile(layerFD int) error {
	dir, err := openIn(layerFD, "work/work/incompat/volatile", unix.O_PATH|unix.O_DIRECTORY, true)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("volatile mark: %w", err)
	}
	err = unix.Unlinkat(dir, "dirty", 0)
	unix.Close(dir)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("volatile mark: %w", err)
	}
	incompat, err := openIn(layerFD, "work/work/incompat", unix.O_PATH|unix.O_DIRECTORY, true)
	if err != nil {
		return fmt.Errorf("volatile mark: %w", err)
	}
	defer unix.Close(incompat)
	if err := unix.Unlinkat(incompat, "volatile", unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("volatile mark: %w", err)
	}
	return nil
}

// ephemeralFS is a fresh tmpfs with empty upper and work directories,
// reachable only through the descriptor.
func ephemeralFS(size int64) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"size", fmt.Sprint(size)}, {"mode", "0700"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, err
	}
	for _, d := range []string{"upper", "work"} {
		if err := unix.Mkdirat(mfd, d, 0o700); err != nil {
			unix.Close(mfd)
			return -1, err
		}
	}
	return mfd, nil
}

// overlayCache mounts the overlay on dirFD and hides the secrets in it.
// A refusal by the kernel is an outcome with a reason (the caller falls
// back); an error means a secret may show and the overlay could not be
// removed.
func overlayCache(m *wire.CacheMount, dirFD int, l *layerDirs) (wire.CacheOutcome, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	lower, err := unix.Openat2(unix.AT_FDCWD, m.Lower, &how)
	if err != nil {
		// The host cache is the user's: its path may be shown.
		return refused("the host cache "+m.Lower+" cannot be opened", err), nil
	}
	defer unix.Close(lower)
	om, err := cacheOverlay(lower, l)
	if err != nil {
		return refused("the overlay cannot be made", err), nil
	}
	defer unix.Close(om)
	if err := unix.MoveMount(om, "", dirFD, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return refused("the overlay cannot be attached", err), nil
	}
	if err := maskAll(om, m.Masks); err != nil {
		// Nothing of the command runs yet: taking the overlay away
		// (with its masks) leaves the private layer alone.
		if uerr := unix.Unmount(fdPath(om), unix.MNT_DETACH); uerr != nil {
			return wire.CacheOutcome{}, fmt.Errorf("cache %s: hide a secret: %v; remove the overlay: %w", m.Name, err, uerr)
		}
		return refused("a secret below the host cache cannot be hidden in it", err), nil
	}
	return wire.CacheOutcome{}, nil
}

// cacheOverlay creates the overlay, detached. userxattr: it belongs to
// the sandbox's user namespace (which rules out redirect_dir, as for the
// workspace's layer: renaming a directory of the host cache is EXDEV).
// volatile: no sync reaches the upper file system, not even the one
// every unmount would make when the namespace goes (a journal commit per
// cache, most of a trivial command's run); the tools write their own
// caches on the host without syncing them either.
func cacheOverlay(lower int, l *layerDirs) (int, error) {
	ov, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("overlay: %w", err)
	}
	defer unix.Close(ov)
	for _, kv := range [][2]string{{"lowerdir+", fdPath(lower)}, {"upperdir", fdPath(l.upper)}, {"workdir", fdPath(l.work)},
		{"redirect_dir", "nofollow"}, {"metacopy", "off"}, {"index", "off"}} {
		if err := unix.FsconfigSetString(ov, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("overlay %s: %w", kv[0], err)
		}
	}
	for _, flag := range []string{"userxattr", "volatile"} {
		if err := unix.FsconfigSetFlag(ov, flag); err != nil {
			return -1, fmt.Errorf("overlay %s: %w", flag, err)
		}
	}
	if err := unix.FsconfigCreate(ov); err != nil {
		return -1, fmt.Errorf("overlay: %w", err)
	}
	om, err := unix.Fsmount(ov, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("overlay: %w", err)
	}
	return om, nil
}

// maskAll hides each mask below the overlay's root, shallowest first (a
// mask below a hidden directory is already hidden). Globs are expanded
// now, over what the overlay shows.
func maskAll(root int, masks []string) error {
	masks = append([]string(nil), masks...)
	sort.SliceStable(masks, func(a, b int) bool { return strings.Count(masks[a], "/") < strings.Count(masks[b], "/") })
	for _, rel := range masks {
		if err := mask(root, rel); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	return nil
}

// mask hides what rel names below root. Nothing to hide: a missing
// path; a path through a symlink (a read through it leaves the overlay,
// or reaches a path hidden on its own), or through a mask already laid.
func mask(root int, rel string) error {
	parent, pat := filepath.Split(rel)
	pfd, err := openIn(root, strings.TrimSuffix(parent, "/"), unix.O_RDONLY|unix.O_DIRECTORY, true)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOTDIR):
		return nil
	case err != nil:
		return err
	}
	defer unix.Close(pfd)
	names := []string{pat}
	if strings.ContainsAny(pat, `*?[`) {
		if names, err = matching(pfd, pat); err != nil {
			return err
		}
	}
	for _, name := range names {
		if err := maskEntry(pfd, name); err != nil {
			return err
		}
	}
	return nil
}

// matching lists the entries of the directory open at dirFD that match
// pattern.
func matching(dirFD int, pattern string) ([]string, error) {
	dup, err := unix.Dup(dirFD)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "mask")
	all, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range all {
		if ok, err := filepath.Match(pattern, n); err != nil {
			return nil, err
		} else if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// maskEntry lays an empty read-only tmpfs over a directory, or a
// read-only nodev /dev/null over anything else but a symlink.
func maskEntry(dirFD int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil
	}
	target, err := openIn(dirFD, name, unix.O_PATH, true)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.Mount("tmpfs", fdPath(target), "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555")
	}
	return bindReadOnly(unix.AT_FDCWD, "/dev/null", target)
}

// bindUpper binds the private upper layer alone onto the cache's
// directory.
func bindUpper(upper, dirFD int) error {
	tree, err := unix.OpenTree(upper, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("bind the private layer: %w", err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("bind the private layer: %w", err)
	}
	if err := unix.MoveMount(tree, "", dirFD, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("bind the private layer: %w", err)
	}
	return nil
}

// hideLayers lays an empty read-only tmpfs over each cache root's
// layers directory: the command must not write to a mounted overlay's
// upper or work directory behind its back (this run's or another's).
// A layers directory that is not one (a symlink an earlier command left)
// holds no layer: no overlay could use it.
func hideLayers(roots []string) error {
	for _, root := range roots {
		rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cache layers: %w", err)
		}
		fd, err := openIn(rootFD, ".layers", unix.O_PATH|unix.O_DIRECTORY, true)
		unix.Close(rootFD)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			continue
		case err != nil:
			return fmt.Errorf("cache layers: %w", err)
		}
		err = unix.Mount("tmpfs", fdPath(fd), "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555")
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("hide cache layers: %w", err)
		}
	}
	return nil
}

// addCacheRules grants every right on each cache mounted in the helper:
// an overlay's inodes are not the cache root's.
func addCacheRules(rs *landlock.Ruleset, s *wire.SetupMsg, all landlock.Access) error {
	for _, m := range s.Caches {
		if m.Mounted == "" {
			continue
		}
		rootFD, err := unix.Open(m.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cache %s: %w", m.Name, err)
		}
		fd, err := openIn(rootFD, m.Dir, unix.O_PATH|unix.O_DIRECTORY, false)
		unix.Close(rootFD)
		if err != nil {
			return fmt.Errorf("cache %s: %w", m.Name, err)
		}
		err = rs.AddFD(fd, all)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("cache %s: %w", m.Name, err)
		}
	}
	return nil
}

// openIn opens rel ("" or "." for dirFD itself) beneath dirFD with no
// symlink or magic link anywhere on the way, and with sameMount no mount
// crossed either.
func openIn(dirFD int, rel string, flags int, sameMount bool) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags) | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if sameMount {
		how.Resolve |= unix.RESOLVE_NO_XDEV
	}
	return unix.Openat2(dirFD, rel, &how)
}

func fdPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }
