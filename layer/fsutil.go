package layer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// beneath resolves inside a directory descriptor and never leaves it: no
// "..", no absolute paths, no symlinks (a symlink anywhere in the path is
// an error, not followed), no magic links and no crossing into another
// mount.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openBeneath opens rel below dir with flags (O_CLOEXEC and O_NOFOLLOW
// added). rel "" or "." is dir itself.
func openBeneath(dir int, rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: beneath}
	for {
		fd, err := unix.Openat2(dir, rel, &how)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue // a concurrent rename elsewhere: retry, as openat2(2) says
		}
		return fd, err
	}
}

// parentOf opens the directory holding rel (as O_PATH) and returns it
// with rel's last element.
func parentOf(root int, rel string) (int, string, error) {
	fd, err := openBeneath(root, filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return fd, filepath.Base(rel), nil
}

// lstatAt is statx of name in dir without following a final symlink.
func lstatAt(dir int, name string) (unix.Statx_t, error) {
	var st unix.Statx_t
	err := unix.Statx(dir, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT,
		unix.STATX_BASIC_STATS|unix.STATX_BTIME|unix.STATX_MNT_ID, &st)
	return st, err
}

// lstatRel is lstatAt for a path below root.
func lstatRel(root int, rel string) (unix.Statx_t, error) {
	if rel == "" || rel == "." {
		return lstatAt(root, ".")
	}
	pfd, name, err := parentOf(root, rel)
	if err != nil {
		return unix.Statx_t{}, err
	}
	defer unix.Close(pfd)
	return lstatAt(pfd, name)
}

func fileType(st *unix.Statx_t) uint32 { return uint32(st.Mode) & unix.S_IFMT }

func nanos(t unix.StatxTimestamp) int64 { return t.Sec*1e9 + int64(t.Nsec) }

// readDirNames lists a directory descriptor's entries (without . and ..).
// The descriptor's offset is consumed.
func readDirNames(fd int) ([]string, error) {
	d, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}

// isEmptyDir reports whether the directory fd has no entries.
func isEmptyDir(fd int) (bool, error) {
	names, err := readDirNames(fd)
	return len(names) == 0, err
}

// removeBeneath removes rel below root and, if it is a directory,
// everything in it, never following a symlink. A missing rel is not an
// error.
func removeBeneath(root int, rel string) error {
	pfd, name, err := parentOf(root, rel)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return removeAt(pfd, name)
}

func removeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := openBeneath(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := readDirNames(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil {
			unix.Close(fd)
			return err
		}
	}
	unix.Close(fd)
	err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// changedSince reports whether rel below root, or anything inside it when
// it is a directory, changed after since (nanoseconds, wall clock).
// A tree that cannot be read counts as changed.
func changedSince(root int, rel string, since int64) bool {
	st, err := lstatRel(root, rel)
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if err != nil {
		return true
	}
	if nanos(st.Ctime) > since {
		return true
	}
	if fileType(&st) != unix.S_IFDIR {
		return false
	}
	fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return true
	}
	for _, n := range names {
		if changedSince(fd, n, since) {
			return true
		}
	}
	return false
}

// copyFD copies what is left of the file src into dst through buf. size
// is src's size as statx gave it, or -1: a read that returns less than
// asked for and brings the count to size is the end (a regular file
// returns less only at its end), which spares small files a second read.
func copyFD(dst, src int, size int64, buf []byte) (int64, error) {
	var total int64
	for {
		n, err := unix.Read(src, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		if err := writeAll(dst, buf[:n]); err != nil {
			return total, err
		}
		total += int64(n)
		if n < len(buf) && total == size {
			return total, nil
		}
	}
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

// copyBuffer is the size of one read and one write when copying.
// copy_file_range does not cross from the layer's tmpfs to another file
// system, and sendfile moves page by page; large buffers are fastest (as
// for cp).
const copyBuffer = 1 << 20

// relJoin joins workspace-relative paths.
func relJoin(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// validRel accepts a clean relative path that stays below its root.
func validRel(rel string) error {
	if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("bad relative path %q", rel)
	}
	return nil
}
