package sandbox

import (
	"errors"
	"fmt"
	"github.com/sandboxd/sandboxd/grants"
	"path/filepath"

	"github.com/sandboxd/sandboxd/landlock"
	"golang.org/x/sys/unix"
)

// Exception is one granted access a retried run adds, exactly: one
// operation on one object, identified by its path and inode.
type Exception struct {
	// Operation is read_file, execute, write_file, truncate or make_reg.
	Operation grants.Operation
	// Path is the resolved absolute path (no symlink on the way).
	Path string
	// Dev, Ino and Born (birth time, ns) identify the object the grant
	// was for; for make_reg they are zero and the path must not exist yet.
	Dev, Ino uint64
	Born     int64
}

// ErrGrantStale means a granted object is no longer the one that was
// granted (replaced, swapped for a symlink, or, for a create, it now
// exists): the exception is not applied.
var ErrGrantStale = errors.New("the granted object changed")

// Identity returns the inode and birth time of what path names, without
// following a final symlink (a symlink is an object of its own). ok is
// false when nothing is there.
func Identity(path string) (ino uint64, born int64, regular, ok bool) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_TYPE|unix.STATX_BTIME, &stx); err != nil {
		return 0, 0, false, false
	}
	return stx.Ino, bornOf(&stx), stx.Mode&unix.S_IFMT == unix.S_IFREG, true
}

func bornOf(stx *unix.Statx_t) int64 {
	if stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
}

// ErrNotGrantable is returned for operations no exception can express
// exactly: Landlock's create, remove, rename and link rights cover a whole
// directory, and it does not restrict metadata (chmod, chown, utime,
// xattr) at all, so granting any of them would grant more than was asked.
var ErrNotGrantable = errors.New("not grantable exactly")

// Grantable reports whether an operation can be granted exactly, and why
// not.
func Grantable(surface grants.Surface, op grants.Operation) (bool, string) {
	if surface != grants.Filesystem {
		return false, "a direct connection is never granted: connections leave only through the run's egress proxy (HTTP_PROXY, HTTPS_PROXY), which needs namespaces and decides each destination while the connection waits"
	}
	switch op {
	case "read_file", "execute", "write_file", "truncate", "make_reg":
		return true, ""
	case "chmod", "chown", "utime", "xattr":
		return false, "Landlock does not restrict metadata, so a writable mount for it would allow every metadata change"
	default:
		return false, "Landlock grants " + string(op) + " for a whole directory, which is more than one object"
	}
}

// access is the Landlock right an exception grants.
func (e Exception) access() landlock.Access {
	switch e.Operation {
	case "read_file":
		return landlock.AccessReadFile
	case "execute":
		return landlock.AccessExecute | landlock.AccessReadFile
	case "write_file":
		return landlock.AccessWriteFile
	case "make_reg":
		// The file did not exist; sandboxd created it empty, and the
		// command's creating open (usually O_TRUNC too) writes it.
		return landlock.AccessWriteFile | landlock.AccessTruncate
	case "truncate":
		return landlock.AccessTruncate
	}
	return 0
}

// openedException is an exception whose object the supervisor holds.
type openedException struct {
	Exception
	fd int // O_PATH, identity checked
	// source is set for a copy shown at Path: the file fd names.
	source string
}

// openExceptions opens each exception's object without following any
// symlink and checks it is the granted one; for make_reg it creates the
// file (it must not exist), as the caller, so the retry writes exactly
// that inode. Descriptors belong to the caller.
func openExceptions(es []Exception) ([]openedException, error) {
	var out []openedException
	fail := func(err error) ([]openedException, error) {
		for _, o := range out {
			unix.Close(o.fd)
		}
		return nil, err
	}
	for _, e := range es {
		if ok, why := Grantable(grants.Filesystem, e.Operation); !ok {
			return fail(fmt.Errorf("sandbox: %s %s: %w: %s", e.Operation, e.Path, ErrNotGrantable, why))
		}
		if !filepath.IsAbs(e.Path) || filepath.Clean(e.Path) != e.Path {
			return fail(fmt.Errorf("sandbox: exception path %q is not absolute and clean", e.Path))
		}
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		if e.Operation == "make_reg" {
			dirHow := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
			dir, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(e.Path), &dirHow)
			if err != nil {
				return fail(fmt.Errorf("sandbox: grant for %s: parent: %w", e.Path, err))
			}
			f, err := unix.Openat(dir, filepath.Base(e.Path), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			unix.Close(dir)
			if errors.Is(err, unix.EEXIST) {
				return fail(fmt.Errorf("sandbox: grant to create %s: %w (it exists now)", e.Path, ErrGrantStale))
			}
			if err != nil {
				return fail(fmt.Errorf("sandbox: grant to create %s: %w", e.Path, err))
			}
			unix.Close(f)
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, e.Path, &how)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT) {
			return fail(fmt.Errorf("sandbox: grant for %s: %w (%v)", e.Path, ErrGrantStale, err))
		}
		if err != nil {
			return fail(fmt.Errorf("sandbox: grant for %s: %w", e.Path, err))
		}
		var stx unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_TYPE|unix.STATX_BTIME, &stx); err != nil {
			unix.Close(fd)
			return fail(fmt.Errorf("sandbox: grant for %s: %w", e.Path, err))
		}
		if stx.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			return fail(fmt.Errorf("sandbox: grant for %s: %w (not a regular file now)", e.Path, ErrGrantStale))
		}
		if e.Operation != "make_reg" && (stx.Ino != e.Ino || (e.Born != 0 && bornOf(&stx) != e.Born)) {
			unix.Close(fd)
			return fail(fmt.Errorf("sandbox: grant for %s: %w (another object is there now)", e.Path, ErrGrantStale))
		}
		o := openedException{Exception: e, fd: fd}
		o.Dev, o.Ino = unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino
		out = append(out, o)
	}
	return out, nil
}

// closeExceptions releases the supervisor's descriptors.
func closeExceptions(es []openedException) {
	for _, o := range es {
		unix.Close(o.fd)
	}
}
