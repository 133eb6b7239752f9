package layer

import (
	"errors"
	"os"
	"strings"

	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/persist"
	"golang.org/x/sys/unix"
)

// finalFS is the workspace as the commit would leave it, for the
// persistence rules: an entry of the layer when it has one (a whiteout
// means none; below an opaque directory the workspace's entries are
// gone), else the workspace's. Paths outside the workspace are the
// host's. It implements persist.FS.
type finalFS struct {
	ws        string // the workspace path
	wsFD      int    // the workspace, O_PATH
	upper     int    // the layer's upper directory
	chown     bool   // the commit runs as root (reads the layer as it is)
	src       Source // for owners
	upperStat map[string]upperEntry
}

// upperEntry is what the layer holds at a workspace-relative path.
type upperEntry struct {
	st      unix.Statx_t
	present bool // an entry (not a whiteout) is there
	found   bool // the layer has something there (entry or whiteout)
	opaque  bool // a directory that hides what the workspace has below
	err     error
}

func newFinalFS(ws string, wsFD, upper int, src Source, chown bool) *finalFS {
	return &finalFS{ws: ws, wsFD: wsFD, upper: upper, src: src, chown: chown, upperStat: map[string]upperEntry{}}
}

// rel maps an absolute path into the workspace ("" for the workspace
// itself); ok is false for paths outside it.
func (f *finalFS) rel(p string) (string, bool) {
	return pathtree.Rel(f.ws, p)
}

func (f *finalFS) inUpper(rel string) upperEntry {
	if e, ok := f.upperStat[rel]; ok {
		return e
	}
	var e upperEntry
	st, err := lstatRel(f.upper, rel)
	switch {
	case err == nil:
		e.found, e.st = true, st
		e.present = !(fileType(&st) == unix.S_IFCHR && st.Rdev_major == 0 && st.Rdev_minor == 0)
		if e.present && fileType(&st) == unix.S_IFDIR {
			if fd, err := openBeneath(f.upper, rel, unix.O_RDONLY|unix.O_DIRECTORY); err == nil {
				var buf [4]byte
				if n, err := unix.Fgetxattr(fd, opaqueXattr, buf[:]); err == nil && n == 1 && buf[0] == 'y' {
					e.opaque = true
				}
				unix.Close(fd)
			}
		}
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
	default:
		e.err = err
	}
	f.upperStat[rel] = e
	return e
}

// where says which tree holds rel: the layer (upper), the workspace
// (lower), or neither (ENOENT, ENOTDIR).
func (f *finalFS) where(rel string) (fromUpper bool, st unix.Statx_t, err error) {
	if rel == "" {
		st, err := lstatAt(f.wsFD, ".")
		return false, st, err
	}
	parts := strings.Split(rel, "/")
	lower := true
	for i := 1; i <= len(parts); i++ {
		q := strings.Join(parts[:i], "/")
		e := f.inUpper(q)
		if e.err != nil {
			return false, st, e.err
		}
		if !e.found {
			if !lower {
				return false, st, unix.ENOENT
			}
			// Nothing of the layer below here: the workspace decides.
			st, err := lstatRel(f.wsFD, rel)
			return false, st, err
		}
		if !e.present {
			return false, st, unix.ENOENT
		}
		if i == len(parts) {
			return true, e.st, nil
		}
		if fileType(&e.st) != unix.S_IFDIR {
			return false, st, unix.ENOTDIR
		}
		if e.opaque {
			lower = false
		}
	}
	return false, st, unix.ENOENT
}

// Lstat implements persist.FS.
func (f *finalFS) Lstat(p string) (persist.Info, error) {
	rel, ok := f.rel(p)
	if !ok {
		return persist.Host{}.Lstat(p)
	}
	up, st, err := f.where(rel)
	if err != nil {
		return persist.Info{}, err
	}
	info := persist.Info{Mode: uint32(st.Mode), UID: st.Uid, GID: st.Gid, Size: int64(st.Size), Ino: st.Ino, Ctime: nanos(st.Ctime)}
	if up {
		info.UID, info.GID = uint32(mapID(int(st.Uid), f.src.HostUID, f.src.UID)), uint32(mapID(int(st.Gid), f.src.HostGID, f.src.GID))
		info.Ino, info.Ctime = 0, 0
	}
	return info, nil
}

func mapID(id, host, to int) int {
	if id == host {
		return to
	}
	return id
}

func (f *finalFS) root(rel string) (int, error) {
	up, _, err := f.where(rel)
	if err != nil {
		return -1, err
	}
	if up {
		return f.upper, nil
	}
	return f.wsFD, nil
}

// Readlink implements persist.FS.
func (f *finalFS) Readlink(p string) (string, error) {
	rel, ok := f.rel(p)
	if !ok {
		return persist.Host{}.Readlink(p)
	}
	root, err := f.root(rel)
	if err != nil {
		return "", err
	}
	pfd, name, err := parentOf(root, rel)
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(pfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// ReadFile implements persist.FS.
func (f *finalFS) ReadFile(p string, limit int) ([]byte, error) {
	rel, ok := f.rel(p)
	if !ok {
		return persist.Host{}.ReadFile(p, limit)
	}
	root, err := f.root(rel)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if errors.Is(err, unix.EACCES) && root == f.upper && !f.chown {
		// The command made its own file unreadable; the layer is ours.
		if pfd, name, perr := parentOf(f.upper, rel); perr == nil {
			if st, serr := lstatAt(pfd, name); serr == nil {
				unix.Fchmodat(pfd, name, uint32(st.Mode)&0o7777|0o400, 0)
			}
			unix.Close(pfd)
		}
		fd, err = openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	}
	if err != nil {
		return nil, err
	}
	return persist.ReadRegular(fd, p, limit)
}

// Searchable implements persist.FS: the workspace's own entries by
// access(2); the layer's conservatively (a directory, or any execute
// bit), as if the caller owned them.
func (f *finalFS) Searchable(p string, info persist.Info) bool {
	rel, ok := f.rel(p)
	if !ok {
		return persist.Host{}.Searchable(p, info)
	}
	if up, _, err := f.where(rel); err == nil && up {
		return info.IsDir() || info.Mode&0o111 != 0
	}
	return persist.Host{}.Searchable(p, info)
}

// InLayer implements persist.Layered: the entry at p comes from the layer.
func (f *finalFS) InLayer(p string) bool {
	rel, ok := f.rel(p)
	if !ok || rel == "" {
		return false
	}
	up, _, err := f.where(rel)
	return err == nil && up
}

// LayerNames implements persist.Layered: what the layer holds in the
// directory p (whiteouts left out).
func (f *finalFS) LayerNames(p string) ([]string, error) {
	rel, ok := f.rel(p)
	if !ok {
		return nil, unix.ENOENT
	}
	if rel != "" {
		if up, st, err := f.where(rel); err != nil || !up || fileType(&st) != unix.S_IFDIR {
			return nil, unix.ENOENT
		}
	}
	fd, err := openBeneath(f.upper, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if e := f.inUpper(relJoin(rel, n)); e.present {
			out = append(out, n)
		}
	}
	return out, nil
}

// Open implements persist.Opener.
func (f *finalFS) Open(p string) (persist.OpenFile, error) {
	rel, ok := f.rel(p)
	if !ok {
		return persist.Host{}.Open(p)
	}
	root, err := f.root(rel)
	if err != nil {
		return nil, err
	}
	fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return persist.OpenRegular(os.NewFile(uintptr(fd), p))
}

// ReadDir lists a directory of the final tree (the layer's entries and the
// workspace's that it does not hide).
func (f *finalFS) ReadDir(p string) ([]string, error) {
	rel, ok := f.rel(p)
	if !ok {
		return persist.Host{}.ReadDir(p)
	}
	seen := map[string]bool{}
	var out []string
	if up, err := f.LayerNames(p); err == nil {
		for _, n := range up {
			seen[n] = true
			out = append(out, n)
		}
	}
	if fd, err := openBeneath(f.wsFD, rel, unix.O_RDONLY|unix.O_DIRECTORY); err == nil {
		names, _ := readDirNames(fd)
		unix.Close(fd)
		for _, n := range names {
			if !seen[n] {
				if _, err := f.Lstat(p + "/" + n); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	return out, nil
}
