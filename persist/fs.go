package persist

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Info is what the rules need to know of one entry.
type Info struct {
	// Mode is st_mode: the file type (unix.S_IFMT) and permission bits.
	Mode uint32
	// UID and GID own the entry, as the caller will see it on the host.
	UID, GID uint32
	// Size is the length of a regular file or symlink target.
	Size int64
	// Ino and Ctime identify the entry and its last change (0 when the
	// view cannot say, e.g. an entry that exists only in a layer).
	Ino   uint64
	Ctime int64
}

// Type is the entry's file type bits.
func (i Info) Type() uint32 { return i.Mode & unix.S_IFMT }

// IsDir reports a directory.
func (i Info) IsDir() bool { return i.Type() == unix.S_IFDIR }

// IsRegular reports a regular file.
func (i Info) IsRegular() bool { return i.Type() == unix.S_IFREG }

// IsSymlink reports a symbolic link.
func (i Info) IsSymlink() bool { return i.Type() == unix.S_IFLNK }

// FS is a read-only view of a file tree: the host's, or the workspace as a
// commit would leave it. Paths are absolute and clean, and no directory
// on the way to the last element is a symlink (Resolve gives such paths);
// an FS never follows a symlink itself.
type FS interface {
	// Lstat describes the entry at path.
	Lstat(path string) (Info, error)
	// Readlink returns a symlink's target.
	Readlink(path string) (string, error)
	// ReadFile returns at most limit bytes of the regular file at path.
	ReadFile(path string, limit int) ([]byte, error)
	// Searchable reports what access(path, X_OK) would say to the caller
	// for the entry at path (described by info).
	Searchable(path string, info Info) bool
}

// maxLinks is the kernel's limit on symlinks followed in one lookup.
const maxLinks = 40

// Resolve follows every symlink in path (the last element's too, when
// follow is set) the way the kernel would, and returns a path with none.
// A missing last element is not an error (the path is returned as it
// would be created); a missing or non-directory element before it is.
func Resolve(fsys FS, path string, follow bool) (string, error) {
	if !filepath.IsAbs(path) {
		return "", errors.New("persist: relative path " + path)
	}
	links := 0
	done := "/"
	// Not filepath.Clean: "link/.." is the parent of the link's target.
	rest := strings.Split(path, "/")
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, c)
		st, err := fsys.Lstat(next)
		if err != nil {
			if len(rest) == 0 && errors.Is(err, unix.ENOENT) {
				return next, nil
			}
			return "", err
		}
		if st.IsSymlink() && (len(rest) > 0 || follow) {
			links++
			if links > maxLinks {
				return "", unix.ELOOP
			}
			target, err := fsys.Readlink(next)
			if err != nil {
				return "", err
			}
			if target == "" {
				return "", unix.ENOENT
			}
			if filepath.IsAbs(target) {
				done = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		if len(rest) > 0 && !st.IsDir() {
			return "", unix.ENOTDIR
		}
		done = next
	}
	return done, nil
}

// ResolveCreated is where a write to path lands for a tool that makes
// the directories it misses (as mkdir -p, then the file): its deepest
// ancestor that is there, every link of it followed as Resolve does, and
// the missing rest below it. Any error but a missing element is returned:
// a path that cannot be resolved is not judged by its spelling.
func ResolveCreated(fsys FS, path string) (string, error) {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		real, err := Resolve(fsys, p, true)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, unix.ENOENT) || p == "/" {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// Stat is Lstat of path with every symlink followed.
func Stat(fsys FS, path string) (string, Info, error) {
	p, err := Resolve(fsys, path, true)
	if err != nil {
		return "", Info{}, err
	}
	st, err := fsys.Lstat(p)
	return p, st, err
}

// readFollow reads a regular file at path, following symlinks, as git's
// open(2) would.
func readFollow(fsys FS, path string, limit int) ([]byte, error) {
	p, st, err := Stat(fsys, path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, unix.EISDIR
	}
	if !st.IsRegular() {
		return nil, unix.EINVAL // a fifo or device: git would block or fail
	}
	return fsys.ReadFile(p, limit)
}

// Host is the host's own file tree, as the calling process sees it.
type Host struct{}

// Lstat implements FS.
func (Host) Lstat(path string) (Info, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return Info{}, err
	}
	return infoOf(&st), nil
}

func infoOf(st *unix.Stat_t) Info {
	return Info{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size, Ino: st.Ino, Ctime: st.Ctim.Nano()}
}

// Readlink implements FS.
func (Host) Readlink(path string) (string, error) { return os.Readlink(path) }

// ReadFile implements FS.
func (Host) ReadFile(path string, limit int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return ReadRegular(fd, path, limit)
}

// ReadRegular reads at most limit bytes from fd, which it closes, when it
// is a regular file (a fifo or device is never read: git would block).
func ReadRegular(fd int, name string, limit int) ([]byte, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, unix.EINVAL
	}
	return io.ReadAll(io.LimitReader(f, int64(limit)))
}

// Searchable implements FS with access(2) itself.
func (Host) Searchable(path string, _ Info) bool {
	return unix.Faccessat(unix.AT_FDCWD, path, unix.X_OK, 0) == nil
}

// ReadDir lists a directory's entry names (Host is a lister).
func (Host) ReadDir(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// Open implements Opener.
func (Host) Open(path string) (OpenFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return OpenRegular(f)
}

// OpenRegular makes an OpenFile of f when it is a regular file (and closes
// it when it is not).
func OpenRegular(f *os.File) (OpenFile, error) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = unix.EINVAL
		}
		return nil, err
	}
	return sizedFile{f, st.Size()}, nil
}

type sizedFile struct {
	*os.File
	size int64
}

func (f sizedFile) Size() int64 { return f.size }

// walk calls fn for every entry below dir in fsys (depth-first, at most
// maxDepth levels, never through a symlink); fn's false for a directory
// skips what is below it. An FS that cannot list walks nothing.
func walk(fsys FS, dir string, maxDepth int, fn func(p string, st Info) bool) {
	l, ok := fsys.(lister)
	if !ok || maxDepth < 0 {
		return
	}
	names, err := l.ReadDir(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		p := dir + "/" + n
		st, err := fsys.Lstat(p)
		if err != nil {
			continue
		}
		if fn(p, st) && st.IsDir() {
			walk(fsys, p, maxDepth-1, fn)
		}
	}
}
