package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/persist"
)

// Without a layer, git's history is written straight into the
// repository: a commit, the index, a stash or a branch can carry a hook
// or an .envrc the work tree check would refuse, and the user's next
// checkout writes it (see persist/history.go). So before the run, each
// repository's refs, HEADs, reflog sizes and index are remembered; after
// it, when the rules refuse the history the run added, they are put back
// as they were (the new commits stay, unreachable).

// maxIndexCopy bounds an index copied (when it cannot be linked) to put
// back later.
const maxIndexCopy = 64 << 20

// historySnap is one repository's history files before the run.
type historySnap struct {
	gd, common string
	files      map[string][]byte // refs, packed-refs, HEAD and *_HEAD files (absolute) → content
	logs       map[string]int64  // reflogs (absolute) → size
	index      string            // a saved link to (or copy of) the index; "" when none
	indexID    fileID            // the index as it was (zero: none)
}

// snapHistory remembers gd's history files; dir holds the saved index.
func snapHistory(gd, dir string) (*historySnap, error) {
	common, v := persist.CommonDir(persist.Host{}, gd)
	if v != persist.GitDir {
		common = gd
	}
	s := &historySnap{gd: gd, common: common, files: map[string][]byte{}, logs: map[string]int64{}}
	for _, f := range historyRefFiles(gd, common) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s.files[f] = b
	}
	for _, d := range []string{common + "/logs", gd + "/logs"} {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if st, err := e.Info(); err == nil {
					s.logs[p] = st.Size()
				}
			}
			return nil
		})
	}
	idx := gd + "/index"
	if id, st, err := lstatID(idx); err == nil && st.Mode().IsRegular() {
		s.indexID = id
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		saved := filepath.Join(dir, fmt.Sprintf("index-%d", id.ino))
		if err := os.Link(idx, saved); err != nil {
			// git replaces the index by rename, so a link keeps the old
			// one; across file systems it is copied.
			if st.Size() > maxIndexCopy || copyFile(idx, saved) != nil {
				saved = ""
			}
		}
		s.index = saved
	}
	return s, nil
}

// historyRefFiles lists the files that name commits in gd and its common
// directory: every loose ref, packed-refs, HEAD and the other *_HEAD.
func historyRefFiles(gd, common string) []string {
	var out []string
	filepath.WalkDir(common+"/refs", func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	out = append(out, common+"/packed-refs")
	for _, d := range []string{gd, common} {
		names, _ := persist.Host{}.ReadDir(d)
		for _, n := range names {
			if n == "HEAD" || strings.HasSuffix(n, "_HEAD") {
				out = append(out, d+"/"+n)
			}
		}
	}
	return out
}

// changed reports whether the run touched the history files.
func (s *historySnap) changed() bool {
	now := map[string]bool{}
	for _, f := range historyRefFiles(s.gd, s.common) {
		now[f] = true
		b, err := os.ReadFile(f)
		if old, had := s.files[f]; err == nil && (!had || string(old) != string(b)) {
			return true
		}
	}
	for f := range s.files {
		if !now[f] {
			return true
		}
	}
	if id, _, err := lstatID(s.gd + "/index"); (err == nil) != (s.indexID != fileID{}) || id != s.indexID {
		return true
	}
	changedLog := false
	for _, d := range []string{s.common + "/logs", s.gd + "/logs"} {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if st, err := e.Info(); err == nil && st.Size() != s.logs[p] {
					changedLog = true
				}
			}
			return nil
		})
	}
	return changedLog
}

// restore puts the history files back as they were. It writes only
// through real directories of the repository: where the run left a
// symlink on the way, nothing is written (the sweep moves such links out
// first).
func (s *historySnap) restore() error {
	var errs []error
	if p := s.linked(); p != "" {
		return fmt.Errorf("%s is a symlink; the history was not put back", p)
	}
	for _, f := range historyRefFiles(s.gd, s.common) {
		if _, had := s.files[f]; !had {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	for f, b := range s.files {
		if cur, err := os.ReadFile(f); err == nil && string(cur) == string(b) {
			continue
		}
		if err := putBack(f, b); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range []string{s.common + "/logs", s.gd + "/logs"} {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return nil
			}
			size, had := s.logs[p]
			st, _ := e.Info()
			switch {
			case !had:
				errs = append(errs, os.Remove(p))
			case st != nil && st.Size() >= size:
				errs = append(errs, os.Truncate(p, size))
			default:
				errs = append(errs, os.Remove(p)) // rewritten shorter: not the old one
			}
			return nil
		})
	}
	idx := s.gd + "/index"
	switch {
	case s.index != "":
		if err := os.Rename(s.index, idx); errors.Is(err, syscall.EXDEV) {
			b, rerr := os.ReadFile(s.index)
			if rerr == nil {
				err = putBack(idx, b)
			} else {
				err = rerr
			}
		} else {
			errs = append(errs, err)
		}
	case s.indexID == fileID{}:
		if err := os.Remove(idx); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	default:
		// Too large to copy: without it git rebuilds nothing by itself;
		// the user's `git reset` makes a new one from HEAD.
		if err := os.Remove(idx); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// discard drops the saved index.
func (s *historySnap) discard() {
	if s.index != "" {
		os.Remove(s.index)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if st, err := src.Stat(); err == nil {
		dst.Chmod(st.Mode().Perm())
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			dst.Chown(int(sys.Uid), int(sys.Gid))
		}
	}
	return dst.Close()
}

// putBack writes b to f as git would: a new file beside it renamed into
// place, with the mode and owner of what is there (or of its directory).
func putBack(f string, b []byte) error {
	mode := os.FileMode(0o644)
	uid, gid := -1, -1
	if st, err := os.Lstat(f); err == nil {
		mode = st.Mode().Perm()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(sys.Uid), int(sys.Gid)
		}
	} else if st, err := os.Stat(filepath.Dir(f)); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(sys.Uid), int(sys.Gid)
		}
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f), ".sandboxd-restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	tmp.Chmod(mode &^ 0o022)
	if os.Geteuid() == 0 && uid >= 0 {
		tmp.Chown(uid, gid)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f)
}

// linked returns a path on the way to a history file that is a symlink,
// "" when there is none.
func (s *historySnap) linked() string {
	paths := []string{s.gd + "/index", s.common + "/packed-refs"}
	for f := range s.files {
		paths = append(paths, f)
	}
	for f := range s.logs {
		paths = append(paths, f)
	}
	for _, f := range paths {
		base := s.common
		if !strings.HasPrefix(f, base+"/") {
			base = s.gd
		}
		rel := strings.TrimPrefix(f, base+"/")
		parts := strings.Split(rel, "/")
		for i := 1; i <= len(parts); i++ {
			q := base + "/" + strings.Join(parts[:i], "/")
			if st, err := os.Lstat(q); err == nil && st.Mode()&fs.ModeSymlink != 0 {
				return q
			}
		}
	}
	for _, d := range []string{s.common + "/refs", s.common + "/logs", s.gd + "/logs"} {
		if st, err := os.Lstat(d); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return d
		}
	}
	return ""
}
