package cachedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/sandboxd/sandboxd/publicerr"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Entry is one workspace's private caches.
type Entry struct {
	ID        string    `json:"id"`
	Dir       string    `json:"dir"`
	Workspace string    `json:"workspace,omitempty"` // "" for a cache made before records were kept
	Size      int64     `json:"size"`                // bytes on disk
	LastUsed  time.Time `json:"last_used"`
	InUse     bool      `json:"in_use,omitempty"`
}

// record is what ID.use holds.
type record struct {
	Workspace string    `json:"workspace"`
	LastUsed  time.Time `json:"last_used"`
}

// Use records that a run of workspace uses the cache dir (below root) now
// and holds it in use until release is called.
func Use(root, dir, workspace string) (release func(), err error) {
	id := filepath.Base(dir)
	if filepath.Dir(dir) != filepath.Clean(root) || !validID(id) {
		return nil, fmt.Errorf("cachedir: %s is not a cache of %s", dir, root)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("cachedir: %w", err)
	}
	f, err := lockRecord(filepath.Join(root, id+".use"))
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(record{Workspace: workspace, LastUsed: time.Now().UTC()})
	if err := f.Truncate(0); err == nil {
		f.WriteAt(b, 0)
	}
	return func() { f.Close() }, nil
}

// lockRecord opens the record at path and locks it shared (runs of one
// workspace may overlap). A removal may unlink the record while this
// waits for its lock: then the lock is on a file nobody else sees, and
// the record is opened again.
func lockRecord(path string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("cachedir: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
			f.Close()
			return nil, fmt.Errorf("cachedir: lock: %w", err)
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Lstat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			return f, nil
		}
		f.Close()
	}
}

// validID: a cache directory's name is hex (a digest of its workspace).
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// List returns every cache below root, least recently used first.
func List(root string) ([]Entry, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cachedir: %w", err)
	}
	var out []Entry
	for _, d := range ents {
		if !d.IsDir() || !validID(d.Name()) {
			continue
		}
		e := Entry{ID: d.Name(), Dir: filepath.Join(root, d.Name())}
		if info, err := d.Info(); err == nil {
			e.LastUsed = info.ModTime().UTC()
		}
		if b, err := os.ReadFile(filepath.Join(root, d.Name()+".use")); err == nil {
			var r record
			if json.Unmarshal(b, &r) == nil {
				e.Workspace, e.LastUsed = r.Workspace, r.LastUsed
			}
		}
		e.InUse = inUse(root, e.ID)
		e.Size = diskUsage(e.Dir)
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

// inUse reports whether a run holds the cache id.
func inUse(root, id string) bool {
	f, err := os.OpenFile(filepath.Join(root, id+".use"), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return true
	}
	return false
}

// diskUsage is the disk space the tree at dir takes (its blocks, each
// hard-linked file once), without following symlinks.
func diskUsage(dir string) int64 {
	var total int64
	seen := map[[2]uint64]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			k := [2]uint64{st.Dev, st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total
}

// Prune removes the least recently used caches not in use until every
// cache below root takes at most max bytes, and returns those removed.
func Prune(root string, max int64) ([]Entry, error) {
	ents, err := List(root)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range ents {
		total += e.Size
	}
	var removed []Entry
	for _, e := range ents {
		if total <= max {
			break
		}
		ok, err := remove(root, e.ID)
		if err != nil {
			return removed, err
		}
		if ok {
			total -= e.Size
			removed = append(removed, e)
		}
	}
	return removed, nil
}

// Remove removes the caches ids (not in use) and returns those removed.
func Remove(root string, ids []string) ([]Entry, error) {
	ents, err := List(root)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var removed []Entry
	for _, e := range ents {
		if !want[e.ID] {
			continue
		}
		delete(want, e.ID)
		ok, err := remove(root, e.ID)
		if err != nil {
			return removed, err
		}
		if !ok {
			return removed, publicerr.New(fmt.Sprintf("cache %s is in use by a run; it, and any cache not listed as removed, is kept", e.ID))
		}
		removed = append(removed, e)
	}
	for id := range want {
		return removed, publicerr.New(fmt.Sprintf("there is no cache %q (sandboxd cache list shows them)", id))
	}
	return removed, nil
}

// remove removes cache id unless a run holds it (false).
func remove(root, id string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(root, id+".use"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return false, fmt.Errorf("cachedir: %w", err)
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false, nil
	}
	rfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("cachedir: %w", err)
	}
	defer unix.Close(rfd)
	if err := removeAt(rfd, id); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("cachedir: remove %s: %w", id, err)
	}
	os.Remove(filepath.Join(root, id+".use"))
	return true, nil
}

// removeAt removes name in the directory dir with everything below it,
// never following a symlink, making read-only directories (Go's module
// cache, an overlay's work directory) writable on the way.
func removeAt(dir int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dir, name, 0)
	}
	if st.Mode&0o700 != 0o700 {
		// A directory, as fstatat just said, and nothing else writes the
		// cache while it is locked for removal.
		unix.Fchmodat(dir, name, 0o700, 0)
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = removeAt(fd, n); err != nil && !errors.Is(err, unix.ENOENT) {
				break
			}
			err = nil
		}
	}
	f.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}
