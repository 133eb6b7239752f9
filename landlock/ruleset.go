package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/sandboxd/sandboxd/pathtree"
	"golang.org/x/sys/unix"
)

// Ruleset is a Landlock ruleset under construction. It is not safe for
// concurrent use.
type Ruleset struct {
	fd    int
	sup   Support
	rules int
}

// Options choose what a new ruleset handles beyond every filesystem right.
type Options struct {
	// RestrictNet handles TCP (and UDP where the ABI can) without adding
	// any port rule, so nothing may connect or bind. Used when there is no
	// network namespace.
	RestrictNet bool
}

// New creates a ruleset that handles every filesystem right and scope of
// the running ABI.
func New(sup Support, opts Options) (*Ruleset, error) {
	if sup.ABI < 1 {
		return nil, ErrUnavailable
	}
	attr := llsys.RulesetAttr{HandledAccessFS: uint64(sup.FS), Scoped: sup.Scoped}
	if opts.RestrictNet {
		if sup.Net == 0 {
			return nil, fmt.Errorf("landlock: ABI %d cannot restrict TCP (needs ABI 4)", sup.ABI)
		}
		attr.HandledAccessNet = sup.Net
	}
	fd, err := llsys.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return nil, fmt.Errorf("landlock: create ruleset: %w", err)
	}
	return &Ruleset{fd: fd, sup: sup}, nil
}

// Adopt wraps a ruleset descriptor received from another process.
func Adopt(fd int, sup Support) *Ruleset { return &Ruleset{fd: fd, sup: sup} }

// FD returns the ruleset descriptor.
func (r *Ruleset) FD() int { return r.fd }

// Rules returns how many rules this process added.
func (r *Ruleset) Rules() int { return r.rules }

// Close releases the descriptor.
func (r *Ruleset) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// AddFD adds a rule for the object fd refers to. On a non-directory only
// the file rights of access are kept.
func (r *Ruleset) AddFD(fd int, access Access) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock: stat rule target: %w", err)
	}
	return r.addFD(fd, st.Mode&unix.S_IFMT == unix.S_IFDIR, access)
}

func (r *Ruleset) addFD(fd int, dir bool, access Access) error {
	access &= r.sup.FS
	if !dir {
		access &= fileRights
	}
	if access == 0 {
		return nil
	}
	attr := llsys.PathBeneathAttr{ParentFd: fd, AllowedAccess: uint64(access)}
	if err := llsys.LandlockAddRule(r.fd, unix.LANDLOCK_RULE_PATH_BENEATH, unsafe.Pointer(&attr), 0); err != nil {
		return fmt.Errorf("landlock: add rule: %w", err)
	}
	r.rules++
	return nil
}

// AddPath adds a rule for path, following symlinks.
func (r *Ruleset) AddPath(path string, access Access) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock: open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := r.AddFD(fd, access); err != nil {
		return fmt.Errorf("%w (%s)", err, path)
	}
	return nil
}

// Carve adds the rules of the carve-out c (see Carveout): each root
// whole, or, with a denial below it, carved. Carved directories get c's
// carved access themselves, which Landlock applies to their whole
// hierarchy: listing there lets a command list every directory,
// including a denied one, while the contents of denied files stay
// unreadable. A root is opened where it resolved (Root.Real); symlinks
// below it are never given rules: access through them is checked on
// their targets.
func (r *Ruleset) Carve(c Carveout) error {
	access, carvedAccess := ReadAccess, c.carvedAccess()
	for _, root := range c.roots {
		if root.Real == "" {
			continue // an allow-listed path that does not resolve grants nothing
		}
		if !c.deny.below[root.Path] {
			if err := r.AddPath(root.Real, access); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			continue
		}
		fd, err := unix.Open(root.Real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("landlock: open %s: %w", root.Path, err)
		}
		if carvedAccess != 0 {
			if err := r.addFD(fd, true, carvedAccess); err != nil {
				unix.Close(fd)
				return fmt.Errorf("%w (%s)", err, root.Path)
			}
		}
		err = r.carveDir(fd, root.Path, c.deny, access, carvedAccess)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// carveDir adds a rule for every entry of the directory open at dirFD
// except denied ones, descending into entries with denials below them
// (denySet.step decides, as for Carveout.Grants). It takes ownership of
// nothing: dirFD stays open.
func (r *Ruleset) carveDir(dirFD int, dir string, d *denySet, access, carvedAccess Access) error {
	// Read the entries through a duplicate so closing the *os.File does not
	// close dirFD.
	dup, err := unix.Dup(dirFD)
	if err != nil {
		return fmt.Errorf("landlock: dup %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(dup), dir)
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("landlock: read %s for the secret carve-out: %w", dir, err)
	}
	for _, e := range entries {
		name, typ := e.Name(), e.Type()
		v := d.step(dir, name, typ.IsDir())
		if v == skipped || typ&fs.ModeSymlink != 0 {
			continue
		}
		if err := r.carveEntry(dirFD, dir, name, v, typ.IsDir(), d, access, carvedAccess); err != nil {
			return err
		}
	}
	return nil
}

// carveEntry adds the rules for one entry of a carved directory: all of
// it (granted), or its own entries (carved).
func (r *Ruleset) carveEntry(dirFD int, dir, name string, v verdict, isDir bool, d *denySet, access, carvedAccess Access) error {
	p := filepath.Join(dir, name)
	flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if v == carved {
		flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	fd, err := unix.Openat(dirFD, name, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("landlock: open %s: %w", p, err)
	}
	defer unix.Close(fd)
	if v == granted {
		if err := r.addFD(fd, isDir, access); err != nil {
			return fmt.Errorf("%w (%s)", err, p)
		}
		return nil
	}
	if carvedAccess != 0 {
		if err := r.addFD(fd, true, carvedAccess); err != nil {
			return fmt.Errorf("%w (%s)", err, p)
		}
	}
	return r.carveDir(fd, p, d, access, carvedAccess)
}

// Covers reports whether root has a denied path at or below it, which a
// writable root cannot honour (its rights are recursive).
func Covers(root string, deny []string) (string, bool) {
	root = filepath.Clean(root)
	for _, p := range deny {
		p = filepath.Clean(p)
		if pathtree.Within(root, p) {
			return p, true
		}
	}
	return "", false
}

// Restrict enforces the ruleset on every thread of the calling process.
// no_new_privs must already be set on all threads.
func Restrict(fd int, flags uint32) error {
	if err := llsys.AllThreadsLandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: restrict self: %w", err)
	}
	return nil
}
