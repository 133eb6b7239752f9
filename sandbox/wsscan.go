package sandbox

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The persistence plan needs every git directory in the workspace, at any
// depth, before each run and again after it. Reading every directory of a
// large workspace (node_modules) costs ~1 µs an entry, twice a run, so a
// scan remembers each directory's inode and ctime and reads a directory
// again only when they changed: adding, removing or renaming an entry
// always moves a directory's ctime, and no unprivileged process can set a
// ctime back. The memory of the last scan is kept in sandboxd's state
// directory, which the sandbox can neither read nor write.

// maxScanDirs bounds a scan.
const maxScanDirs = 500_000

// dirInfo is what a scan knows of one directory.
type dirInfo struct {
	Ino     uint64
	Ctime   int64    // ns; 0 when too recent to trust (coarse clocks)
	Subdirs []string // children to descend into (not .git, not symlinks)
	Git     bool     // has an entry named .git (directory, gitfile or symlink)
	Bare    bool     // looks like a git directory itself (HEAD, objects/, refs/)
}

// wsScan is one scan of a workspace. Paths are workspace-relative; the
// root is ".".
type wsScan struct {
	Dev  uint64
	Dirs map[string]dirInfo
	// fresh reports whether the scan read any directory again (or had no
	// memory to start from): only then is it worth saving.
	fresh bool
}

// gitEntries lists every .git entry the scan found.
func (s *wsScan) gitEntries() []string {
	var out []string
	for rel, d := range s.Dirs {
		if d.Git {
			out = append(out, filepath.Join(rel, ".git"))
		}
	}
	return out
}

// bareDirs lists directories (other than .git ones) that look like git
// directories.
func (s *wsScan) bareDirs() []string {
	var out []string
	for rel, d := range s.Dirs {
		if d.Bare && rel != "." {
			out = append(out, rel)
		}
	}
	return out
}

// scanWorkspace walks ws, trusting prev for every directory whose inode
// and ctime are unchanged. Directories on other file systems are not
// entered.
func scanWorkspace(ws string, prev *wsScan) (*wsScan, error) {
	var root unix.Stat_t
	if err := unix.Lstat(ws, &root); err != nil {
		return nil, fmt.Errorf("scan workspace: %w", err)
	}
	s := &wsScan{Dev: root.Dev, Dirs: map[string]dirInfo{}, fresh: prev == nil || len(prev.Dirs) == 0}
	var old map[string]dirInfo
	if prev != nil && prev.Dev == root.Dev {
		old = prev.Dirs
	}
	recent := time.Now().Add(-2 * time.Second).UnixNano()
	stack := []string{"."}
	for len(stack) > 0 {
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if len(s.Dirs) >= maxScanDirs {
			return nil, fmt.Errorf("workspace has more than %d directories; choose a narrower --workspace", maxScanDirs)
		}
		path := filepath.Join(ws, rel)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != root.Dev {
			continue
		}
		ctime := st.Ctim.Nano()
		info, ok := old[rel]
		if !ok || info.Ino != st.Ino || info.Ctime == 0 || info.Ctime != ctime {
			s.fresh = true
			var err error
			info, err = readDirInfo(path)
			if err != nil {
				if rel == "." {
					return nil, fmt.Errorf("scan workspace: %w", err)
				}
				continue // unreadable corners cannot hold anything we could protect
			}
			info.Ino = st.Ino
			if ctime < recent {
				info.Ctime = ctime
			}
		}
		s.Dirs[rel] = info
		if info.Bare && rel != "." {
			continue // a git directory's insides are not a workspace
		}
		for _, sub := range info.Subdirs {
			stack = append(stack, filepath.Join(rel, sub))
		}
	}
	return s, nil
}

func readDirInfo(path string) (dirInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return dirInfo{}, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return dirInfo{}, err
	}
	var info dirInfo
	var head, objects, refs bool
	for _, e := range entries {
		name, typ := e.Name(), e.Type()
		switch {
		case name == ".git":
			info.Git = true
		case typ.IsDir():
			info.Subdirs = append(info.Subdirs, name)
		}
		switch name {
		case "HEAD":
			head = typ.IsRegular()
		case "objects":
			objects = typ.IsDir()
		case "refs":
			refs = typ.IsDir()
		}
	}
	info.Bare = head && objects && refs
	return info, nil
}

// loadScan reads a remembered scan; any problem means no memory.
func loadScan(path string) *wsScan {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var s wsScan
	if gob.NewDecoder(bytes.NewReader(b)).Decode(&s) != nil || s.Dirs == nil {
		return nil
	}
	return &s
}

// saveScan remembers a scan for the next run, unless nothing in it is
// new. The file is only a cache: a torn write fails to decode and costs
// the next run a full scan, so it is not synced.
func saveScan(path string, s *wsScan) error {
	if !s.fresh && len(s.Dirs) > 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(s); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".scan-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
