package credstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
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
	// the scan does not descend into them.
	Covered []string
	// Index is the file the scan keeps its index in, "" for none. It
	// must be out of the command's reach (sandboxd's state).
	Index string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
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
	s := &scanner{ctx: ctx, cfg: cfg, started: now(), pats: namePatterns(), roots: map[string]bool{}, covered: map[string]bool{}}
	for _, c := range cfg.Covered {
		s.covered[filepath.Clean(c)] = true
	}
	s.key = s.indexKey()
	s.old = loadIndex(cfg.Index, s.key)
	s.next = &index{Key: s.key, Dirs: map[string]*dirRec{}}
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
		if err := s.walk(r.path, r.toolState, r.depth, true); err != nil {
			return Result{}, err
		}
		if s.entries >= maxEntries {
			break
		}
	}
	if cfg.Index != "" && (s.read > 0 || s.resniffed || len(s.next.Dirs) != len(s.old.Dirs) || s.old.Key != s.key) {
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
	// ToolState and Depth are the scope the directory was read in.
	ToolState bool
	Depth     int
	// Skip: a work tree, repository or environment, not descended.
	Skip bool
	// Entries is how many entries the directory had.
	Entries int
	Subdirs []string
	Hits    []hit
	Sniffs  []sniffRec
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
	roots   map[string]bool
	covered map[string]bool
	key     string
	old     *index
	next    *index
	found   []Found
	partial string
	entries int
	read    int
	reused  int
	// resniffed: a key-like file of an indexed directory was read again.
	resniffed bool
}

// indexKey changes whenever the rules or the roots do, so an index
// made under other ones is not trusted.
func (s *scanner) indexKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "%v|%v|%v|%v|%v|%v|%v\n", s.cfg.Home, s.cfg.StateDirs, s.cfg.CacheDirs, s.cfg.Covered, maxDepth, cacheDepth, skipHome)
	fmt.Fprintf(h, "%v|%v|%v\n", s.pats, notStores, codeExts)
	return hex.EncodeToString(h.Sum(nil))
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
	".cache/google-chrome", ".cache/JetBrains", "snap",
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
	if rel, err := filepath.Rel(s.cfg.Home, p); err == nil && !strings.HasPrefix(rel, "..") {
		for _, x := range skipHome {
			if rel == x {
				return true
			}
		}
	}
	return false
}

// walk scans the directory p: depth is how many more levels it may go.
func (s *scanner) walk(p string, toolState bool, depth int, isRoot bool) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if s.entries >= maxEntries {
		if s.partial == "" {
			s.partial = fmt.Sprintf("more than %d entries: scanned up to %s", maxEntries, p)
		}
		return nil
	}
	var st unix.Stat_t
	stat := unix.Lstat
	if isRoot {
		stat = unix.Stat // a root may be a link (~/.config into a dotfiles tree)
	}
	if err := stat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil // gone, or not a directory (a root may not exist)
	}
	ctime := st.Ctim.Nano()
	rec := s.old.Dirs[p]
	if rec != nil && rec.Ino == st.Ino && rec.Ctime == ctime && rec.ToolState == toolState && rec.Depth == depth &&
		time.Duration(s.started.UnixNano()-ctime) > 2*time.Second {
		// As indexed (and changed long enough before this scan began
		// that a change within the same clock tick cannot hide).
		s.reused++
		rec = s.recheckSniffs(p, rec)
	} else {
		var err error
		if rec, err = s.readDir(p, &st, toolState, depth, isRoot); err != nil {
			return err
		}
	}
	s.next.Dirs[p] = rec
	s.entries += rec.Entries + 1
	for _, h := range rec.Hits {
		s.found = append(s.found, Found{Path: filepath.Join(p, h.Name), Class: h.Class})
	}
	for _, sn := range rec.Sniffs {
		if sn.PrivateKey {
			s.found = append(s.found, Found{Path: filepath.Join(p, sn.Name), Class: sn.Class})
		}
	}
	if rec.Skip || depth <= 0 {
		return nil
	}
	for _, name := range rec.Subdirs {
		c := filepath.Join(p, name)
		if s.roots[c] || s.covered[c] {
			continue // walked as a root of its own, or a store whole already
		}
		if err := s.walk(c, toolState || strings.HasPrefix(name, "."), depth-1, false); err != nil {
			return err
		}
	}
	return nil
}

// readDir reads the directory p and matches its entries.
func (s *scanner) readDir(p string, st *unix.Stat_t, toolState bool, depth int, isRoot bool) (*dirRec, error) {
	s.read++
	rec := &dirRec{Ino: st.Ino, Ctime: st.Ctim.Nano(), ToolState: toolState, Depth: depth}
	entries, err := os.ReadDir(p)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
			return rec, nil // nothing the caller, and so the command, can list
		}
		return nil, fmt.Errorf("credstore: scan %s: %w", p, err)
	}
	rec.Entries = len(entries)
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	if !isRoot && unscanned(names) {
		rec.Skip = true
		return rec, nil
	}
	parent := filepath.Base(p)
	// A file directly in the home is where tools keep their state too
	// (~/.env, ~/credentials.json).
	fileScope := toolState || p == s.cfg.Home
	for _, e := range entries {
		name := e.Name()
		typ := e.Type()
		switch {
		case typ.IsDir():
			if m, ok := matchName(name, true, parent, toolState || strings.HasPrefix(name, "."), s.pats); ok {
				rec.Hits = append(rec.Hits, hit{name, m.class})
				continue // a store whole: nothing below needs a name
			}
			if skipNames[name] || s.skipped(filepath.Join(p, name)) {
				continue
			}
			rec.Subdirs = append(rec.Subdirs, name)
		case typ.IsRegular() || typ&fs.ModeSymlink != 0:
			m, ok := matchName(name, false, parent, fileScope, s.pats)
			if !ok {
				continue
			}
			if !m.sniff {
				rec.Hits = append(rec.Hits, hit{name, m.class})
				continue
			}
			rec.Sniffs = append(rec.Sniffs, s.sniff(filepath.Join(p, name), name, m.class))
		}
	}
	return rec, nil
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
// change time alone).
func (s *scanner) recheckSniffs(p string, rec *dirRec) *dirRec {
	if len(rec.Sniffs) == 0 {
		return rec
	}
	out := *rec
	out.Sniffs = make([]sniffRec, len(rec.Sniffs))
	for i, sn := range rec.Sniffs {
		var st unix.Stat_t
		full := filepath.Join(p, sn.Name)
		if err := unix.Stat(full, &st); err == nil && sn.Ctime != 0 && st.Ino == sn.Ino && st.Ctim.Nano() == sn.Ctime && st.Size == sn.Size {
			out.Sniffs[i] = sn
			continue
		}
		out.Sniffs[i] = s.sniff(full, sn.Name, sn.Class)
		s.resniffed = true
	}
	return &out
}

// loadIndex reads the index at p, or returns an empty one when there is
// none, it cannot be read, or it was made under other rules.
func loadIndex(p, key string) *index {
	empty := &index{Dirs: map[string]*dirRec{}}
	if p == "" {
		return empty
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return empty
	}
	var x index
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&x); err != nil || x.Key != key || x.Dirs == nil {
		return empty
	}
	return &x
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
