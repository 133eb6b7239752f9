package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// layersDir holds, in a cache root, each cache layer's private layer
// ("upper" and "work") and its lock. The helper hides it inside.
const layersDir = ".layers"

// planCaches decides what the helper mounts for each of the spec's
// cache layers and lays their private layers out on disk. It fills
// r.res.Caches, which the helper's Caches message then amends.
func (r *run) planCaches(setup *wire.SetupMsg) {
	var dirs []string
	r.res.Caches = nil
	check := r.lowerCheck(setup)
	for _, l := range r.spec.CacheLayers {
		res := CacheResult{Name: l.Name, Private: l.Dir, Why: l.Why}
		m, why := r.planCache(l, dirs, check)
		dirs = append(dirs, l.Dir)
		if why != "" {
			res.Why = why
		}
		if m != nil {
			res.Lower, res.Discarded = m.Lower, m.Ephemeral
			setup.Caches = append(setup.Caches, *m)
			r.h.caches.idx = append(r.h.caches.idx, len(r.res.Caches))
		}
		r.res.Caches = append(r.res.Caches, res)
	}
	r.h.caches.res = &r.res.Caches
	if r.wantNS {
		// Hidden whether or not this run mounts an overlay on them:
		// another run's may use them.
		setup.CacheRoots = r.spec.Caches
	}
}

// lowerCheck is what decides, for this run, whether a host cache may be
// a lower layer (see caches.go).
func (r *run) lowerCheck(setup *wire.SetupMsg) lowerCheck {
	spec := &r.spec
	apart := append([]string{spec.Workspace}, spec.Caches...)
	apart = append(append(apart, spec.StateDir), spec.HostCaches.Apart...)
	apart = append(append(apart, spec.RuntimeDir), spec.Writable...)
	c := lowerCheck{reads: r.reads, secrets: spec.HostCaches.Secrets, whole: spec.HostCaches.Whole, apart: apart,
		hidden: append(maskedDirs(spec.RuntimeDir), "/tmp", "/var/tmp", "/dev", "/proc", "/sys"), root: r.root}
	if r.root && spec.Home != "" && slices.Contains(setup.Attach, spec.Home) {
		c.idHome = spec.Home
	}
	return c
}

// planCache is planCaches for one layer: the helper's mount (nil: the
// private directory is used as it is) and why the host cache is not its
// lower layer ("" when it is, or when the spec already said why not).
func (r *run) planCache(l CacheLayer, dirs []string, check lowerCheck) (*wire.CacheMount, string) {
	root, rel, why := r.cacheRoot(l, dirs)
	if why != "" {
		return nil, why
	}
	lower, masks := "", []string(nil)
	if l.Host != "" {
		lower, masks, why = check.host(l.Host)
	}
	if !r.wantNS {
		if lower != "" {
			return nil, "no mount namespace for an overlay"
		}
		return nil, why
	}
	if lower != "" {
		lower, masks, why = check.inside(lower, masks)
	}
	// Without a lower layer, a private layer made earlier is still the
	// private cache.
	m, err := r.layOut(root, rel, l.Name, lower != "")
	if err != nil {
		r.log.Debug("cache layer", "name", l.Name, "err", err)
		if lower != "" {
			return nil, "cannot prepare the private layer (" + publicerr.Reason(err) + ")"
		}
		return nil, why
	}
	if m != nil && lower != "" {
		m.Lower, m.Masks = lower, masks
	}
	return m, why
}

// cacheRoot finds the cache root holding l.Dir and checks the layer.
func (r *run) cacheRoot(l CacheLayer, dirs []string) (root, rel, why string) {
	if !cacheName.MatchString(l.Name) || !filepath.IsAbs(l.Dir) || filepath.Clean(l.Dir) != l.Dir {
		return "", "", "not a valid cache layer"
	}
	for _, d := range dirs {
		if overlaps(d, l.Dir) {
			return "", "", "overlaps another cache layer"
		}
	}
	for _, c := range r.spec.Caches {
		if below, ok := pathtree.Below(c, l.Dir); ok {
			if first, _, _ := strings.Cut(below, "/"); first == layersDir {
				break
			}
			return c, below, ""
		}
	}
	return "", "", "not inside a private cache"
}

// layOut makes the cache layer's private layer on disk, beneath root
// with no symlink followed (earlier commands wrote there), and takes its
// lock. It returns nil when there is nothing to mount: no lower layer
// and no private layer yet, or no lower layer and another run holds it.
// A populated Dir from before layers becomes the upper layer, once.
func (r *run) layOut(root, rel, name string, lower bool) (*wire.CacheMount, error) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootFD)
	layer := layersDir + "/" + name
	if !lower && !existsBeneath(rootFD, layer+"/upper") {
		return nil, nil
	}
	m := &wire.CacheMount{Name: name, Root: root, Dir: rel, Layer: layer}
	layerFD, err := mkdirsBeneath(rootFD, layer)
	if err != nil {
		return nil, err
	}
	defer unix.Close(layerFD)
	locked, err := r.lockLayer(layerFD)
	switch {
	case err != nil:
		return nil, err
	case !locked && !lower:
		return nil, nil
	case !locked:
		m.Layer, m.Ephemeral = "", true
	default:
		err = migrate(rootFD, rel, layerFD)
	}
	if err == nil {
		var fd int
		if fd, err = mkdirsBeneath(rootFD, rel); err == nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// lockLayer takes the layer's lock for the run, or reports that another
// run holds it: an overlay's upper layer must not be shared.
func (r *run) lockLayer(layerFD int) (bool, error) {
	fd, err := openBeneath(layerFD, "lock", unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return false, err
	}
	key, err := keyOf(fd)
	if err != nil {
		unix.Close(fd)
		return false, err
	}
	waited, err := r.spec.Releases.lock(fd, key)
	if waited {
		r.log.Debug("cache layer: waited for a previous run's release", "taken", err == nil)
	}
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	// Released once the helper is gone: its mount namespace holds the
	// overlay on the layer until then, and the run may end before it
	// (helper.wait), while this step runs before the helper's cleanup.
	r.locks = append(r.locks, key)
	r.undo = append(r.undo, func() {
		r.h.kill()
		<-r.h.exited
		r.spec.Releases.unlock(key, fd)
	})
	return true, nil
}

// migrate makes the layer's upper and work directories; a populated
// private directory from before layers is renamed to be the upper one.
func migrate(rootFD int, rel string, layerFD int) error {
	if !existsBeneath(layerFD, "upper") {
		parent, base := filepath.Split(rel)
		pfd, err := openBeneath(rootFD, dirOrDot(parent), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err == nil {
			if !emptyDirBeneath(pfd, base) {
				err = unix.Renameat(pfd, base, layerFD, "upper")
			}
			unix.Close(pfd)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("sandbox: cache layer: %w", err)
		}
	}
	for _, d := range []string{"upper", "work"} {
		if err := unix.Mkdirat(layerFD, d, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("sandbox: cache layer %s: %w", d, err)
		}
	}
	return nil
}

func dirOrDot(parent string) string {
	if parent = strings.TrimSuffix(parent, "/"); parent == "" {
		return "."
	}
	return parent
}

// openBeneath opens rel below dirFD with no symlink, magic link or
// mount crossing anywhere on the way.
func openBeneath(dirFD int, rel string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags) | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	return unix.Openat2(dirFD, rel, &how)
}

// mkdirsBeneath creates rel's missing directories below dirFD (0700)
// and opens it.
func mkdirsBeneath(dirFD int, rel string) (int, error) {
	cur, err := unix.Dup(dirFD)
	if err != nil {
		return -1, err
	}
	for _, el := range strings.Split(rel, "/") {
		if err := unix.Mkdirat(cur, el, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(cur)
			return -1, fmt.Errorf("sandbox: cache directory %s: %w", rel, err)
		}
		next, err := openBeneath(cur, el, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(cur)
		if err != nil {
			return -1, fmt.Errorf("sandbox: cache directory %s: %w", rel, err)
		}
		cur = next
	}
	return cur, nil
}

func existsBeneath(dirFD int, rel string) bool {
	fd, err := openBeneath(dirFD, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err == nil
}

// emptyDirBeneath reports whether name below dirFD is missing, or an
// empty directory.
func emptyDirBeneath(dirFD int, name string) bool {
	fd, err := openBeneath(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return true
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// cacheNotes takes the helper's word on the caches it mounted.
type cacheNotes struct {
	res *[]CacheResult // the run's Result.Caches
	idx []int          // its index for each SetupMsg.Caches entry
}

// note records the helper's Caches message: a cache whose overlay did
// not mount had no lower layer.
func (c *cacheNotes) note(m wire.Message) {
	if c.res == nil || len(m.Caches) != len(c.idx) {
		return
	}
	for i, o := range m.Caches {
		r := &(*c.res)[c.idx[i]]
		if r.Lower != "" && o.Mounted != "overlay" {
			r.Lower, r.Why, r.Discarded = "", o.Why, false
		}
	}
}
