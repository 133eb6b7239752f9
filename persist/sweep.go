package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/pathtree"
	"golang.org/x/sys/unix"
)

// The sweep: a run written straight to the workspace (--no-transaction,
// or no copy-on-write layer possible) has no commit to check, so the
// persistence paths are protected around it instead, by the same rules
// (Checker) a layer's commit applies. The caller (package sandbox) plans
// the sweep before the run, binds what the plan names, and runs the sweep
// after every process of the run is gone, both as the caller (fsid).
//
// Those that exist when the run starts are bound read-only, and every
// directory between the workspace and them is pinned (bound onto itself)
// so it cannot be renamed away. Those that do not exist cannot be blocked
// by a mount: after the command and all its processes are gone, the
// workspace is scanned again, and whatever the rules refuse among what is
// new (a repository, a protected name at any depth, sequencer state or a
// redirect in an existing repository) is moved into sandboxd's quarantine.
// What the rules list (agent instructions, protected names in a package
// tree or a new clone) stays and is reported; git directories, hooks and
// configs, and any directory, that gained group or other write lose it.

// Persisted is one thing the persistence rules did about a path the
// command left in the workspace.
type Persisted struct {
	// Path is workspace-relative.
	Path string `json:"path"`
	// Action is "quarantined" (moved to Quarantine), "removed" (deleted:
	// quarantine is on another file system), "listed" (kept, for the
	// person to see: agent instructions, a protected name in a package
	// tree or a new clone), "committed" (the same, after a layer commit)
	// or "narrowed" (group/other write taken away).
	Action     string `json:"action"`
	Why        string `json:"why,omitempty"`
	Quarantine string `json:"quarantine,omitempty"`
}

// SweepSpec is what a sweep needs to know of the run.
type SweepSpec struct {
	// Workspace is the absolute, symlink-free workspace path.
	Workspace string
	// Owner and Umask are the caller's: the sweep opens only directories
	// Owner owns, and a new directory keeps no more than Umask allows.
	Owner int
	Umask uint32
	// Protected are extra persistence name patterns (Names).
	Protected []string
	// Unguarded are the roots outside the workspace the command writes
	// unchecked (Config.Unguarded): extra writable roots, private caches.
	Unguarded []string
	// Home and GitConfigs are as in Config.
	Home       string
	GitConfigs []string
}

// fileID is an entry's identity: what was there, not what it holds.
type fileID struct{ dev, ino uint64 }

// markID is an entry as it was, content and mode included (ctime).
type markID struct {
	ino   uint64
	ctime int64
}

// Sweep is one run's sweep: what to bind for the run, and what to check
// after it. Paths are relative to the workspace.
type Sweep struct {
	ws       string
	uid      int // the caller's
	m        *Matcher
	pins     []string                // directories to pin, parents first
	readOnly []string                // existing protected files and directories
	watch    map[string]fileID       // sensitive paths and what was there at start (zero = nothing)
	repos    map[string]fileID       // git directories inside the workspace at start
	named    map[string]fileID       // protected names and instruction files at start
	ctimes   map[string]int64        // instruction files' change times at start
	modes    map[string]uint32       // git directories, hooks and configs: mode at start
	acls     map[string]uint8        // git directories and hooks: ACLs at start
	shared   map[string]uint32       // git directory → group/other write sharing allows
	markers  map[string]markID       // what made or could make a directory a repository (HEAD, objects, ...) at start
	scan     *Scan                   // the workspace scan the plan was made from
	cfg      Config                  // for the checks after the run
	since    int64                   // the run's start, as change times count it
	history  map[string]*historySnap // repository (workspace-relative git directory) → its history files before
	umask    uint32                  // the caller's
	pinned   map[string]bool         // pins as a set, while planning
}

// Pins are the directories to pin (bind onto themselves) for the run,
// parents first.
func (p *Sweep) Pins() []string { return p.pins }

// ReadOnly are the existing protected files and directories to bind
// read-only for the run.
func (p *Sweep) ReadOnly() []string { return p.readOnly }

// Scan is the workspace as the plan saw it, and after Run as the command
// left it: what to remember for the next run (SaveScan).
func (p *Sweep) Scan() *Scan { return p.scan }

func lstatID(p string) (fileID, os.FileInfo, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return fileID{}, nil, err
	}
	sys := st.Sys().(*syscall.Stat_t)
	return fileID{uint64(sys.Dev), sys.Ino}, st, nil
}

// within returns path relative to ws when it lies strictly inside it.
func within(ws, path string) (string, bool) {
	return pathtree.Below(filepath.Clean(ws), filepath.Clean(path))
}

// Run sweeps the workspace, after every process of the run is gone.
// Whatever the rules refuse among what is new is moved to the directory
// quarantine (or removed when it is on another file system); what they
// list is reported. The scan never follows symlinks, and each move is
// done relative to a parent opened beneath the workspace without
// symlinks. A pass can uncover more (a fake repository hid what is below
// it until its HEAD went), so passes repeat until one moves nothing.
// Afterwards Scan is the workspace as the command left it.
func (p *Sweep) Run(quarantine string) ([]Persisted, error) {
	const maxPasses = 8
	start := p.scan
	cfg := p.cfg
	// What the rules say, with the workspace as it is now and, before,
	// what the scan at the start saw.
	cfg.Before = newSnapFS(start.Tree(p.ws), p.history)
	st := &sweepState{quarantine: quarantine, listed: map[string]bool{}, rolled: map[string]string{}}
	// What the command locked stays open until every rule has looked and
	// every move is done: the rules read the workspace itself (a git
	// directory's entries, a repository's HEAD), not only the scan.
	opened := unlocked{}
	var after *Scan
	var lastChecker *Checker // the rules as the last pass saw the workspace
	for pass := 0; ; pass++ {
		var err error
		after, err = p.scanAfter(start, opened)
		if err != nil {
			opened.restore(p.ws, nil)
			return st.out, errors.Join(append(st.errs, err)...)
		}
		if pass == maxPasses {
			st.errs = append(st.errs, errors.New("the workspace kept changing under the persistence sweep"))
			break
		}
		cfg.FinalRepos = after.Repos(p.ws, Host{})
		c := NewChecker(cfg)
		lastChecker = c
		if p.sweepPass(after, c, st) == 0 {
			break
		}
	}
	// History the run added that would bring back what the rules refuse
	// is undone (persist/history.go).
	hc := lastChecker
	if hc == nil {
		hc = NewChecker(cfg)
	}
	p.restoreHistory(hc, st)
	narrowed := p.narrow(after, st.gone)
	st.out = append(st.out, narrowed...)
	opened.restore(p.ws, after)
	// What the plan read afresh is new to the remembered scan too; after
	// a move (or a mode put back) the workspace is scanned once more.
	if len(st.gone) > 0 || len(narrowed) > 0 {
		if err := rescan(p, after); err != nil {
			st.errs = append(st.errs, err)
		}
	} else {
		after.MarkFresh()
		p.scan = after
	}
	sort.SliceStable(st.out, func(a, b int) bool { return st.out[a].Path < st.out[b].Path })
	return st.out, errors.Join(st.errs...)
}

// sweepState is what the passes of one sweep have done so far.
type sweepState struct {
	quarantine string
	out        []Persisted
	gone       []string // moved out of the workspace
	errs       []error
	listed     map[string]bool
	// rolled are git directories whose repository's metadata a pass
	// rolled back (Rollback), and why: what the pass took out is
	// gone from the next pass's view, the reason must not be.
	rolled map[string]string
}

// sweepPass judges what is new since the start, as the workspace is
// after, and moves out what the rules refuse. It returns how many
// entries it moved.
func (p *Sweep) sweepPass(after *Scan, c *Checker, st *sweepState) int {
	cands, notes := p.candidates(after, c)
	for _, n := range notes {
		if !st.listed[n.Path] {
			st.listed[n.Path] = true
			st.out = append(st.out, n)
		}
	}
	moved := p.rollBack(c, st)
	for _, cd := range cands {
		if pathtree.WithinAny(cd.rel, st.gone) {
			continue // it went with a directory above it
		}
		var v Verdict
		target := cd.rel
		switch {
		case cd.repo:
			v, target = p.judgeRepo(c, cd.rel, p.scan)
		case cd.why != "":
			v = Verdict{Action: Refuse, Why: cd.why}
		default:
			v = judgeTree(c, p.ws, cd.rel)
		}
		switch v.Action {
		case Keep:
			continue
		case List:
			if !st.listed[cd.rel] {
				st.listed[cd.rel] = true
				st.out = append(st.out, Persisted{Path: cd.rel, Action: "listed", Why: v.Why})
			}
			continue
		}
		moved += p.quarantine(strings.Split(target, "\x00"), v.Why, st)
	}
	return moved
}

// rollBack takes out what the run created for the linked worktrees and
// submodules of each repository whose metadata the rules roll back
// (their new git directories and work trees: the rest of a unit, its
// gitfiles and .gitmodules, goes as a candidate), and remembers the
// repository for restoreHistory. It returns how many entries it moved.
func (p *Sweep) rollBack(c *Checker, st *sweepState) int {
	moved := 0
	for _, rb := range c.Rollbacks() {
		for _, g := range rb.GitDirs {
			if st.rolled[g] == "" {
				st.rolled[g] = rb.Why
			}
		}
		moved += p.quarantine(rb.Paths, rb.Why, st)
	}
	return moved
}

// quarantine moves each target out of the workspace.
func (p *Sweep) quarantine(targets []string, why string, st *sweepState) int {
	moved := 0
	for _, t := range targets {
		if pathtree.WithinAny(t, st.gone) {
			continue
		}
		q, err := quarantineEntry(p.ws, t, st.quarantine)
		if err != nil {
			st.errs = append(st.errs, err)
			continue
		}
		st.gone = append(st.gone, t)
		moved++
		act := "quarantined"
		if q == "" {
			act = "removed"
		}
		st.out = append(st.out, Persisted{Path: t, Action: act, Why: why, Quarantine: q})
	}
	return moved
}

// restoreHistory puts back the history files of each repository whose
// new history the rules refuse.
func (p *Sweep) restoreHistory(hc *Checker, st *sweepState) {
	for rel, snap := range p.history {
		if pathtree.WithinAny(rel, st.gone) || !snap.changed() {
			continue
		}
		why := st.rolled[rel]
		if why == "" {
			why = hc.RolledBack(rel)
		}
		for _, g := range st.gone {
			// A link moved out from where git keeps history (refs/ as a
			// symlink) leaves a hole the snapshot fills.
			if sub, ok := pathtree.Below(rel, g); ok && historyFile(sub) && why == "" {
				why = g + " was not kept"
			}
		}
		if why != "" {
			if err := snap.restore(); err != nil {
				st.errs = append(st.errs, fmt.Errorf("restore the history of %s: %w", rel, err))
			}
			st.out = append(st.out, Persisted{Path: rel, Action: "restored", Why: why + "; its refs, index and reflogs were put back as they were before the run"})
		}
	}
}

// scanAfter scans the workspace as the command left it (prev: what to
// trust of an earlier scan). The sweep must reach whatever the command
// left, and a command can lock its own directories: the scan only reads,
// so what the caller owns but the scan could not list is opened (unlock,
// added to opened) and the workspace scanned again, until nothing new is
// locked. The directories stay open for the caller to restore; the scan
// records the modes the command left.
func (p *Sweep) scanAfter(prev *Scan, opened unlocked) (*Scan, error) {
	sc := Scanner{Names: p.m}
	s, err := sc.Scan(p.ws, prev)
	for {
		n := len(opened)
		s.unlock(p.ws, s.lockedBy(p.uid), opened)
		if len(opened) == n {
			break // nothing more to open
		}
		memory := s
		if len(s.Dirs) == 0 {
			memory = prev // the workspace itself was locked
		}
		s, err = sc.Scan(p.ws, memory)
	}
	if err != nil {
		return nil, err
	}
	p.openGitDirs(s, opened)
	opened.record(s)
	return s, nil
}

// openGitDirs opens, as unlock does, every git directory the sweep
// watches or the scan found, and each directory on the way to it, that
// the caller owns and may not list or search: the scan does not enter
// git directories, so it never finds one locked, and the rules read them.
func (p *Sweep) openGitDirs(s *Scan, opened unlocked) {
	var dirs []string
	for rel := range p.watch {
		dirs = append(dirs, filepath.Dir(rel))
	}
	for rel := range p.repos {
		dirs = append(dirs, rel)
	}
	for _, rel := range s.WithMark(".git") {
		dirs = append(dirs, joinRel(rel, ".git"))
	}
	sort.Strings(dirs)
	for _, rel := range dirs {
		p.openWay(rel, opened)
	}
}

// openWay opens each directory from the workspace down to rel that the
// caller owns and may not list or search, recording its mode in opened.
// It stops where the way is not a directory.
func (p *Sweep) openWay(rel string, opened unlocked) {
	if rel == "." || rel == "" {
		return
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		r := strings.Join(parts[:i+1], "/")
		if _, done := opened[r]; done {
			continue
		}
		path := joinPath(p.ws, r)
		var st unix.Stat_t
		if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return
		}
		if int(st.Uid) != p.uid || st.Mode&0o500 == 0o500 {
			continue
		}
		if unix.Chmod(path, st.Mode&0o7777|0o500) != nil {
			return
		}
		opened[r] = st.Mode & 0o7777
	}
}

func rescan(p *Sweep, after *Scan) error {
	opened := unlocked{}
	s, err := p.scanAfter(after, opened)
	opened.restore(p.ws, s)
	if err != nil {
		return err
	}
	s.MarkFresh()
	p.scan = s
	return nil
}
