package landlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
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

// Carve grants access to each root except the denied paths strictly below
// it. Directories that had to be carved (those with a denial below them)
// get carvedAccess themselves, which Landlock applies to their whole
// hierarchy: ReadDir there lets a command list every directory, including
// a denied one, while the contents of denied files stay unreadable. Deny entries are absolute and clean; the last element may be a
// filepath.Match pattern. Roots are explicit grants: a deny equal to or
// above a root does not remove it (the strict profile denies $HOME and
// grants a few paths inside it). Symlinks are never given rules; access
// through them is checked on their targets.
func (r *Ruleset) Carve(roots, deny []string, access, carvedAccess Access) error {
	d := newDenySet(deny)
	for _, root := range roots {
		if !d.below[root] {
			if err := r.AddPath(root, access); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			continue
		}
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // an allow-listed path that does not exist grants nothing
			}
			return fmt.Errorf("landlock: open %s: %w", root, err)
		}
		if carvedAccess != 0 {
			if err := r.addFD(fd, true, carvedAccess); err != nil {
				unix.Close(fd)
				return fmt.Errorf("%w (%s)", err, root)
			}
		}
		err = r.carveDir(fd, root, d, access, carvedAccess)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// carveDir adds a rule for every entry of the directory open at dirFD
// except denied ones, descending into entries with denials below them.
// It takes ownership of nothing: dirFD stays open.
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
		name := e.Name()
		p := filepath.Join(dir, name)
		if d.denied(dir, p, name) {
			continue
		}
		typ := e.Type()
		if typ&fs.ModeSymlink != 0 {
			continue
		}
		if typ.IsDir() && d.below[p] {
			fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return fmt.Errorf("landlock: open %s: %w", p, err)
			}
			if carvedAccess != 0 {
				if err := r.addFD(fd, true, carvedAccess); err != nil {
					unix.Close(fd)
					return fmt.Errorf("%w (%s)", err, p)
				}
			}
			err = r.carveDir(fd, p, d, access, carvedAccess)
			unix.Close(fd)
			if err != nil {
				return err
			}
			continue
		}
		fd, err := unix.Openat(dirFD, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("landlock: open %s: %w", p, err)
		}
		err = r.addFD(fd, typ.IsDir(), access)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("%w (%s)", err, p)
		}
	}
	return nil
}

// denySet indexes denied paths for the carve-out.
type denySet struct {
	exact map[string]bool     // denied paths
	globs map[string][]string // parent directory -> patterns for its entries
	below map[string]bool     // directories with a denial strictly below them
}

func newDenySet(deny []string) *denySet {
	d := &denySet{exact: map[string]bool{}, globs: map[string][]string{}, below: map[string]bool{}}
	for _, p := range deny {
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) || p == "/" {
			continue
		}
		parent, base := filepath.Dir(p), filepath.Base(p)
		if strings.ContainsAny(base, `*?[`) {
			d.globs[parent] = append(d.globs[parent], base)
		} else {
			d.exact[p] = true
		}
		for a := parent; ; a = filepath.Dir(a) {
			d.below[a] = true
			if a == "/" {
				break
			}
		}
	}
	return d
}

func (d *denySet) denied(dir, path, name string) bool {
	if d.exact[path] {
		return true
	}
	for _, pat := range d.globs[dir] {
		if ok, _ := filepath.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// Covers reports whether root has a denied path at or below it, which a
// writable root cannot honour (its rights are recursive).
func Covers(root string, deny []string) (string, bool) {
	root = filepath.Clean(root)
	for _, p := range deny {
		p = filepath.Clean(p)
		if p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/") {
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
