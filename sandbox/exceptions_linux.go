package sandbox

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// Exception is one granted access a retried run adds, exactly: one
// operation on one object, identified by its path and inode.
type Exception struct {
	// Operation is read_file, execute, write_file, truncate or make_reg.
	Operation boundary.Operation
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

// ErrGrantTooLarge means a file granted for writing is larger than the
// copy the command writes may be (maxGrantCopy): the exception is not
// applied.
var ErrGrantTooLarge = errors.New("the granted file is too large to copy")

// ErrGrantBeyondCaller means the caller's own rights refuse what was
// granted (a file to create in a directory the caller may not write):
// a grant lifts the sandbox's rule, never the caller's permissions, so
// the exception is not applied.
var ErrGrantBeyondCaller = errors.New("the caller's own rights refuse the granted operation")

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
func Grantable(surface boundary.Surface, op boundary.Operation) (bool, string) {
	if surface != boundary.Filesystem {
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
	// host, for a grant to write, is the granted file itself (O_PATH,
	// identity checked): the command writes a copy (source), whose
	// content goes back into this file when the run ends, so the file's
	// mode, owner, times and extended attributes are never the
	// command's to change. Nil for every other object (the zero value
	// must name no descriptor: 0 is stdin).
	host *os.File
	// copied is the digest of what the copy held when the command
	// started: a copy still holding it was not written, and nothing goes
	// back (a change made on the host meanwhile stays).
	copied [sha256.Size]byte
}

// maxGrantCopy bounds a file granted for writing: it is copied before
// the command starts, and back after.
const maxGrantCopy = 1 << 30

// openExceptions opens each exception's object without following any
// symlink and checks it is the granted one; for make_reg it creates the
// file (it must not exist), as the caller, with the caller's umask, so
// the retry writes exactly that inode. Descriptors belong to the caller.
func openExceptions(es []Exception, umask uint32) ([]openedException, error) {
	var out []openedException
	fail := func(err error) ([]openedException, error) {
		for _, o := range out {
			unix.Close(o.fd)
		}
		return nil, err
	}
	for _, e := range es {
		if ok, why := Grantable(boundary.Filesystem, e.Operation); !ok {
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
			f, err := unix.Openat(dir, filepath.Base(e.Path), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666&^umask&0o777)
			unix.Close(dir)
			if errors.Is(err, unix.EEXIST) {
				return fail(fmt.Errorf("sandbox: grant to create %s: %w (it exists now)", e.Path, ErrGrantStale))
			}
			if ownRights(err) {
				// The grant lifts the sandbox's rule, never the caller's
				// own permissions: nothing here may create what the
				// caller could not.
				return fail(fmt.Errorf("sandbox: grant to create %s: %w: %w", e.Path, ErrGrantBeyondCaller, err))
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

// ownRights reports a create the caller's own rights refused.
func ownRights(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)
}

// closeExceptions releases the supervisor's descriptors.
func closeExceptions(es []openedException) {
	for _, o := range es {
		unix.Close(o.fd)
		if o.host != nil {
			o.host.Close()
		}
	}
}

// copyWrites gives each grant to write a copy of its file, in dir: the
// command writes the copy, shown at the file's path, and writeBack puts
// its content into the file after the run. A writable mount of the file
// itself would let the command change its mode, owner, times and
// extended attributes too, which Landlock does not restrict. The copy is
// writable by any uid (the command's may be any) and reachable only
// through its mount (dir is in sandboxd's state).
func copyWrites(es []openedException, dir string) error {
	for i := range es {
		o := &es[i]
		if !wire.Writes(string(o.Operation)) || o.source != "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("sandbox: grant copies: %w", err)
		}
		var hst unix.Stat_t
		if err := unix.Fstat(o.fd, &hst); err != nil {
			return fmt.Errorf("sandbox: grant for %s: %w", o.Path, err)
		}
		if hst.Size > maxGrantCopy {
			return fmt.Errorf("sandbox: grant for %s: %w (%d bytes: a file granted for writing is copied, and at most %d bytes are)", o.Path, ErrGrantTooLarge, hst.Size, int64(maxGrantCopy))
		}
		src := filepath.Join(dir, fmt.Sprintf("grant-%d", i))
		sum, err := copyContent(fmt.Sprintf("/proc/self/fd/%d", o.fd), src)
		if err != nil {
			return fmt.Errorf("sandbox: grant for %s: copy: %w", o.Path, err)
		}
		o.copied = sum
		if err := os.Chmod(src, 0o666); err != nil {
			return fmt.Errorf("sandbox: grant for %s: copy: %w", o.Path, err)
		}
		fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("sandbox: grant for %s: copy: %w", o.Path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return fmt.Errorf("sandbox: grant for %s: copy: %w", o.Path, err)
		}
		o.host, o.fd, o.source = os.NewFile(uintptr(o.fd), o.Path), fd, src
		o.Dev, o.Ino = st.Dev, st.Ino
	}
	return nil
}

// copyContent copies the regular file from into a new file to and
// returns the digest of what it copied.
func copyContent(from, to string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	in, err := os.Open(from)
	if err != nil {
		return sum, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return sum, err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, out.Close()
}

// digest is the SHA-256 of the file at p.
func digest(p string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(p)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// writeBack puts each copy the command wrote into its granted file, in
// place (the inode, and so its mode, owner and extended attributes,
// stay; only a content change moves its times), when it differs. It
// runs once every process of the run is gone. A copy the command did
// not write goes nowhere; one whose file was replaced or removed on the
// host during the run is kept below keepRel in the state directory
// stateDir rather than written into a file nobody sees any more.
//
// The error joins one public error per file that was not written back:
// its sentence names the granted file and, where it is kept, the copy
// relative to the state directory; its cause is for the log.
func writeBack(es []openedException, stateDir, keepRel string) error {
	var errs []error
	for i, o := range es {
		if o.host == nil {
			continue
		}
		kept := filepath.Join(keepRel, fmt.Sprintf("%s-%d", filepath.Base(o.Path), i))
		if err := writeBackOne(o, filepath.Join(stateDir, kept), kept); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeBackOne is writeBack for one copy, kept at keep (keepRel relative
// to the state directory) when its file is gone.
func writeBackOne(o openedException, keep, keepRel string) error {
	cause := func(err error) error { return fmt.Errorf("sandbox: grant for %s: write back: %w", o.Path, err) }
	err := writeBackContent(o)
	if err == nil {
		return nil
	}
	var gone *goneError
	if !errors.As(err, &gone) {
		return publicerr.Errorf(cause(err), "what the command wrote to the granted file %s could not be written back (%s)", o.Path, publicerr.Reason(err))
	}
	if mkErr := os.MkdirAll(filepath.Dir(keep), 0o700); mkErr != nil {
		return publicerr.Errorf(cause(fmt.Errorf("%w; keep the command's content: %w", err, mkErr)),
			"%s; what the command wrote to it could not be kept (%s)", gone.public(o.Path), publicerr.Reason(mkErr))
	}
	if mvErr := os.Rename(o.source, keep); mvErr != nil {
		return publicerr.Errorf(cause(fmt.Errorf("%w; keep the command's content: %w", err, mvErr)),
			"%s; what the command wrote to it could not be kept (%s)", gone.public(o.Path), publicerr.Reason(mvErr))
	}
	return publicerr.Errorf(cause(fmt.Errorf("%w: the command's content is kept in %s", err, keep)),
		"%s; what the command wrote to it is kept in sandboxd's state directory, as %s", gone.public(o.Path), keepRel)
}

// goneError: the granted file is no longer the one the command was
// given.
type goneError struct {
	replaced bool
	err      error // why it could not be opened, when it is gone
}

func (e *goneError) Error() string {
	if e.replaced {
		return "the file was replaced on the host during the run"
	}
	return fmt.Sprintf("the file was removed or replaced on the host during the run (%v)", e.err)
}

func (e *goneError) Unwrap() error { return e.err }

// public is the error's sentence for the granted file path.
func (e *goneError) public(path string) string {
	if e.replaced {
		return "the granted file " + path + " was replaced on the host during the run"
	}
	return "the granted file " + path + " was removed or replaced on the host during the run (" + publicerr.Reason(e.err) + ")"
}

// writeBackContent writes the copy's content into the granted file, or
// returns a *goneError when that file is gone.
func writeBackContent(o openedException) error {
	if sum, err := digest(o.source); err != nil {
		return err
	} else if sum == o.copied {
		return nil // the command did not write it
	}
	if err := stillThere(o); err != nil {
		return err
	}
	now, err := os.Open(o.source)
	if err != nil {
		return err
	}
	defer now.Close()
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", o.host.Fd()), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if same, err := sameContent(now, f); err != nil || same {
		return err
	}
	st, err := now.Stat()
	if err != nil {
		return err
	}
	// Reserve the space first: a disk that fills up fails here, before
	// a byte of the file changed, not halfway through it.
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, st.Size()); err != nil && st.Size() > 0 &&
		!errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("the file was left as it was: %w", err) // ENOSPC says it
	}
	if _, err := now.Seek(0, io.SeekStart); err != nil {
		return err
	}
	n, err := io.Copy(io.NewOffsetWriter(f, 0), now)
	if err != nil {
		return err
	}
	return f.Truncate(n)
}

// stillThere checks that the granted path still names the granted file.
func stillThere(o openedException) error {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, o.Path, &how)
	if err != nil {
		return &goneError{err: err}
	}
	defer unix.Close(fd)
	var now, held unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if err := unix.Fstat(int(o.host.Fd()), &held); err != nil {
		return err
	}
	if now.Dev != held.Dev || now.Ino != held.Ino {
		return &goneError{replaced: true}
	}
	return nil
}

// sameContent reports whether two regular files hold the same bytes,
// reading both in step (a granted file may be large).
func sameContent(a, b *os.File) (bool, error) {
	sa, err := a.Stat()
	if err != nil {
		return false, err
	}
	sb, err := b.Stat()
	if err != nil {
		return false, err
	}
	if sa.Size() != sb.Size() {
		return false, nil
	}
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for off := int64(0); ; {
		na, errA := a.ReadAt(ba, off)
		if errA != nil && errA != io.EOF {
			return false, errA
		}
		nb, errB := b.ReadAt(bb[:na], off)
		if errB != nil && errB != io.EOF {
			return false, errB
		}
		if nb != na || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if errA == io.EOF {
			n, _ := b.ReadAt(bb[:1], off+int64(na))
			return n == 0, nil
		}
		off += int64(na)
	}
}
