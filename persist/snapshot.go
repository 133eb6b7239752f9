package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/pathtree"
	"golang.org/x/sys/unix"
)

// Without a layer, git's history is written straight into the
// repository: a commit, the index, a stash or a branch can carry a hook
// or an .envrc the work tree check would refuse, and the user's next
// checkout writes it (persist/history.go). So before the run, each
// repository's history files are copied (refs, packed-refs, the HEADs,
// reflogs, the index, operation state, and the config that says where its
// work tree is); after it, the rules compare the repository with that
// copy, and when they refuse what the run added, the copy is put back
// (the new objects stay, unreachable). Contents are compared, never
// identities, and nothing is written through a link.

// maxHistoryCopy bounds what one repository's copy holds.
const maxHistoryCopy = 256 << 20

// historySnap is one repository's history files before the run.
type historySnap struct {
	gd, common string
	files      map[string][]byte // absolute path → content, for the files below
	stats      map[string]stamp  // absolute path → what it was (a change moves its ctime)
	complete   bool              // every history file fitted in the copy
}

// snapHistory copies gd's history files.
func snapHistory(gd string) *historySnap {
	common, v := CommonDir(Host{}, gd)
	if v != GitDir {
		common = gd
	}
	s := &historySnap{gd: gd, common: common, files: map[string][]byte{}, stats: map[string]stamp{}, complete: true}
	total := 0
	for _, f := range s.paths() {
		b, err := readRegular(f)
		if err != nil {
			continue
		}
		total += len(b)
		if total > maxHistoryCopy {
			s.complete = false
			continue
		}
		s.files[f] = b
		s.stats[f] = stampOf(f)
	}
	return s
}

// readRegular reads a regular file without following a final symlink
// (Host.ReadFile), whole when it fits in the copy.
func readRegular(p string) ([]byte, error) { return Host{}.ReadFile(p, maxHistoryCopy+1) }

// paths lists the history files of the repository as it is now: every
// loose ref and reflog, packed-refs, the HEADs, the index, grafts and
// shallow, sequencer todo lists, and the files that say where the work
// tree is and which hash it uses.
func (s *historySnap) paths() []string {
	var out []string
	walk := func(dir string) {
		filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				out = append(out, p)
			}
			return nil
		})
	}
	walk(s.common + "/refs")
	walk(s.common + "/logs")
	if s.gd != s.common {
		walk(s.gd + "/logs")
	}
	for _, d := range []string{s.gd, s.common} {
		names, _ := Host{}.ReadDir(d)
		for _, n := range names {
			if n == "HEAD" || strings.HasSuffix(n, "_HEAD") {
				out = append(out, d+"/"+n)
			}
		}
	}
	out = append(out, s.common+"/packed-refs", s.gd+"/index", s.common+"/info/grafts", s.common+"/shallow",
		s.common+"/config", s.gd+"/config.worktree", s.gd+"/commondir", s.gd+"/gitdir")
	for _, sd := range sequencerDirs() {
		for _, f := range pickLists() {
			out = append(out, s.gd+"/"+sd+"/"+f)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// restorable reports the history files restore writes (not the config
// files the copy also holds).
func (s *historySnap) restorable(p string) bool {
	rel, ok := pathtree.Below(s.gd, p)
	if !ok {
		rel, ok = pathtree.Below(s.common, p)
	}
	return ok && historyFile(rel) && !strings.HasPrefix(rel, "rebase-") && !strings.HasPrefix(rel, "sequencer/")
}

// stamp is what a file's status says of its content: it moves on every
// write (the change time cannot be set back).
type stamp struct {
	ino, size    uint64
	ctime, mtime int64
}

func stampOf(p string) stamp {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return stamp{}
	}
	return stamp{st.Ino, uint64(st.Size), st.Ctim.Nano(), st.Mtim.Nano()}
}

// changed reports whether the run changed any history file.
func (s *historySnap) changed() bool {
	now := map[string]bool{}
	for _, f := range s.paths() {
		if st, ok := s.stats[f]; ok && st != (stamp{}) && stampOf(f) == st {
			now[f] = true
			continue // untouched since the copy
		}
		b, err := readRegular(f)
		if err != nil {
			continue
		}
		now[f] = true
		if old, had := s.files[f]; !had || string(old) != string(b) {
			return true
		}
	}
	for f := range s.files {
		if !now[f] {
			return true
		}
	}
	return false
}

// restore puts the history files back as they were: each by a new file
// renamed into place (never written in place, so a link the run made to
// another file leaves that file alone), with new ones removed. Nothing is
// written where a directory on the way is a symlink.
func (s *historySnap) restore() error {
	if !s.complete {
		return errors.New("the history files were too large to copy; they were not put back")
	}
	if p := s.linked(); p != "" {
		return fmt.Errorf("%s is a symlink; the history was not put back", p)
	}
	var errs []error
	for _, f := range s.paths() {
		if _, had := s.files[f]; !had && s.restorable(f) {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	for f, b := range s.files {
		if !s.restorable(f) {
			continue
		}
		if cur, err := readRegular(f); err == nil && string(cur) == string(b) {
			continue
		}
		if err := putBack(f, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// linked returns a directory on the way to a history file that is a
// symlink, "" when there is none.
func (s *historySnap) linked() string {
	for f := range s.files {
		base, rel := s.gd, strings.TrimPrefix(f, s.gd+"/")
		if r, ok := pathtree.Below(s.common, f); ok {
			base, rel = s.common, r
		}
		if l := firstLink(base, rel); l != "" {
			return base + "/" + l
		}
	}
	for _, d := range []string{s.common + "/refs", s.common + "/logs", s.gd + "/logs"} {
		if st, err := os.Lstat(d); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return d
		}
	}
	return ""
}

// putBack writes b to f as git would: a new file beside it renamed into
// place, with the mode and owner of what is there (or of its directory).
func putBack(f string, b []byte) error {
	mode := os.FileMode(0o644)
	uid, gid := -1, -1
	if st, err := os.Lstat(f); err == nil && st.Mode().IsRegular() {
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
	if uid >= 0 {
		// The kernel decides: a root caller gives it the owner back; any
		// other caller may only keep it its own.
		tmp.Chown(uid, gid)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f)
}

// snapFS is the tree before the run for the rules: the start scan's
// directories, with each repository's history files as the copies hold
// them.
type snapFS struct {
	base  FS
	files map[string][]byte
	dirs  map[string]map[string]bool
}

func newSnapFS(base FS, snaps map[string]*historySnap) *snapFS {
	f := &snapFS{base: base, files: map[string][]byte{}, dirs: map[string]map[string]bool{}}
	for _, s := range snaps {
		for p, b := range s.files {
			f.files[p] = b
			for d := p; ; {
				parent := filepath.Dir(d)
				if parent == d || !strings.HasPrefix(parent, s.gd) && !strings.HasPrefix(parent, s.common) {
					break
				}
				if f.dirs[parent] == nil {
					f.dirs[parent] = map[string]bool{}
				}
				f.dirs[parent][filepath.Base(d)] = true
				d = parent
			}
		}
	}
	return f
}

func (f *snapFS) Lstat(p string) (Info, error) {
	if b, ok := f.files[p]; ok {
		return Info{Mode: unix.S_IFREG | 0o644, Size: int64(len(b))}, nil
	}
	if _, ok := f.dirs[p]; ok {
		return Info{Mode: unix.S_IFDIR | 0o755}, nil
	}
	return f.base.Lstat(p)
}

func (f *snapFS) Readlink(p string) (string, error) { return f.base.Readlink(p) }

func (f *snapFS) ReadFile(p string, limit int) ([]byte, error) {
	if b, ok := f.files[p]; ok {
		return b[:min(len(b), limit)], nil
	}
	return f.base.ReadFile(p, limit)
}

func (f *snapFS) Searchable(p string, info Info) bool {
	if _, ok := f.dirs[p]; ok {
		return true
	}
	return f.base.Searchable(p, info)
}

// ReadDir lists what the copies hold in p (history directories only).
func (f *snapFS) ReadDir(p string) ([]string, error) {
	names, ok := f.dirs[p]
	if !ok {
		return nil, unix.ENOENT
	}
	var out []string
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
