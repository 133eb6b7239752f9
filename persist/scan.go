package persist

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
	"github.com/sandboxd/sandboxd/pathtree"
	"golang.org/x/sys/unix"
)

// The rules need every git directory in the workspace, at any depth and
// under any name, and every protected name, before each run and again
// after it. Reading every directory of a large workspace (node_modules)
// costs ~1 µs an entry, so a scan remembers each directory's inode and
// ctime and reads a directory again only when they changed: adding,
// removing or renaming an entry always moves a directory's ctime, and no
// unprivileged process can set a ctime back. Contents are never trusted
// from memory: whether a directory with a HEAD is a repository is asked
// again (IsGitDir) every time. The memory of the last scan is kept in
// sandboxd's state directory, which the sandbox can neither read nor
// write.

// maxScanDirs bounds a scan.
const maxScanDirs = 500_000

// DirInfo is what a scan knows of one directory.
type DirInfo struct {
	Ino   uint64
	Ctime int64 // ns; 0 when too recent to trust (coarse clocks)
	// Mode is the directory's permission bits.
	Mode uint32
	// Subdirs are the children to descend into (not .git, not symlinks).
	Subdirs []string
	// ACL says which POSIX ACLs the directory carries (aclAccess,
	// aclDefault): an ACL can let other accounts write, and a default
	// ACL overrides the umask of every file made in it later.
	ACL uint8
	// Marks are the entries that may matter: ".git", what makes a git
	// directory (HEAD, objects, refs, commondir), and every entry a
	// persistence name may begin with.
	Marks []string
}

// Scan is one scan of a workspace. Paths are workspace-relative; the
// root is "".
type Scan struct {
	Dev uint64
	// Key identifies the names the marks were taken for.
	Key  string
	Dirs map[string]DirInfo
	// TooDeep are directories with children whose paths are too long to
	// follow; Unread are directories that could not be listed.
	TooDeep, Unread []string
	// fresh reports whether the scan read any directory again (or had no
	// memory to start from): only then is it worth saving.
	fresh bool
	// locked are the directories of Unread that could not be listed for
	// want of permission, as the scan saw them: what unlock may open.
	locked map[string]lockedDir
}

// lockedDir is a directory a scan could not list for want of permission:
// its owner and mode.
type lockedDir struct{ uid, mode uint32 }

// ScanWorkspace walks ws, trusting prev for every directory whose inode
// and ctime are unchanged. Directories on other file systems, symlinks and
// the insides of git directories are not entered.
func ScanWorkspace(ws string, m *Matcher, prev *Scan) (*Scan, error) {
	return Scanner{Names: m}.Scan(ws, prev)
}

// Scanner scans workspaces.
type Scanner struct {
	Names *Matcher
}

// pathLimit is the longest path the scan follows; anything deeper is
// recorded in Scan.TooDeep instead (the kernel refuses longer paths).
const pathLimit = unix.PathMax - 256

// Scan is ScanWorkspace with the Scanner's options. It only reads: a
// directory it cannot list is Unread (and, when it lacks permission,
// lockedBy its owner: a caller that must see what is in it opens it with
// unlock and scans again). When the workspace itself cannot be listed,
// the error comes with the scan so far, so that lockedBy can name it.
func (sc Scanner) Scan(ws string, prev *Scan) (*Scan, error) {
	var root unix.Stat_t
	if err := unix.Lstat(ws, &root); err != nil {
		return nil, fmt.Errorf("scan workspace: %w", err)
	}
	s, old := sc.begin(root.Dev, prev)
	recent := time.Now().Add(-2 * time.Second).UnixNano()
	stack := []string{""}
	for len(stack) > 0 {
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if len(s.Dirs) >= maxScanDirs {
			return nil, fmt.Errorf("workspace has more than %d directories; choose a narrower --workspace", maxScanDirs)
		}
		path := joinPath(ws, rel)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != root.Dev {
			continue
		}
		info, err := s.dirInfo(path, rel, &st, old, sc.Names, recent)
		if err != nil {
			if rel == "" {
				return s, fmt.Errorf("scan workspace: %w", err)
			}
			continue
		}
		s.Dirs[rel] = info
		if rel != "" && info.marked("HEAD") && IsGitDir(Host{}, path) != NotGitDir {
			continue // a git directory's insides are not a workspace
		}
		stack = s.descend(ws, rel, info, stack)
	}
	sort.Strings(s.TooDeep)
	s.TooDeep = slices.Compact(s.TooDeep)
	sort.Strings(s.Unread)
	return s, nil
}

// begin starts a scan of the file system dev: empty, and what of prev it
// may trust (nothing when prev was taken of another file system or for
// other names).
func (sc Scanner) begin(dev uint64, prev *Scan) (*Scan, map[string]DirInfo) {
	s := &Scan{Dev: dev, Key: sc.Names.key(), Dirs: map[string]DirInfo{}, fresh: prev == nil || len(prev.Dirs) == 0}
	if prev != nil && prev.Dev == dev && prev.Key == s.Key {
		return s, prev.Dirs
	}
	s.fresh = true
	return s, nil
}

// dirInfo is what the scan knows of the directory rel (at path, described
// by st): remembered in old when its inode and ctime are unchanged, else
// read again. A directory that cannot be read is recorded (Unread,
// locked) and its error returned.
func (s *Scan) dirInfo(path, rel string, st *unix.Stat_t, old map[string]DirInfo, m *Matcher, recent int64) (DirInfo, error) {
	ctime := st.Ctim.Nano()
	info, ok := old[rel]
	if !ok || info.Ino != st.Ino || info.Ctime == 0 || info.Ctime != ctime {
		s.fresh = true
		var err error
		if info, err = readDirInfo(path, m); err != nil {
			if errors.Is(err, unix.EACCES) {
				s.lock(rel, st)
			}
			if rel != "" {
				s.Unread = append(s.Unread, rel)
			}
			return DirInfo{}, err
		}
		info.Ino = st.Ino
		info.ACL = dirACL(path)
		if ctime < recent {
			info.Ctime = ctime
		}
	}
	if st.Mode&0o500 != 0o500 {
		// Listed, but its owner may not search it (or read it): what is
		// below cannot be looked at, by the scan or by the rules.
		s.lock(rel, st)
	}
	info.Mode = st.Mode & 0o7777
	return info, nil
}

// lock records rel (described by st) as a directory the scan could not
// list or search for want of permission.
func (s *Scan) lock(rel string, st *unix.Stat_t) {
	if s.locked == nil {
		s.locked = map[string]lockedDir{}
	}
	s.locked[rel] = lockedDir{uid: st.Uid, mode: st.Mode & 0o7777}
}

// descend pushes the subdirectories of rel onto stack, and records rel as
// too deep when a subdirectory's path is too long to follow.
func (s *Scan) descend(ws, rel string, info DirInfo, stack []string) []string {
	for _, sub := range info.Subdirs {
		next := joinRel(rel, sub)
		if len(ws)+1+len(next) >= pathLimit {
			s.TooDeep = append(s.TooDeep, rel)
			continue
		}
		stack = append(stack, next)
	}
	return stack
}

// lockedBy lists the directories the scan could not list for want of
// permission that owner owns (workspace-relative, sorted; "" is the
// workspace): what unlock may open. A nil scan has none.
func (s *Scan) lockedBy(owner int) []string {
	if s == nil {
		return nil
	}
	var out []string
	for rel, d := range s.locked {
		if int(d.uid) == owner {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// unlocked is a set of directories unlock opened, and their modes before.
type unlocked map[string]uint32

// unlock is the step a scan never takes itself (a scan only reads): it
// opens each of the directories dirs of the workspace ws, which the scan
// s found locked by their owner (lockedBy: a command can lock its own),
// for reading and search, so that another scan reads them and what is
// below them. It adds them to opened, with their modes, for restore; a
// directory it cannot open is left as it is (the next scan finds it
// Unread again).
func (s *Scan) unlock(ws string, dirs []string, opened unlocked) {
	for _, rel := range dirs {
		d, ok := s.locked[rel]
		if _, done := opened[rel]; !ok || done {
			continue
		}
		if unix.Chmod(joinPath(ws, rel), d.mode|0o500) == nil {
			opened[rel] = d.mode
		}
	}
}

// record writes into s, a scan taken while the directories were open,
// the modes the command left them with.
func (u unlocked) record(s *Scan) {
	for rel, mode := range u {
		if d, ok := s.Dirs[rel]; ok {
			d.Mode = mode
			s.Dirs[rel] = d
		}
	}
}

// restore puts back the owner's bits of the directories unlock opened in
// the workspace ws (those below others first, while the way to them is
// still open), and records the modes in s (nil: none). The group's and
// others' bits stay as they are now: unlock never set them, and the
// sweep may have narrowed them since. Putting a mode back moves the
// directory's ctime, so the next scan reads it again.
func (u unlocked) restore(ws string, s *Scan) {
	var rels []string
	for rel := range u {
		rels = append(rels, rel)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(rels)))
	for _, rel := range rels {
		mode := u[rel]
		var st unix.Stat_t
		if unix.Lstat(joinPath(ws, rel), &st) == nil {
			mode = mode&^0o077 | st.Mode&0o077
		}
		unix.Chmod(joinPath(ws, rel), mode)
		if s == nil {
			continue
		}
		if d, ok := s.Dirs[rel]; ok {
			d.Mode = mode
			s.Dirs[rel] = d
		}
	}
}

func joinPath(ws, rel string) string {
	if rel == "" {
		return ws
	}
	return ws + "/" + rel
}

func (d DirInfo) marked(name string) bool {
	for _, m := range d.Marks {
		if m == name {
			return true
		}
	}
	return false
}

func readDirInfo(path string, m *Matcher) (DirInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return DirInfo{}, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return DirInfo{}, err
	}
	var info DirInfo
	for _, e := range entries {
		name := e.Name()
		if gitMark(name) || m.Starts(name) {
			info.Marks = append(info.Marks, name)
		}
		if name != ".git" && e.Type().IsDir() {
			info.Subdirs = append(info.Subdirs, name)
		}
	}
	return info, nil
}

// key names the matcher's patterns, so a scan taken for other names is
// not trusted.
func (m *Matcher) key() string {
	h := sha256.New()
	for _, n := range m.names {
		fmt.Fprintf(h, "%d %s\n", n.Kind, n.Pattern)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Repo is one repository a scan found.
type Repo struct {
	// At is the workspace directory it was found in (for a .git entry,
	// the work tree; for a bare one, the git directory itself).
	At string
	// GitDir is the git directory, absolute and resolved (it may lie
	// outside the workspace, through a gitfile or a symlink).
	GitDir string
	// Dotgit is set when it was found through an entry named .git; Gitfile
	// when that entry is a "gitdir:" file.
	Dotgit, Gitfile bool
}

// Repos lists the repositories the scan found, as git would find them
// now (fsys, normally Host), with the submodule and worktree git
// directories inside them. Sorted by At, then GitDir.
func (s *Scan) Repos(ws string, fsys FS) []Repo {
	var out []Repo
	seen := map[string]bool{}
	add := func(r Repo) {
		// One git directory can serve several work trees.
		if k := r.GitDir + "\x00" + r.At; !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	for rel, d := range s.Dirs {
		dir := joinPath(ws, rel)
		if d.marked(".git") {
			dotgit := dir + "/.git"
			if _, st, err := Stat(fsys, dotgit); err == nil && st.IsRegular() {
				if t, v := ReadGitfile(fsys, dotgit); v == GitDir {
					add(Repo{At: rel, GitDir: t, Dotgit: true, Gitfile: true})
				}
			} else if p, st, err := Stat(fsys, dotgit); err == nil && st.IsDir() {
				// A directory named .git counts whatever it holds: one
				// that is not a repository yet is one after `git init`.
				add(Repo{At: rel, GitDir: p, Dotgit: true})
			}
		}
		if d.marked("HEAD") && IsGitDir(fsys, dir) != NotGitDir {
			if p, err := Resolve(fsys, dir, true); err == nil {
				add(Repo{At: rel, GitDir: p})
			}
		}
	}
	// Submodules (modules/<name>, at any depth: names may hold "/") and
	// linked worktrees (worktrees/<id>) keep their git directories inside.
	n := len(out)
	for i := 0; i < n; i++ {
		for _, inner := range innerGitDirs(fsys, out[i].GitDir) {
			if !seenDir(out, inner) {
				add(Repo{At: out[i].At, GitDir: inner})
			}
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].At != out[b].At {
			return out[a].At < out[b].At
		}
		return out[a].GitDir < out[b].GitDir
	})
	return out
}

// innerGitDirs lists git directories below gd's worktrees/ (worktrees/<id>)
// and modules/ (at any depth: submodule names may hold "/").
func innerGitDirs(fsys FS, gd string) []string {
	var out []string
	for _, sub := range gitNested() {
		walk(fsys, gd+"/"+sub, 8, func(p string, st Info) bool {
			if !st.IsDir() {
				return false
			}
			if IsGitDir(fsys, p) != NotGitDir {
				out = append(out, p)
				out = append(out, innerGitDirs(fsys, p)...)
				return false
			}
			return sub == "modules"
		})
	}
	return out
}

// Named lists the existing entries (workspace-relative) that are exactly a
// persistence name: the entry a pattern ends at, for every marked entry a
// pattern begins at. The elements after the first are followed through
// whatever is there, symlinks included, as a tool opening the path would.
// Sorted.
func (s *Scan) Named(ws string, m *Matcher) []string {
	var out []string
	s.eachName(m, func(rel string, pat []string) {
		cands := []string{rel}
		for _, elem := range pat[1:] {
			var next []string
			for _, c := range cands {
				next = append(next, childrenMatching(joinPath(ws, c), c, elem)...)
			}
			cands = next
		}
		out = append(out, cands...)
	})
	sort.Strings(out)
	return slices.Compact(out)
}

// eachName calls fn for every marked entry rel a persistence name's
// pattern (split into parts) may begin at.
func (s *Scan) eachName(m *Matcher, fn func(rel string, pat []string)) {
	for rel, d := range s.Dirs {
		for _, mark := range d.Marks {
			for _, k := range m.startingAt(mark) {
				fn(joinRel(rel, mark), strings.Split(m.names[k].Pattern, "/"))
			}
		}
	}
}

// Redirects lists the existing entries (workspace-relative) that stand,
// as something other than a directory, where a persistence name of
// several parts needs a directory (".jj/repo" as a file, ".hg" as a
// symlink): each would make a tool read the name from elsewhere. Sorted.
func (s *Scan) Redirects(ws string, m *Matcher) []string {
	var out []string
	s.eachName(m, func(rel string, pat []string) {
		cands := []string{rel}
		for i := 1; i < len(pat) && len(cands) > 0; i++ {
			var next []string
			for _, c := range cands {
				st, err := os.Lstat(joinPath(ws, c))
				switch {
				case err != nil:
				case !st.IsDir():
					out = append(out, c)
				default:
					next = append(next, childrenMatching(joinPath(ws, c), c, pat[i])...)
				}
			}
			cands = next
		}
	})
	sort.Strings(out)
	return slices.Compact(out)
}

// childrenMatching lists dir's entries (as rel/name) that the pattern
// element matches. The element is matched against names, never put into
// a path: the workspace's own path may hold glob characters.
func childrenMatching(dir, rel, elem string) []string {
	if !strings.ContainsAny(elem, `*?[\`) {
		if _, err := os.Lstat(dir + "/" + elem); err == nil {
			return []string{rel + "/" + elem}
		}
		return nil
	}
	names, err := Host{}.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if ok, _ := path.Match(elem, n); ok {
			out = append(out, rel+"/"+n)
		}
	}
	return out
}

// startingAt lists the names whose first element matches elem.
func (m *Matcher) startingAt(elem string) []int {
	out := append([]int(nil), m.byFirst[elem]...)
	for _, k := range m.globs {
		first, _, _ := strings.Cut(m.names[k].Pattern, "/")
		if ok, _ := path.Match(first, elem); ok {
			out = append(out, k)
		}
	}
	return out
}

// ScanFile is where the last scan of the workspace ws is remembered.
func ScanFile(stateDir, ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return filepath.Join(stateDir, "scan", hex.EncodeToString(sum[:8])+".gob")
}

// LoadScan reads a remembered scan; any problem means no memory.
func LoadScan(path string) *Scan {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var s Scan
	if gob.NewDecoder(bytes.NewReader(b)).Decode(&s) != nil || s.Dirs == nil {
		return nil
	}
	return &s
}

// SaveScan remembers a scan for the next run, unless nothing in it is
// new. The file is only a cache: a torn write fails to decode and costs
// the next run a full scan, so it is not synced.
func SaveScan(path string, s *Scan) error {
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
	return atomicfile.WriteFile(path, buf.Bytes(), 0o600)
}

// MarkFresh makes the next SaveScan write s even if it read nothing anew.
func (s *Scan) MarkFresh() { s.fresh = true }

// gitMark reports the entries a scan marks for git: a .git entry, and
// what makes a directory a git directory.
func gitMark(name string) bool { return name == ".git" || slices.Contains(repoMarkers(), name) }

// Tree is the workspace as the scan saw it, as an FS that knows only its
// directories (and, outside the workspace, the host): enough to tell
// what existed before a run written straight to the workspace.
func (s *Scan) Tree(ws string) FS { return scanTree{ws: ws, s: s} }

type scanTree struct {
	ws string
	s  *Scan
}

func (t scanTree) rel(p string) (string, bool) {
	return pathtree.Rel(t.ws, p)
}

func (t scanTree) Lstat(p string) (Info, error) {
	r, ok := t.rel(p)
	if !ok {
		return Host{}.Lstat(p)
	}
	if d, ok := t.s.Dirs[r]; ok {
		return Info{Mode: unix.S_IFDIR | d.Mode, Ino: d.Ino, Ctime: d.Ctime}, nil
	}
	return Info{}, unix.ENOENT
}

func (t scanTree) Readlink(p string) (string, error) {
	if _, ok := t.rel(p); !ok {
		return Host{}.Readlink(p)
	}
	return "", unix.ENOENT
}

func (t scanTree) ReadFile(p string, limit int) ([]byte, error) {
	if _, ok := t.rel(p); !ok {
		return Host{}.ReadFile(p, limit)
	}
	return nil, unix.ENOENT
}

func (t scanTree) Searchable(p string, info Info) bool {
	if _, ok := t.rel(p); !ok {
		return Host{}.Searchable(p, info)
	}
	return info.IsDir()
}

// WithMark lists the directories (workspace-relative) where the scan saw
// an entry called name, sorted.
func (s *Scan) WithMark(name string) []string {
	var out []string
	for rel, d := range s.Dirs {
		if d.marked(name) {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

func seenDir(rs []Repo, gd string) bool {
	for _, r := range rs {
		if r.GitDir == gd {
			return true
		}
	}
	return false
}

// POSIX ACL xattrs a directory may carry.
const (
	aclAccess  = 1 << iota // system.posix_acl_access
	aclDefault             // system.posix_acl_default
)

// ACLNames are the xattrs of ACLAccess and ACLDefault, in that order.
func ACLNames() []string { return []string{"system.posix_acl_access", "system.posix_acl_default"} }

// dirACL says which ACLs (ACLNames, as bits) the directory path carries.
func dirACL(path string) uint8 {
	var acl uint8
	for i, name := range ACLNames() {
		if n, err := unix.Lgetxattr(path, name, nil); err == nil && n > 0 {
			acl |= 1 << i
		}
	}
	return acl
}
