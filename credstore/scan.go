package credstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// Scan bounds. A home deeper or larger than this is scanned in part,
// and the result says so.
const (
	maxDepth   = 16
	maxEntries = 1_000_000
	// cacheDepth bounds the walk below the cache directory, where tools
	// keep large trees and their stores sit near the top.
	cacheDepth = 3
)

// Found is one credential store the scan found.
type Found struct {
	// Path is absolute: a file, or a directory that is a store whole.
	Path string
	// Class is what its name (and, for a key, its content) says it is.
	Class Class
}

// ScanConfig says where to scan.
type ScanConfig struct {
	// Home is the caller's home directory (absolute, clean).
	Home string
	// StateDirs are the XDG base directories (config, data, state,
	// cache), where the caller's variables put them and at their
	// defaults: everything in them is tools' state.
	StateDirs []string
	// CacheDirs are the XDG cache directories, walked only cacheDepth
	// deep.
	CacheDirs []string
	// Covered are paths already denied whole (the documented stores):
	// the scan does not descend into them, and a backup of one (a
	// ".bak", "~" or editor's copy beside it) is a store too.
	Covered []string
	// Skip are more trees the scan leaves alone: where the caller's
	// variables put package managers' caches (GOMODCACHE, ...).
	Skip []string
	// Index is the file the scan keeps its index in, "" for none. It
	// must be out of the command's reach (sandboxd's state).
	Index string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Cache keeps decoded indexes between scans (nil: none); UID is the
	// caller the scan reads as, whose entries of Cache alone it uses.
	Cache *IndexCache
	UID   int
}

// Result is what Scan found.
type Result struct {
	// Found lists the stores, sorted by path.
	Found []Found
	// Partial says which part was not scanned and why ("" when all was).
	Partial string
	// Read and Reused count the directories read and those whose
	// index entry still held.
	Read, Reused int
}

// Scan finds the credential stores the name class names in the home
// and the XDG directories. It skips version-controlled work trees and
// bare repositories (a project's tokens.go and testdata/server.key stay
// its own), virtual environments and the dependency trees package
// managers keep; it follows no symlink (a link's target is judged
// where it lies, and the policy denies a found link's target too).
// With an index, a directory whose inode and change time are as
// indexed is not read again: adding, removing or renaming an entry
// changes a directory's change time.
func Scan(ctx context.Context, cfg ScanConfig) (Result, error) {
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	s := &scanner{ctx: ctx, cfg: cfg, started: now(), roots: map[string]bool{},
		covered: make(map[string]bool, len(cfg.Covered)), skip: map[string]bool{}}
	s.pats, s.rules = cfg.Cache.patterns()
	for _, c := range cfg.Covered {
		s.covered[filepath.Clean(c)] = true
	}
	for _, c := range cfg.Skip {
		if filepath.IsAbs(c) {
			s.skip[filepath.Clean(c)] = true
		}
	}
	s.key = cfg.Cache.key(&s.cfg, s.indexKey)
	s.old = loadIndex(cfg.Index, s.key, cfg.UID, cfg.Cache)
	// Sized as the last scan left them: most homes change little.
	s.next = &index{Key: s.key, Dirs: make(map[string]*dirRec, len(s.old.Dirs))}
	s.seen = make(map[[2]uint64]bool, len(s.old.Dirs))
	type root struct {
		path      string
		toolState bool
		depth     int
	}
	var roots []root
	add := func(p string, toolState bool, depth int) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if s.roots[p] {
			return
		}
		s.roots[p] = true
		roots = append(roots, root{p, toolState, depth})
	}
	add(cfg.Home, false, maxDepth)
	for _, d := range cfg.StateDirs {
		depth := maxDepth
		if slices.Contains(cfg.CacheDirs, d) {
			depth = cacheDepth
		}
		add(d, true, depth)
	}
	for _, r := range roots {
		if err := s.walk(r.path, where{ToolState: r.toolState, Depth: r.depth, Root: true}); err != nil {
			return Result{}, err
		}
		if s.entries >= maxEntries {
			break
		}
	}
	if len(s.partials) > 0 {
		s.partial = strings.Join(s.partials, "; ")
	}
	if cfg.Index != "" && (s.read > s.unlisted || s.resniffed || len(s.next.Dirs) != len(s.old.Dirs) || s.old.Key != s.key) {
		// Best effort: a scan that cannot keep its index does it all
		// again next time. An index that still holds is not rewritten.
		_ = saveIndex(cfg.Index, s.next)
	}
	slices.SortFunc(s.found, func(a, b Found) int { return strings.Compare(a.Path, b.Path) })
	return Result{Found: s.found, Partial: s.partial, Read: s.read, Reused: s.reused}, nil
}

// index is what one scan leaves for the next.
type index struct {
	// Key identifies the rules and roots the index was made with.
	Key  string
	Dirs map[string]*dirRec
}

// dirRec is one directory as last read.
type dirRec struct {
	Ino   uint64
	Ctime int64 // nanoseconds
	// Where is the scope the directory was read in.
	Where where
	// Settled: the directory changed long enough before it was read
	// that a change within the same clock tick cannot hide from its
	// change time; an unsettled record is read again.
	Settled bool
	// Skip: a work tree, repository or environment, not descended.
	Skip bool
	// Repo: a work tree where tools keep state (a dotfiles manager's
	// source): only names that say what a file is wherever it is
	// count in it.
	Repo bool
	// Links are symlinks to directories, followed in tools' state
	// (a dotfiles manager links ~/.config/app into its tree).
	Links []string
	// Entries is how many entries the directory had.
	Entries int
	Subdirs []string
	Hits    []hit
	Sniffs  []sniffRec
	// Symlinks are the directory's symlinks and whether each led to a
	// directory: what a link is (a store by a file's name, a store by a
	// directory's, a tree followed) is its target's type, which the
	// directory's change time does not follow. LinkTypes says the
	// record has them (an older build's has not, and is read again).
	LinkTypes bool
	Symlinks  []linkRec
	// Unlisted: the caller could not list it (read again every scan).
	Unlisted bool
}

// linkRec is a symlink as the directory's read found it.
type linkRec struct {
	Name string
	Dir  bool
}

// hit is a name that matched.
type hit struct {
	Name  string
	Class Class
}

// sniffRec is a key-like name and what its content said, valid while
// the file's inode, change time and size are as recorded.
type sniffRec struct {
	Name       string
	Class      Class
	Ino        uint64
	Ctime      int64
	Size       int64
	PrivateKey bool
}

type scanner struct {
	ctx     context.Context
	cfg     ScanConfig
	started time.Time
	pats    []namePattern
	// rules is the rules' part of the index key (rulesText of pats).
	rules   string
	roots   map[string]bool
	covered map[string]bool
	skip    map[string]bool
	// seen are the directories walked (device and inode): a link
	// cycle, or a tree reached twice, is walked once.
	seen     map[[2]uint64]bool
	partials []string
	key      string
	// old is read only: an IndexCache may give it to other scans.
	old     *index
	next    *index
	found   []Found
	partial string
	entries int
	read    int
	// unlisted counts the reads of directories still not listable, as
	// the index had them (no reason to rewrite it).
	unlisted int
	reused   int
	// resniffed: a key-like file of an indexed directory was read again.
	resniffed bool
}

// indexKey changes whenever the rules or the roots do, so an index
// made under other ones is not trusted. Each path is quoted: printed
// bare, one path with a space and two paths made one key.
func (s *scanner) indexKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q|%q|%q|%q|%q|", s.cfg.Home, s.cfg.StateDirs, s.cfg.CacheDirs, s.cfg.Covered, s.cfg.Skip)
	rules := s.rules
	if rules == "" {
		_, rules = s.cfg.Cache.patterns()
	}
	io.WriteString(h, rules)
	return hex.EncodeToString(h.Sum(nil))
}

// rulesText is the rules' part of an index key: the package's own,
// the same for every scan. The key's bytes are those of the builds
// before (an index they made is reused, and a build before and this one
// taking turns on one home do not make each other's index void).
func rulesText(pats []namePattern) string {
	return fmt.Sprintf("%v|%v|%v\n", maxDepth, cacheDepth, skipHome) +
		fmt.Sprintf("%v|%v|%v|%v|v2\n", pats, notStores, codeExts, backupSuffixes)
}

// skipHome are trees below the home that package managers, toolchains
// and container engines fill with other people's files.
var skipHome = []string{
	"go/pkg/mod", ".cargo/registry", ".cargo/git", ".rustup", ".m2/repository",
	".gradle/caches", ".gradle/wrapper", ".npm", ".pnpm-store", ".yarn/berry/cache", ".bun/install",
	".nvm", ".pyenv/versions", ".rbenv/versions", ".nodenv/versions", ".sdkman/candidates",
	".local/lib", ".local/share/pnpm", ".local/share/containers", ".local/share/docker",
	".local/share/flatpak", ".local/share/Steam", ".conda/pkgs", ".vscode/extensions",
	".vscode-server", ".cursor-server", ".windsurf-server", ".cursor/extensions",
	".windsurf/extensions", ".vscode-oss/extensions", ".cache/go-build", ".cache/pip", ".cache/uv",
	".cache/bazel", ".cache/huggingface/hub", ".cache/torch", ".cache/mozilla", ".cache/chromium",
	".cache/google-chrome", ".cache/JetBrains",
}

// skipNames are directories skipped wherever they are.
var skipNames = map[string]bool{
	".git": true, ".hg": true, ".svn": true, ".jj": true, "node_modules": true, "__pycache__": true,
	"site-packages": true, "dist-packages": true, "bower_components": true, ".tox": true, ".nox": true,
}

// unscanned says whether entries reveal a tree the scan leaves alone:
// a version-controlled work tree, a bare git repository, a Python
// virtual environment or a conda environment.
func unscanned(names map[string]bool) bool {
	switch {
	case names[".git"], names[".hg"], names[".jj"], names[".svn"], names["_darcs"], names[".fslckout"]:
		return true
	case names["HEAD"] && names["objects"] && names["refs"]:
		return true
	case names["pyvenv.cfg"], names["conda-meta"]:
		return true
	}
	return false
}

func (s *scanner) skipped(p string) bool {
	if s.skip[p] {
		return true
	}
	if rel, ok := pathtree.Rel(s.cfg.Home, filepath.Clean(p)); ok {
		for _, x := range skipHome {
			if rel == x {
				return true
			}
		}
	}
	return false
}

// where is how the walk reached a directory.
type where struct {
	// ToolState: below a dot-directory or in an XDG base directory.
	ToolState bool
	// InRepo: inside a work tree in tools' state.
	InRepo bool
	// Depth is how many more levels the walk may go.
	Depth int
	// Root: a scan root or a followed link, whose own path may be a
	// link and which is never skipped as a work tree.
	Root bool
}

// below is where a subdirectory named name of w is.
func (w where) below(name string) where {
	return where{ToolState: w.ToolState || strings.HasPrefix(name, "."), InRepo: w.InRepo, Depth: w.Depth - 1}
}

// walk scans the directory p.
func (s *scanner) walk(p string, w where) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if s.entries >= maxEntries {
		s.note(fmt.Sprintf("more than %d entries: not scanned from %s on", maxEntries, p))
		return nil
	}
	var stx unix.Statx_t
	flags := unix.AT_SYMLINK_NOFOLLOW
	if w.Root {
		flags = 0 // a root may be a link (~/.config into a dotfiles tree)
	}
	if err := unix.Statx(unix.AT_FDCWD, p, flags, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_CTIME, &stx); err != nil ||
		stx.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil // gone, or not a directory (a root may not exist)
	}
	id := [2]uint64{unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino}
	if s.seen[id] {
		return nil
	}
	s.seen[id] = true
	if !w.Root && stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		// Another file system mounted in the home (a network share, a
		// bind of /): not walked on every launch.
		s.note("a mount point, not scanned: " + p)
		return nil
	}
	ctime := stx.Ctime.Sec*1e9 + int64(stx.Ctime.Nsec)
	rec := s.record(p, stx.Ino, ctime, w)
	s.next.Dirs[p] = rec
	s.entries += rec.Entries + 1
	for _, h := range rec.Hits {
		s.found = append(s.found, Found{Path: childPath(p, h.Name), Class: h.Class})
	}
	for _, sn := range rec.Sniffs {
		if sn.PrivateKey {
			s.found = append(s.found, Found{Path: childPath(p, sn.Name), Class: sn.Class})
		}
	}
	if rec.Skip {
		return nil
	}
	if w.Depth <= 0 {
		if len(rec.Subdirs)+len(rec.Links) > 0 && !w.ToolState {
			s.note(fmt.Sprintf("deeper than %d levels, not scanned: below %s", maxDepth, p))
		}
		return nil
	}
	in := w
	in.InRepo = w.InRepo || rec.Repo
	for _, name := range rec.Subdirs {
		c := childPath(p, name)
		if s.roots[c] || s.covered[c] {
			continue // walked as a root of its own, or a store whole already
		}
		if err := s.walk(c, in.below(name)); err != nil {
			return err
		}
	}
	for _, name := range rec.Links {
		c := childPath(p, name)
		if s.roots[c] || s.covered[c] {
			continue
		}
		next := in.below(name)
		next.Root = true
		if err := s.walk(c, next); err != nil {
			return err
		}
	}
	return nil
}

// record is the directory p's record: the index's, when it still holds,
// else p read again.
func (s *scanner) record(p string, ino uint64, ctime int64, w where) *dirRec {
	old := s.old.Dirs[p]
	if old != nil && old.Settled && old.Ino == ino && old.Ctime == ctime && old.Where == w && s.linksHold(p, old) {
		s.reused++
		return s.recheckSniffs(p, old)
	}
	rec := s.readDir(p, ino, ctime, w)
	if old != nil && old.Unlisted && rec.Unlisted && old.Ino == ino && old.Ctime == ctime && old.Where == w {
		s.unlisted++ // still not listable: nothing to write anew
	}
	return rec
}

// note records a part of the home the scan left out.
func (s *scanner) note(why string) {
	if len(s.partials) < 5 && !slices.Contains(s.partials, why) {
		s.partials = append(s.partials, why)
	}
}

// readDir reads the directory p and matches its entries. A directory
// that cannot be read is read again next time (noted when the reason is
// not permission): nothing the caller, and so the command, can list
// now, but whether she may list it is also her groups', which the
// directory's change time does not follow.
func (s *scanner) readDir(p string, ino uint64, ctime int64, w where) *dirRec {
	s.read++
	rec := &dirRec{Ino: ino, Ctime: ctime, Where: w, Settled: time.Duration(s.started.UnixNano()-ctime) > 2*time.Second,
		LinkTypes: true}
	entries, err := os.ReadDir(p)
	if err != nil {
		if !errors.Is(err, fs.ErrPermission) && !errors.Is(err, fs.ErrNotExist) {
			s.note(fmt.Sprintf("not scanned: %s (%s)", p, publicerr.Reason(err)))
		}
		rec.Settled, rec.Unlisted = false, errors.Is(err, fs.ErrPermission)
		return rec
	}
	rec.Entries = len(entries)
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	if !w.Root && unscanned(names) {
		if !w.ToolState || !versioned(names) {
			rec.Skip = true
			return rec
		}
		// A work tree in tools' state: a dotfiles manager's source
		// (chezmoi's) holds the real files under other names.
		rec.Repo = true
	}
	parent := filepath.Base(p)
	inRepo := w.InRepo || rec.Repo
	// A file directly in the home is where tools keep their state too
	// (~/.env, ~/credentials.json).
	fileScope := (w.ToolState || p == s.cfg.Home) && !inRepo
	for _, e := range entries {
		name := e.Name()
		full := joinName(p, name)
		typ := e.Type()
		if typ&fs.ModeSymlink != 0 {
			if targetIsDir(full) {
				typ = fs.ModeDir | fs.ModeSymlink
			}
			rec.Symlinks = append(rec.Symlinks, linkRec{name, typ.IsDir()})
		}
		isDir := typ.IsDir()
		if s.backupOfCovered(p, name) {
			rec.Hits = append(rec.Hits, hit{name, Credentials})
			continue
		}
		switch {
		case isDir:
			dirScope := (w.ToolState || strings.HasPrefix(name, ".")) && !inRepo
			if m, ok := matchName(name, true, parent, dirScope, s.pats); ok {
				rec.Hits = append(rec.Hits, hit{name, m.class})
				continue // a store whole: nothing below needs a name
			}
			// A package format's per-application cache (~/snap/*/*/.cache,
			// ~/.var/app/*/cache) holds no store; the home's own cache
			// is a root, walked cacheDepth deep.
			appCache := (name == ".cache" || (name == "cache" && filepath.Base(filepath.Dir(p)) == "app")) && p != s.cfg.Home
			if skipNames[name] || s.skipped(full) || (name == "mod" && parent == "pkg") || appCache {
				continue
			}
			if typ&fs.ModeSymlink == 0 {
				rec.Subdirs = append(rec.Subdirs, name)
			} else if w.ToolState || strings.HasPrefix(name, ".") {
				rec.Links = append(rec.Links, name)
			}
		case typ.IsRegular() || typ&fs.ModeSymlink != 0:
			m, ok := matchName(name, false, parent, fileScope, s.pats)
			if !ok {
				continue
			}
			if !m.sniff {
				rec.Hits = append(rec.Hits, hit{name, m.class})
				continue
			}
			rec.Sniffs = append(rec.Sniffs, s.sniff(full, name, m.class))
		}
	}
	return rec
}

// joinName is filepath.Join for a clean absolute directory and one
// name, without Join's cleaning of every entry's path.
func joinName(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// targetIsDir says whether the symlink p leads to a directory.
func targetIsDir(p string) bool {
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// linksHold says whether every symlink of an indexed directory still
// leads to what it led to (a directory or not) when it was read.
func (s *scanner) linksHold(p string, rec *dirRec) bool {
	if !rec.LinkTypes {
		return false
	}
	for _, l := range rec.Symlinks {
		if targetIsDir(childPath(p, l.Name)) != l.Dir {
			return false
		}
	}
	return true
}

// childPath is filepath.Join(dir, name) for a clean absolute directory:
// joinName for a plain name (what a directory lists), Join for anything
// else (a name read from an index is the caller's file's).
func childPath(dir, name string) string {
	if name == "" || name == "." || name == ".." || strings.IndexByte(name, '/') >= 0 {
		return filepath.Join(dir, name)
	}
	return joinName(dir, name)
}

// versioned says whether entries are a version-controlled work tree or
// repository (not an environment).
func versioned(names map[string]bool) bool {
	return !names["pyvenv.cfg"] && !names["conda-meta"]
}

// backupOfCovered says whether name, in dir, is a backup of a store
// already denied whole there (~/.netrc~, ~/.claude.json.bak).
func (s *scanner) backupOfCovered(dir, name string) bool {
	if len(s.covered) == 0 {
		return false
	}
	orig, ok := backupOf(name)
	return ok && s.covered[filepath.Join(dir, orig)]
}

// sniff reads a key-like file's start and records what it said. A file
// that cannot be read for another reason than permission counts as a
// key (fail closed) and is read again next time.
func (s *scanner) sniff(p, name string, class Class) sniffRec {
	sn := sniffRec{Name: name, Class: class}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return sn // gone, or a dangling link: nothing to read
	}
	sn.Ino, sn.Ctime, sn.Size = st.Ino, st.Ctim.Nano(), st.Size
	if time.Duration(s.started.UnixNano()-sn.Ctime) <= 2*time.Second {
		sn.Ctime = 0 // changed just now: read it again next time
	}
	ok, err := sniffFile(p)
	if err != nil {
		sn.Ctime, ok = 0, true
	}
	sn.PrivateKey = ok
	return sn
}

// recheckSniffs rereads the key-like files of an indexed directory
// that changed since (a file rewritten in place leaves its directory's
// change time alone), and every one that was no key: a write through a
// shared mapping changes no time the record holds (on tmpfs never,
// elsewhere not while the page stays dirty), so only a key, which stays
// found, is taken from the record.
func (s *scanner) recheckSniffs(p string, rec *dirRec) *dirRec {
	if len(rec.Sniffs) == 0 {
		return rec
	}
	out := *rec
	out.Sniffs = make([]sniffRec, len(rec.Sniffs))
	for i, sn := range rec.Sniffs {
		var st unix.Stat_t
		full := childPath(p, sn.Name)
		if err := unix.Stat(full, &st); err == nil && sn.PrivateKey && sn.Ctime != 0 && st.Ino == sn.Ino && st.Ctim.Nano() == sn.Ctime && st.Size == sn.Size {
			out.Sniffs[i] = sn
			continue
		}
		out.Sniffs[i] = s.sniff(full, sn.Name, sn.Class)
		// The index is rewritten only when what it holds changed.
		s.resniffed = s.resniffed || out.Sniffs[i] != sn
	}
	return &out
}

// loadIndex reads the index at p, or returns an empty one when there is
// none, it cannot be read, or it was made under other rules.
func loadIndex(p, key string, uid int, cache *IndexCache) *index {
	empty := &index{Dirs: map[string]*dirRec{}}
	if p == "" {
		return empty
	}
	x, err := readIndex(p, uid, cache)
	if err != nil || x.Key != key || x.Dirs == nil {
		return empty
	}
	return x
}

// saveIndex writes the index atomically, readable by its owner only.
func saveIndex(p string, x *index) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(x); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, buf.Bytes(), 0o600)
}
